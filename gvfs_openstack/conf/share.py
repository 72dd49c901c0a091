# SPDX-License-Identifier: Apache-2.0
"""Options of a service that mounts the DTN export itself.

The Glance store and Nova's backend reach the export the same way (the
one mount interface of :mod:`gvfs_openstack.mount.mounter`), so they take
the same options; glance_store wants a driver's options to carry the
driver's prefix (``gvfs_store_``), Nova's ``[gvfs]`` group has none.
:mod:`gvfs_openstack.mount.configured` makes the mount they describe.
"""

from oslo_config import cfg


def share_opts(prefix, mount_point_base, images_dir_opt):
    """The options, named ``prefix + name``.

    ``images_dir_opt`` names the option holding the images' directory.
    """
    return [
        cfg.StrOpt(prefix + "mount_type", default="none",
                   choices=[("none", "%s is already mounted"
                             % images_dir_opt),
                            ("nfs", "kernel NFS mount of the client proxy "
                                    "(privsep)"),
                            ("fuse", "``gvfs-proxy mount``")],
                   help="""How the export of the DTN is reached.

With ``nfs`` or ``fuse`` the service mounts the export itself, checks the
mount answers within ``%(p)sio_timeout`` before it relies on it, and
remounts a hung or dead one.  Related options: %(p)sproxy, %(p)sexport,
%(p)smount_point_base.
""" % {"p": prefix}),
        cfg.StrOpt(prefix + "proxy", default="127.0.0.1:2049",
                   help="``host:port`` of this node's GVFS client proxy "
                        "(its NFS and MOUNT port)."),
        cfg.StrOpt(prefix + "export",
                   help="Path of the export on the DTN, e.g. "
                        "``/srv/images``; required with a mount type."),
        cfg.StrOpt(prefix + "mount_point_base", default=mount_point_base,
                   help="Directory under which the export is mounted (one "
                        "directory per export, named as os-brick does)."),
        cfg.ListOpt(prefix + "mount_options", default=[],
                    help="Extra ``mount -o`` options for the ``nfs`` mount "
                         "type, e.g. ``nconnect=4``; ``hard`` turns the "
                         "timeouts off."),
        cfg.StrOpt(prefix + "mount_config",
                   help="A configuration file with a ``[mount]`` section "
                        "for ``gvfs-proxy mount`` (the ``fuse`` mount "
                        "type)."),
        cfg.FloatOpt(prefix + "io_timeout", default=60.0, min=1.0,
                     help="Seconds before I/O on a hung mount fails, and "
                          "the limit of the health check of the mount."),
    ]
