# SPDX-License-Identifier: Apache-2.0
"""Options of the glance_store driver ``gvfs``.

glance_store registers a driver's ``OPTIONS`` itself, in the group of
each backend of ``enabled_backends`` (or ``[glance_store]``), so this
module only holds them; every name carries the driver's ``gvfs_store_``
prefix, as glance_store wants.
"""

from oslo_config import cfg

from gvfs_openstack.conf import share as share_conf

#: The group name the sample shows; it stands for each backend's group.
GROUP = "gvfs"

OPTS = [
    cfg.StrOpt("gvfs_store_datadir",
               help="""Directory the store keeps images in.

With ``gvfs_store_mount_type = none``: an absolute path, the GVFS mount of
the DTN export (or a directory inside it) that the operator mounted. With
a mount type: a path relative to the export's root ("" for the root). It
must exist and be writable by glance-api.
"""),
] + share_conf.share_opts(
    "gvfs_store_", "/var/lib/glance/gvfs-mounts", "gvfs_store_datadir") + [
    cfg.BoolOpt("gvfs_store_thin_provisioning", default=True,
                help="""Store all-zero chunks as holes.

A sparse image then takes only its data on the export and crosses the WAN
once; its zero extents are served by the proxies from the sidecar.
"""),
    cfg.BoolOpt("gvfs_store_sidecars", default=True,
                help="Write the metadata sidecar ``.gvfs-meta.<image id>`` "
                     "next to each image, for the GVFS proxies."),
    cfg.BoolOpt("gvfs_store_block_signatures", default=True,
                help="""Write each image's block signature as it is uploaded.

The digest of every 4 KiB block, kept as ``.gvfs-meta.<image id>.blocks``:
the migration conductor's delta transfer of a new version reads it instead
of the whole image.  Computed on a thread of its own while the upload is
written (about 1.7 s of CPU a GiB), and held in glance-api's memory until
the upload ends (4 MiB a GiB of image); turn it off on a site whose images
are never migrated.

Related options: gvfs_store_sidecars.
"""),
    cfg.ListOpt("gvfs_store_whole_file_formats", default=["iso"],
                help="""Disk formats whose images are read in full.

Their sidecar tells client proxies to fetch the whole file, compressed,
at its first read, instead of block by block (e.g. installer ISOs). The
format is recognised from the image's first bytes (iso, qcow2, vmdk, vhdx,
else raw): glance_store does not pass the disk format to drivers.
"""),
    cfg.IntOpt("gvfs_store_chunk_size", default=4 * 1024 * 1024,
               min=64 * 1024,
               help="Bytes read from the upload and written per call; a "
                    "multiple of 4096 keeps holes aligned."),
    cfg.FloatOpt("gvfs_store_delete_grace", default=3.0, min=0.0,
                 help="""Seconds a deleted image waits aside before its
references are counted.

Nova's ``gvfs`` backend makes instance disks overlays of the image on the
shared export and references it in ``.gvfs-refs/``; an image with
references is not deleted (409 Conflict).  The wait must be at least how
long the compute nodes' mounts may show a removed name: the FUSE mount's
``[mount] entry_timeout`` and ``attr_timeout``, or a kernel NFS mount's
``acregmax``/``acdirmax``.  0 if no Nova uses this store's export.
"""),
    cfg.IntOpt("gvfs_store_file_perm", default=0o640, min=0o400, max=0o777,
               help="Permissions of stored images (octal, e.g. 0o640)."),
]


def list_opts():
    """The driver's options, as in a glance-api backend group."""
    return [(GROUP, OPTS)]
