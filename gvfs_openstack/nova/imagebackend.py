# SPDX-License-Identifier: Apache-2.0
"""The ``gvfs`` image backend: qcow2 overlays of golden images on the export.

Nova's ``Qcow2`` backend downloads an image into ``_base`` and makes the
instance disk an overlay of that copy; this one makes the overlay's
backing file the golden image itself, on the node's mount of the DTN
export.  A clone then costs an empty overlay: the guest's reads fetch the
blocks it touches through the node's client proxy, which caches them for
every later clone (the GVFS paper's cloning, section 3.2.3).

Everything else -- ephemeral and swap disks, resize, snapshots that are
not direct, images that are not on the export -- is Nova's ``Qcow2``
unchanged.  A golden image is never written, touched or deleted here:
Nova's ``Qcow2`` updates the mtime of its base file to mark it in use,
which on a golden image would make every proxy's cached copy and its
metadata sidecar stale.  Use is marked by references
(:mod:`gvfs_openstack.images.golden`) instead.
"""

import concurrent.futures
import os
import threading
import uuid

from nova.compute import power_state
from nova import conf as nova_conf
from nova import exception
from nova.image import glance
from nova.virt import images
from nova.virt.libvirt import imagebackend
from nova.virt.libvirt import utils as libvirt_utils
from oslo_concurrency import processutils
from oslo_log import log as logging
from oslo_utils import fileutils
from oslo_utils.imageutils import format_inspector

from gvfs_openstack.files import durable
from gvfs_openstack.images import golden
from gvfs_openstack.nova import export as gvfs_export
from gvfs_openstack.nova import inspections
from gvfs_openstack.nova import lookups
from gvfs_openstack.sidecar import scan

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)
IMAGE_API = glance.API()
UPLOAD_PREFIX = ".gvfs-upload."
#: Power states in which the guest may be writing its disk.
_GUEST_MAY_WRITE = (power_state.RUNNING, power_state.PAUSED)


