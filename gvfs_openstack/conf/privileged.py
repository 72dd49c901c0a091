# SPDX-License-Identifier: Apache-2.0
"""``[gvfs_openstack_privileged]``: the privsep daemon of kernel NFS mounts.

oslo.privsep registers its own options in this group when the context of
:mod:`gvfs_openstack.mount.privileged` is made; glance-api and
nova-compute read them to start that daemon (``helper_command``, ``user``,
``group``, ``capabilities``), so their sample configurations list them.

The daemon reads the options below from the configuration files it is
started with (privsep-helper is given the service's own), and checks
every mount against them rather than against anything the unprivileged
service asks with: a compromised glance-api or nova-compute cannot have
it mount another share, or mount over another directory.
"""

from oslo_config import cfg
from oslo_config import types
from oslo_privsep import priv_context

GROUP = "gvfs_openstack_privileged"

MOUNT_OPTS = [
    cfg.ListOpt("mount_bases",
                default=["/var/lib/nova/gvfs-mounts",
                         "/var/lib/glance/gvfs-mounts"],
                help="""Directories the privileged daemon mounts in.

A mount point must be directly inside one of them (named after the
share, as os-brick names it).  The defaults are Nova's ``[gvfs]
mount_point_base`` and Glance's ``gvfs_store_mount_point_base``; list
yours if you changed them.
"""),
    cfg.ListOpt("proxy_hosts", default=["127.0.0.1", "::1", "localhost"],
                help="""Hosts whose NFS shares may be mounted: the node's
own GVFS client proxy, which the kernel NFS client reaches on loopback.
"""),
    cfg.ListOpt("proxy_ports", item_type=types.Port(), default=[],
                help="""Ports of the node's GVFS client proxy that may be
mounted: a mount must name one as both ``port`` and ``mountport``.

Empty, the default: no kernel NFS mount is allowed.  Without it a
service could point the kernel at any NFS server on the proxy host (a
DTN's own NFS server on loopback, say).
"""),
    cfg.ListOpt("exports", default=[],
                help="""Export paths (on the DTN) that may be mounted, as
the service's ``export``/``gvfs_store_export`` option names them.

Empty, the default: no kernel NFS mount is allowed, so a service
configured with a mount type of ``nfs`` must list its export here.
"""),
]


def register(conf):
    conf.register_opts(MOUNT_OPTS, group=GROUP)


def list_opts():
    return [(GROUP, priv_context.OPTS + MOUNT_OPTS)]
