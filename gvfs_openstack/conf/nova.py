# SPDX-License-Identifier: Apache-2.0
"""Options of Nova's ``gvfs`` image backend, group ``[gvfs]`` of nova.conf."""

from oslo_config import cfg

from gvfs_openstack.conf import share as share_conf

GROUP = "gvfs"

OPTS = [
    cfg.ListOpt("glance_stores", default=[],
                help="""Glance store ids whose images are on this export.

An image is cloned from the export when one of its locations (or its
direct URL) is ``gvfs://<store id>/<image id>`` or its ``stores`` property
names one of these.  Empty: every ``gvfs://`` location, as in a Glance with
one gvfs store.  Other images take Nova's usual path (download to
``_base``).
"""),
    cfg.StrOpt("image_dir", default="",
               help="""Where the Glance store keeps the images.

With a ``mount_type``: relative to the export's root, the same value as
the store's ``gvfs_store_datadir``.  With ``mount_type = none``: the
absolute path of that directory on a mount the operator made.  Instance
overlays name their golden image by its path, so it must be the same on
every compute node (with a mount type: the same ``mount_point_base``).
"""),
] + share_conf.share_opts("", "/var/lib/nova/gvfs-mounts", "image_dir") + [
    cfg.StrOpt("proxy_control_socket",
               help="""The control socket of this node's client proxy.

When set, Nova's image pre-caching (``openstack aggregate cache image``)
of an image on the export asks the proxy to warm its cache with it
(``gvfs-proxy warm``) instead of downloading it to ``_base``.
"""),
    cfg.IntOpt("warm_rate_mib", default=0, min=0,
               help="Cap of pre-warming in MiB/s; 0 uses the proxy's "
                    "``[cache] warm_rate_mib``."),
    cfg.FloatOpt("image_lookup_cache_seconds", default=60.0, min=0.0,
                 help="""Seconds to remember that an image is on the export.

Each clone otherwise asks the Images API for the image's locations, a
round trip that may cross the WAN. An image deleted meanwhile is still
noticed (its file is gone from the export) and takes Nova's usual path.
0 asks every time.
"""),
    cfg.BoolOpt("direct_snapshot", default=True,
                help="""Write snapshots straight to the export.

The snapshot of an instance cloned from the export is converted into the
Glance store's directory and registered by location (glance-api needs
the caller to have the ``service`` role, i.e. Nova sends a service token),
so its bytes never cross the Images API.  When that is refused, Nova
uploads the snapshot as usual.
"""),
    cfg.StrOpt("snapshot_store",
               help="The Glance store id written in snapshot locations; "
                    "default: the first of ``glance_stores``, else "
                    "``default`` (a Glance with one store)."),
]


def register_opts(conf):
    conf.register_opts(OPTS, group=GROUP)


def list_opts():
    return [(GROUP, OPTS)]