class GvfsImage(imagebackend.Qcow2):
    """A disk of an instance; its root disk may back onto a golden image.

    ``export`` is set on the subclass the backend makes for its export.
    """

    export = None
    #: The :class:`lookups.GoldenLookups` of the backend, set likewise.
    lookups = None
    #: The :class:`inspections.Inspections` of the backend, set likewise.
    inspections = None

    def __init__(self, instance=None, disk_name=None, path=None,
                 disk_info_mapping=None):
        super().__init__(instance=instance, disk_name=disk_name, path=path,
                         disk_info_mapping=disk_info_mapping)
        self.instance = instance
        # The file's own name ("disk", "disk.rescue"), whatever the caller
        # passed: a hard reboot or a power-on rebuilds its disks with the
        # whole path as ``disk_name`` (``_create_images_and_backing``),
        # and the golden image's reference must be the same one spawn
        # took, or a second one outlives the instance.
        self.disk_name = os.path.basename(self.path)

    # --- creating disks -----------------------------------------------------

    def cache(self, fetch_func, filename, size=None, safe=False, *args,
              **kwargs):
        """Make the disk: a clone of a golden image when there is one."""
        if self.exists():
            found = self._golden_backing_info() or self._adopt(
                kwargs.get("context"), kwargs.get("image_id"))
            if found is not None:
                image_id, recorded_format = found
                try:
                    datadir = self.export.datadir()
                    self._check_backing(golden.image_path(datadir, image_id),
                                        recorded_format)
                    self._hold(datadir, image_id)
                except (golden.GoldenImageGone,
                        gvfs_export.ExportUnavailable, OSError) as e:
                    raise exception.InvalidDiskInfo(
                        reason="%s backs onto golden image %s: %s" % (
                            self.path, image_id, e)) from e
                if size and size > self.get_disk_size(self.path):
                    self.resize_image(size)
                return
        else:
            image_id = kwargs.get("image_id")
            found = None if self.instance is None else self._find_golden(
                kwargs.get("context"), image_id)
            if found is not None and self._clone(*found, size=size,
                                                 image_id=image_id):
                return
        super().cache(fetch_func, filename, size, safe, *args, **kwargs)

    @classmethod
    def look_ahead(cls, context, image_id):
        """Find and inspect the golden image before Nova makes a disk of it.

        What a clone does first, done while Nova still fetches the
        instance's kernel and ramdisk: the Images API's answer is kept in
        ``lookups`` and Nova's inspection in ``inspections``, where the
        clone finds them, and the node's proxy starts its prefetch (or
        stream) of the image at this first read of it.  No disk object is
        made (Nova's makes the instance's directory, which Nova must make
        itself to remove it if the spawn fails), nothing is held; what
        goes wrong is the clone's to report.
        """
        found = cls._find_golden(context, image_id)
        if found is not None:
            datadir, name, _ = found
            cls.inspections.format_of(golden.image_path(datadir, name))

    @classmethod
    def _find_golden(cls, context, image_id):
        """``(datadir, name, disk format)`` of a clonable image, or None."""
        if context is None or image_id is None:
            return None
        found = cls.lookups.get(image_id)
        if found is None:
            in_background(cls._look_ahead, image_id, thread_name="gvfs-walk")
            meta = IMAGE_API.get(context, image_id, include_locations=True)
            name = cls.export.image_id_of(meta)
            if name is None:
                return None
            found = (name, meta["disk_format"])
            cls.lookups.put(image_id, found)
        try:
            datadir = cls.export.datadir()
        except gvfs_export.ExportUnavailable as e:
            LOG.warning("Image %s is on the GVFS export but %s; "
                        "downloading it instead", image_id, e)
            return None
        return (datadir, *found)

    @classmethod
    def _look_ahead(cls, image_id):
        """Walk the mount's path to the image while Glance is asked.

        A host that has not looked at the export for a while asks the DTN
        for each directory on the way (a GETATTR, a lookup) and for the
        image's name: round trips across the WAN that would otherwise
        follow the Images API's.  The gvfs store names an image's file by
        its id; if this is not one of its images, the walk only reads, finds
        nothing, and Nova's path takes no longer for it.  Nothing is mounted
        here: the clone does that, and reports what is wrong.
        """
        try:
            os.stat(golden.image_path(cls.export.images_path(), image_id))
        except (OSError, ValueError):
            pass

    def _clone(self, datadir, name, disk_format, size, image_id=None):
        """Create the overlay; False if the image went away meanwhile.

        The reference is taken on a thread of its own while the golden
        image is inspected and the overlay made: taking it is a create
        and a check on the DTN, round trips across the WAN, and the rest
        reads what the node's proxy has or runs qemu-img.  Nothing uses
        the overlay before the reference is known to hold; if it does
        not, the overlay is removed.
        """
        path = golden.image_path(datadir, name)
        holding = in_background(self._hold, datadir, name,
                                thread_name="gvfs-hold")
        try:
            self._make_overlay(path, name, disk_format, size)
        except BaseException as error:
            refused = holding.exception()
            if refused is None:
                self._release(datadir, name)
            elif isinstance(refused, golden.GoldenImageGone) and \
                    isinstance(error, Exception):
                # The overlay failed because the image had gone.
                return self._gone(name, image_id)
            raise
        refused = holding.exception()
        if refused is not None:
            fileutils.delete_if_exists(self.path)
            if isinstance(refused, golden.GoldenImageGone):
                return self._gone(name, image_id)
            raise refused
        LOG.info("Cloned %s from golden image %s", self.path, path)
        return True

    def _make_overlay(self, path, name, disk_format, size):
        inspected = self.inspections.format_of(path)
        if str(inspected) != disk_format:
            # What Nova refuses on download too (format confusion).
            raise exception.ImageUnacceptable(
                image_id=name, reason="its data is %s, not the %s Glance "
                "says" % (inspected, disk_format))
        self.verify_base_size(path, size, _virtual_size(path, inspected))
        with fileutils.remove_path_on_error(self.path):
            # Nova's own step, with its checks of the backing file
            # (qemu-img info: no backing file or data file of its own);
            # its format inspection and safety check are _inspect_golden's,
            # kept for this very file.
            libvirt_utils.create_image(self.path, "qcow2", size,
                                       backing_file=path, safe=True)

    def _gone(self, name, image_id):
        LOG.warning("Golden image %s left the export; downloading it "
                    "instead", name)
        self.lookups.forget(image_id)
        return False

    def _adopt(self, context, image_id):
        """Re-point a disk that came from another host at this host's mount.

        Nova moves an overlay between hosts as it is (cold migration and
        resize copy the file), so its backing file still names the golden
        image on the source's mount, whose path differs here whenever the
        hosts' mounts do (another proxy address, another mount point
        base).  The golden image is the same file of the export: only the
        path in the overlay's header changes (``qemu-img rebase -u``), so
        that the guest reads it through this host's proxy and this host
        holds its reference.  Only a backing file in a directory named as
        this host's image directory is adopted, and only an image this
        disk may back onto (:meth:`_adoptable`).  ``(image id, recorded
        backing format)``, or None.
        """
        info = images.qemu_img_info(self.path)
        if not info.backing_file:
            return None
        directory, name = os.path.split(os.path.normpath(info.backing_file))
        if os.path.basename(directory) != \
                os.path.basename(self.export.images_path()):
            return None
        datadir = self._adoptable(context, image_id, name)
        if datadir is None:
            return None
        path = golden.image_path(datadir, name)
        recorded = info.backing_file_format or str(
            self.inspections.format_of(path))
        processutils.execute("qemu-img", "rebase", "-u", "-f", "qcow2",
                             "-F", recorded, "-b", path, self.path)
        LOG.info("Re-pointed %s from %s to golden image %s on this host's "
                 "mount", self.path, info.backing_file, path)
        return name, recorded

    def _adoptable(self, context, image_id, name):
        """The export's data directory if this disk may back onto ``name``.

        The instance's image (``image_id``, Nova's ``image_ref``) as the
        Images API finds it; or any golden image the source of the move
        held for this very disk on this host (:meth:`hold_for`), from the
        disk it had checked.  The second is how a disk whose golden image
        is not the instance's moves: an unshelved instance's overlay backs
        onto its shelved snapshot while Nova's ``image_ref`` names the
        image it was first booted from (Launchpad #1732428).  None when
        neither holds.
        """
        if context is not None and image_id is not None:
            found = self._find_golden(context, image_id)
            if found is not None and found[1] == name:
                return found[0]
        try:
            datadir = self.export.datadir()
            if self._holders()[0] in golden.holders(datadir, name):
                return datadir
        except (gvfs_export.ExportUnavailable, OSError, ValueError):
            pass
        return None

    def golden_image(self):
        """The golden image id this existing disk backs onto, or None."""
        found = self._golden_backing_info()
        return None if found is None else found[0]

    def _golden_backing_info(self):
        """(golden image id, backing format the overlay records), or None."""
        info = images.qemu_img_info(self.path)
        image_id = self.export.golden_of(info.backing_file)
        if image_id is None:
            return None
        return image_id, info.backing_file_format

    def _check_backing(self, path, recorded_format):
        """Refuse a golden image that is no longer what this disk backs onto.

        An existing disk is used again at every hard reboot, power-on and
        resize, maybe months after its clone: whoever may write the export
        could have put a qcow2 in the golden file's place whose own
        backing file is a host file, which the guest would then read.  So
        the golden file is inspected again (once per file identity: a
        replaced file is a new one) with the safety check a clone runs,
        and its format must still be the one the overlay records.
        """
        inspected = self.inspections.format_of(path)
        if str(inspected) not in gvfs_export.CLONABLE_FORMATS or (
                recorded_format and str(inspected) != recorded_format):
            LOG.warning("Golden image %s is now %s; the overlay %s "
                        "records %s", path, inspected, self.path,
                        recorded_format)
            raise exception.InvalidDiskInfo(
                reason="its golden image's data is %s, not the %s the "
                "overlay records" % (inspected, recorded_format))

    def _holders(self, host=None):
        """This disk's reference name, and the one earlier releases made.

        The first names the instance's project; a disk cloned before
        references did holds the second, which its release drops too.
        ``host``: the compute host holding the disk (default: this one).
        """
        host = host or CONF.host
        instance = self.instance.uuid if self.instance else \
            os.path.basename(os.path.dirname(self.path))
        project = self.instance.project_id if self.instance else None
        return [golden.holder_name(instance, self.disk_name, host, project),
                golden.holder_name(instance, self.disk_name, host)]

    def _hold(self, datadir, name):
        return golden.hold(datadir, name, self._holders()[0])

    def _release(self, datadir, name):
        try:
            for holder in self._holders():
                golden.release(datadir, name, holder)
        except OSError as e:
            LOG.warning("Cannot drop the reference of %s to golden image "
                        "%s now (%s); the image cache manager will", self.path,
                        name, e)

    def hold_for(self, host):
        """Take the reference ``host`` will hold once this disk is there.

        The source of a move takes it before the disk leaves: from then
        on the golden image is held for the destination, whatever becomes
        of the source's own reference.  The golden image id, or None.
        """
        image_id = self.golden_image() if self.exists() else None
        if image_id is not None:
            golden.hold(self.export.datadir(), image_id,
                        self._holders(host)[0])
        return image_id

    def release_for(self, host, image_id):
        """Drop the reference :meth:`hold_for` took for ``host``."""
        golden.release(self.export.datadir(), image_id,
                       self._holders(host)[0])

    def release_golden(self):
        """Drop this disk's reference to its golden image, if it has one.

        Called before the disk is deleted; idempotent.
        """
        if not os.path.exists(self.path):
            return
        image_id = self.golden_image()
        if image_id is not None:
            self._release(self.export.datadir(), image_id)

    # --- snapshots ----------------------------------------------------------

    def direct_snapshot(self, context, snapshot_name, image_format,
                        image_id, base_image_id):
        """Convert the disk straight into the Glance store's directory.

        Returns the ``gvfs://`` location for Glance, which reads the image
        through its own mount to check it and make its hashes.
        """
        if not self.export.conf.direct_snapshot or \
                image_format not in gvfs_export.CLONABLE_FORMATS:
            raise NotImplementedError("direct snapshots are off or the "
                                      "format is not raw or qcow2")
        if self.instance is not None and \
                self.instance.obj_attr_is_set("power_state") and \
                self.instance.power_state in _GUEST_MAY_WRITE:
            # Nova does not pause a guest for a live snapshot; converting
            # a disk under a running guest would copy a torn image.  Its
            # standard path (a libvirt block copy, then an upload) is
            # consistent.
            raise NotImplementedError("the guest is running: live "
                                      "snapshots take Nova's usual path")
        try:
            datadir = self.export.datadir()
        except gvfs_export.ExportUnavailable as e:
            raise exception.ImageUnacceptable(image_id=image_id,
                                              reason=str(e)) from e
        target = os.path.join(datadir, image_id)
        temp = os.path.join(datadir, UPLOAD_PREFIX + uuid.uuid4().hex)
        try:
            libvirt_utils.extract_snapshot(self.path, "qcow2", temp,
                                           image_format)
            # On the DTN's stable storage before Glance is told of it:
            # Glance reads it through another mount (another client).
            durable.fsync_path(temp)
            scan.write_sidecar(target, scan.scan_file(temp))
            # The sidecar names the image; its size and mtime stay those
            # of the converted file across the rename.
            os.rename(temp, target)
        except (OSError, processutils.ProcessExecutionError) as e:
            for path in (temp, scan.sidecar_path(target)):
                fileutils.delete_if_exists(path)
            raise exception.ImageUnacceptable(
                image_id=image_id, reason="cannot write the snapshot to "
                "the GVFS export: %s" % e) from e
        return self.export.location(image_id)

    def cleanup_direct_snapshot(self, location, also_destroy_volume=False,
                                ignore_errors=False):
        if not location:
            return
        found = gvfs_export.parse_url(location.get("url") or "")
        if found is None:
            return
        image_id = found[1]
        try:
            datadir = self.export.datadir()
            for path in (os.path.join(datadir, image_id),
                         scan.sidecar_path(os.path.join(datadir, image_id))):
                fileutils.delete_if_exists(path)
        except (OSError, gvfs_export.ExportUnavailable):
            if not ignore_errors:
                raise
            LOG.warning("Cannot remove the failed snapshot %s from the "
                        "GVFS export", image_id)


