# SPDX-License-Identifier: Apache-2.0
"""The DTN export as a compute node sees it: where golden images are.

Decides which Glance images live on the export (from their locations or
their ``stores`` property) and gives their path on the node's mount,
mounting the export first through the one mount interface the Glance
store uses too.
"""

import os
import posixpath
import types

from oslo_log import log as logging

from gvfs_openstack.conf import nova as nova_opts
from gvfs_openstack import exceptions
from gvfs_openstack.images import locations
from gvfs_openstack.mount import configured

LOG = logging.getLogger(__name__)

#: Formats a qcow2 overlay can use as its backing file as they are.
CLONABLE_FORMATS = ("raw", "qcow2")
#: Image properties that ask Nova to verify what it downloads.
_SIGNATURE_PROPERTIES = ("img_signature", "img_signature_certificate_uuid")


#: How long a passed health check of the mount stands.
HEALTH_RECHECK_SECONDS = 5.0


class ExportUnavailable(exceptions.GvfsError):
    message = "The GVFS image export is not available: %(reason)s"


def parse_url(url):
    """``(store id, image id)`` of a ``gvfs://`` URL, else None."""
    try:
        return locations.parse(url)
    except ValueError:
        return None


class ImageExport:
    """The export of ``conf`` (the ``[gvfs]`` group of nova.conf).

    The options are read once, as nova-compute reads its configuration
    at start.
    """

    def __init__(self, conf):
        self.conf = conf = types.SimpleNamespace(**{
            opt.dest: getattr(conf, opt.dest) for opt in nova_opts.OPTS})
        self._mount = configured.mount_from(conf, label="[gvfs] ")
        if self._mount is None:
            if not os.path.isabs(conf.image_dir or ""):
                raise exceptions.InvalidConfig(
                    option="[gvfs] image_dir",
                    reason="an absolute path is needed with mount_type = "
                           "none")
            return
        configured.check_images_dir("[gvfs] image_dir", conf.image_dir)
        # A clone asks several times within a second; a hung mount is
        # still caught by the I/O timeout of the calls themselves.
        self._mount[0].recheck_after = HEALTH_RECHECK_SECONDS

    def datadir(self):
        """The images' directory, on a mount that answers now."""
        if self._mount is None:
            return self.conf.image_dir
        made, share = self._mount
        try:
            root = made.ensure(share)
        except exceptions.GvfsError as e:
            raise ExportUnavailable(reason=str(e)) from e
        return os.path.join(root, self.conf.image_dir or "")

    def images_path(self):
        """The images' directory, without mounting (for path checks)."""
        if self._mount is None:
            return os.path.normpath(self.conf.image_dir)
        made, share = self._mount
        return os.path.normpath(os.path.join(made.mount_point(share),
                                             self.conf.image_dir or ""))

    def golden_of(self, backing_file):
        """The image id whose file ``backing_file`` is, or None."""
        if not backing_file:
            return None
        directory, name = os.path.split(os.path.normpath(backing_file))
        if directory != self.images_path() or \
                not locations.is_image_id(name):
            return None
        return name

    def image_id_of(self, image_meta):
        """The file name of ``image_meta``'s image on the export, or None.

        ``image_meta`` is the dict Nova's image API returns with
        ``include_locations=True``.  Images Nova must check as it
        downloads them (signatures) and formats an overlay cannot back
        onto are not cloned.
        """
        image_id = image_meta.get("id")
        props = image_meta.get("properties") or {}
        if image_meta.get("disk_format") not in CLONABLE_FORMATS:
            return None
        if any(props.get(p) for p in _SIGNATURE_PROPERTIES):
            return None
        wanted = set(self.conf.glance_stores)
        for location in image_meta.get("locations") or []:
            found = parse_url(location.get("url") or "")
            if found and (not wanted or found[0] in wanted):
                if found[1] != image_id:
                    # Every gvfs location names its own image's file (the
                    # store, direct snapshots and migrations make them
                    # so); one naming another file was added by hand, and
                    # cloning it would give this image's users that
                    # file, maybe another project's private image.
                    LOG.warning("Image %s has a location of image %s's "
                                "file; not cloning it", image_id, found[1])
                    return None
                return found[1]
        # A base property of Glance's schema: Nova keeps it at the top.
        listed = image_meta.get("stores") or props.get("stores") or ""
        stores = {s.strip() for s in listed.split(",")}
        if image_id and wanted & stores:
            return image_id
        return None

    def snapshot_store(self):
        if self.conf.snapshot_store:
            return self.conf.snapshot_store
        return self.conf.glance_stores[0] if self.conf.glance_stores \
            else "default"

    def location(self, image_id):
        return locations.url(self.snapshot_store(), image_id)

    def path_on_dtn(self, image_id):
        """The image's path on the DTN, as ``gvfs-proxy warm`` wants it."""
        if self._mount is None:
            raise exceptions.InvalidConfig(
                option="[gvfs] mount_type",
                reason="pre-warming needs a mount type: only then is the "
                       "image's path on the DTN known")
        return posixpath.join(self.conf.export, self.conf.image_dir or "",
                              image_id)
