# SPDX-License-Identifier: Apache-2.0
"""``gvfs-nova-compute``: nova-compute that can load ``GvfsLibvirtDriver``.

Nova loads its compute driver with ``importutils.import_object('nova.virt.'
+ CONF.compute_driver)``: only classes inside the ``nova.virt`` package
load, a full class path elsewhere does not.  Out-of-tree drivers used to
ship files into Nova's own ``nova/virt/`` directory, which breaks with
editable installs and makes two packages own one directory.  This wrapper
instead makes ``nova.virt.gvfs`` an alias of
:mod:`gvfs_openstack.nova.driver` and then runs nova-compute unchanged, so

    [DEFAULT]
    compute_driver = gvfs.GvfsLibvirtDriver

loads the driver through Nova's own loader.  Run this instead of
``nova-compute``, with the same arguments.  Plain ``nova-compute`` with
that setting stops at start with Nova's "Unable to load the
virtualization driver".
"""

import sys


def register():
    """Make ``nova.virt.gvfs`` name the driver module."""
    from gvfs_openstack.nova import driver
    sys.modules.setdefault("nova.virt.gvfs", driver)
    import nova.virt
    nova.virt.gvfs = sys.modules["nova.virt.gvfs"]


def main():
    # nova-compute's module sets up its threading model before any other
    # part of Nova is imported: import it first.
    from nova.cmd import compute
    register()
    return compute.main()