def _inspect_golden(path):
    """What ``create_image`` checks of a backing file before qemu-img info.

    Nova's format inspection and its safety check, which Nova runs at
    every clone "because additional safety checks could have been added
    since we downloaded the image": kept per file in nova-compute's
    memory, they are run again by the nova-compute an upgrade restarts.
    """
    inspected = images.get_image_format(path)
    if not CONF.workarounds.disable_deep_image_inspection:
        try:
            inspected.safety_check()
        except format_inspector.SafetyCheckFailed as e:
            LOG.warning("Golden image %s failed safety check: %s", path, e)
            raise exception.InvalidDiskInfo(
                reason="Base image failed safety check") from e
    return inspected


def in_background(func, *args, thread_name):
    """Start ``func(*args)`` on a thread of its own; a Future of it.

    Not Nova's ``thread_pool_factory.spawn``: its default pool (10 threads
    in native threading mode) also runs the libvirt driver's long-lived
    event threads, and a clone that waits for a task queued behind full
    pool threads would wait for as long as they run.  A thread per clone
    is never queued.
    """
    future = concurrent.futures.Future()

    def run():
        try:
            future.set_result(func(*args))
        except BaseException as e:  # Handed to whoever waits for it.
            future.set_exception(e)

    threading.Thread(target=run, name=thread_name, daemon=True).start()
    return future


def _virtual_size(path, inspected):
    """The golden image's virtual size, without running ``qemu-img info``.

    Nova's format inspector has just read the image's header; asking
    qemu-img again would open the image once more through the mount.
    0 (unknown) lets Nova ask qemu-img.
    """
    if str(inspected) == "raw":
        return os.stat(path).st_size
    return inspected.virtual_size


class GvfsBackend(imagebackend.Backend):
    """Nova's backends, with ``qcow2`` (and ``default``) made ``gvfs``."""

    def __init__(self, use_cow, image_export):
        super().__init__(use_cow)
        bound = type("GvfsImage", (GvfsImage,), {
            "export": image_export, "__module__": __name__,
            "lookups": lookups.GoldenLookups(
                image_export.conf.image_lookup_cache_seconds),
            "inspections": inspections.Inspections(_inspect_golden)})
        self.BACKEND = {
            kind: bound if cls is imagebackend.Qcow2 else cls
            for kind, cls in self.BACKEND.items()}
