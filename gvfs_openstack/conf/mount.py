# SPDX-License-Identifier: Apache-2.0
"""Options of ``gvfs-proxy mount``: the FUSE frontend of a client proxy."""

from oslo_config import cfg

mount_group = cfg.OptGroup(
    "mount", title="FUSE mount",
    help="``gvfs-proxy mount`` serves an export of the DTN as a local "
         "directory by talking NFSv3 to a client proxy, for hosts "
         "without a kernel NFS client.")

mount_opts = [
    cfg.StrOpt("export",
               help="""Path of the export on the DTN, e.g. ``/srv/images``.

Required by ``gvfs-proxy mount`` unless given with ``--export``.
"""),
    cfg.HostAddressOpt("proxy_host",
                       help="""Address of the client proxy to mount from.

Unset: ``[listen] host`` of this configuration file (the usual case: the
mount and the proxy share one file).
"""),
    cfg.PortOpt("proxy_port",
                help="""NFS and MOUNT port of the client proxy.

Unset: ``[listen] port`` of this configuration file, which must then not be
0 (an ephemeral port cannot be found by the mount).
"""),
    cfg.FloatOpt("io_timeout", default=60.0, min=0.5,
                 help="""Seconds a file operation waits for the proxy.

Past it the operation fails with ETIMEDOUT ("Connection timed out") and the
error is logged, instead of hanging the caller the way a hard kernel NFS
mount does. While the proxy is down the mount keeps reconnecting; the first
operation after it is back succeeds -- there is nothing to remount.
"""),
    cfg.FloatOpt("attr_timeout", default=1.0, min=0.0,
                 help="Seconds the kernel may cache a file's attributes "
                      "(like the NFS ``actimeo`` option)."),
    cfg.FloatOpt("entry_timeout", default=1.0, min=0.0,
                 help="Seconds the kernel may cache a name lookup."),
    cfg.FloatOpt("dir_entry_timeout", default=30.0, min=0.0,
                 help="""Seconds to cache a directory's lookup and attributes.

Directories here are not renamed, and each path walk would otherwise ask
the DTN for every directory on the way once ``entry_timeout`` has passed
(a clone's reference file is three directories down), and for the
attributes of each (the kernel checks their modes) once ``attr_timeout``
has. A directory removed meanwhile costs nothing: its stale handle makes
the kernel look the path up again; one changed through this mount is
asked afresh. The names and attributes of files keep ``entry_timeout`` and
``attr_timeout``, which Glance's ``gvfs_store_delete_grace`` counts on.
Like the NFS ``acdirmin`` option.
"""),
    cfg.IntOpt("rsize", default=1024 * 1024, min=4096,
               help="Largest NFS READ sent to the proxy, in bytes."),
    cfg.IntOpt("wsize", default=1024 * 1024, min=4096,
               help="Largest NFS WRITE sent to the proxy, in bytes."),
    cfg.IntOpt("write_window", default=8, min=1, max=256,
               help="UNSTABLE WRITEs one open file keeps in flight."),
    cfg.IntOpt("write_buffer_mb", default=64, min=1,
               help="""Uncommitted data, in MiB, kept per open file.

Writes are sent UNSTABLE and kept in memory until a COMMIT; if the server
restarted in between (its write verifier changed) they are sent again, so
nothing acknowledged is lost. A COMMIT is sent when this much is pending,
on fsync and on close.
"""),
    cfg.IntOpt("read_cache_mb", default=0, min=0,
               help="""RAM, in MiB, for file contents read through the mount.

Readers that bypass the kernel's page cache -- guests with ``cache=none``
(Nova's default), which bypass it for their backing golden image too --
otherwise send every read to the client proxy. Blocks kept here are
checked as the kernel NFS client checks its cache (close-to-open): the
attributes they were read with are compared at every open and whenever
new ones are seen, and a change drops them. Worth it on compute nodes,
where later clones boot from the same blocks; 0 keeps no cache.
"""),
    cfg.BoolOpt("prefill_from_profiles", default=True,
                help="""Read an image's boot profile into RAM at its open.

With ``read_cache_mb``: the first read-only open of a file that has a
boot profile beside it (``.gvfs-meta.<name>.profile``, recorded by the
proxies) reads the profile's blocks into RAM, up to half of
``read_cache_mb``, so that the guest's boot reads them from RAM instead
of one request to the client proxy each.  The scattered blocks go 1 MiB
to a call (the bulk channel's READV), two calls at once; a guest read of
a block on its way waits for it.  The bytes come from the client proxy
like any read's: what it lacks it fetches for them, in the profile's
order, as its own profile prefetch does, never twice.  A proxy of an
older release, without READV, is read READ by READ.
"""),
    cfg.PortOpt("metrics_port",
                help="""Port of the mount's Prometheus endpoint.

Unset (the default): none.  It listens on ``[metrics] host``, beside the
client proxy's own ``[metrics] port`` (the mount reads the proxy's
configuration file, so the two need different ports).  It shows what the
kernel asked of the mount, the RAM cache's hits, misses and evictions,
bytes prefilled from boot profiles, the latency of the mount's NFS calls
to the proxy by procedure, and bytes written and not yet committed.
"""),
    cfg.IntOpt("max_background", default=64, min=0, max=65535,
               help="""Requests the kernel keeps in flight to the mount.

Guest reads submitted together (qemu's aio with ``cache=none``) are
asynchronous FUSE requests; the kernel sends at most this many at once.
Its own default, 12, lets a guest booting over a WAN read only 12 blocks
per round trip. Set through ``/sys/fs/fuse/connections`` (the fusectl file
system, which systemd mounts), which only root may write: an unprivileged
mount logs a warning, and ``gvfs-proxy tune-mount`` run as root sets it
(the systemd unit does). 0 leaves the kernel's default.
"""),
    cfg.IntOpt("read_ahead_kb", default=4096, min=0, max=1048576,
               help="""KiB the kernel reads ahead of sequential readers.

The kernel gives FUSE mounts 128 KiB; a reader of a whole image through
the proxies then has two blocks in flight at a time.  Set at mount time
in ``/sys/class/bdi``, which only root may write (``gvfs-proxy
tune-mount`` run as root does it for an unprivileged mount).  0 leaves
the kernel's value.
"""),
    cfg.BoolOpt("allow_other", default=False,
                help="Let users other than the one running the mount use "
                     "it (FUSE ``allow_other``; Glance and Nova run as "
                     "their own users)."),
    cfg.StrOpt("group",
               help="""Local group the mount's files are presented to.

Set, every file and directory of the mount is shown as owned by the
account running the mount and this group (a name or a number), with the
group's permission bits those of the file's owner and none for others:
the kernel then lets only root, that account and the group's members use
the mount, each with the rights the export's file account has. Make it
the group that glance, nova and qemu (libvirt-qemu) share. Unset, the
owners and modes are the NFS server's, whose numbers may name any
account on this node: every local account reads a 0644 image, and a 0600
one only whoever holds the file account's uid here. Only with identity =
daemon. Related options: allow_other, identity.
"""),
    cfg.StrOpt("identity", default="daemon", choices=[
        ("daemon", "every request reaches the NFS server as the user "
                   "running the mount (the server proxy maps it, by "
                   "default to the file account)"),
        ("caller", "each request reaches the NFS server as the user "
                   "that made it (uid, gid and up to 16 supplementary "
                   "groups), and the kernel checks permissions against "
                   "the files' modes first, as for a local file system"),
    ], help="""Whose identity the mount's NFS calls carry.

``caller`` is for sites whose compute nodes and DTN share one user
database; it needs the server proxy to pass those identities through
(``[server] squash_unmapped = false``, and ``allow_root`` for root) and
usually ``allow_other``. Reads and writes go as the user who opened the
file. Related options: allow_other.
"""),
]


def register_opts(conf):
    conf.register_group(mount_group)
    conf.register_opts(mount_opts, group=mount_group)


def list_opts():
    return [(mount_group, mount_opts)]
