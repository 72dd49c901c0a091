# SPDX-License-Identifier: Apache-2.0
"""``nova.virt.gvfs``: where Nova's driver loader finds the gvfs driver.

nova-compute loads ``compute_driver`` as ``nova.virt.<compute_driver>``
(``nova.virt.driver.load_compute_driver``), so an out-of-tree driver is
reachable only from inside the ``nova.virt`` package.  The
``gvfs-openstack`` wheel installs this one module there (``[files]
modules`` in setup.cfg; it owns no ``__init__.py`` of Nova's), so the
stock nova-compute loads the driver with::

    [DEFAULT]
    compute_driver = gvfs.GvfsLibvirtDriver

The driver itself lives in :mod:`gvfs_openstack.nova.driver`; keep this
module a re-export and nothing else.
"""

from gvfs_openstack.nova.driver import GvfsLibvirtDriver

__all__ = ["GvfsLibvirtDriver"]
