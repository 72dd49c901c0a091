# SPDX-License-Identifier: Apache-2.0
"""``[gvfs_openstack_privileged]``: the privsep daemon of kernel NFS mounts.

oslo.privsep registers these options itself when the context of
:mod:`gvfs_openstack.mount.privileged` is made.  glance-api and
nova-compute read them to start that daemon (``helper_command``, ``user``,
``group``, ``capabilities``), so their sample configurations list them.
"""

from oslo_privsep import priv_context

GROUP = "gvfs_openstack_privileged"


def list_opts():
    return [(GROUP, priv_context.OPTS)]
