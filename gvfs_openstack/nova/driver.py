# SPDX-License-Identifier: Apache-2.0
"""``GvfsLibvirtDriver``: Nova's libvirt driver with the ``gvfs`` backend.

Nova's image backends are a closed list (``[libvirt] images_type``), so
the backend comes in with the compute driver: this subclass swaps the
driver's ``image_backend`` for one whose ``qcow2`` disks are
:class:`~gvfs_openstack.nova.imagebackend.GvfsImage`, and adds what the
backend needs around it -- references dropped when disks go, references
of vanished disks reconciled with the image cache manager, and image
pre-caching turned into proxy warming.
"""

import inspect
import os
import time

from nova import conf as nova_conf
from nova import exception
from nova import objects
import nova.privsep
from nova import utils as nova_utils
from nova.virt.libvirt import driver as libvirt_driver
from nova.virt.libvirt import imagecache
from nova.virt.libvirt import utils as libvirt_utils
from oslo_log import log as logging
from oslo_utils import fileutils

from gvfs_openstack.conf import nova as gvfs_nova_conf
from gvfs_openstack import exceptions
from gvfs_openstack.images import golden
from gvfs_openstack.nova import export as gvfs_export
from gvfs_openstack.nova import imagebackend
from gvfs_openstack.proxy import control

CONF = nova_conf.CONF
LOG = logging.getLogger(__name__)

#: A reference younger than this is left alone by reconciliation: its
#: disk may be being created right now.
RECONCILE_MIN_AGE = 600.0


class GvfsLibvirtDriver(libvirt_driver.LibvirtDriver):
    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        # Registered when nova-compute loads the driver, not at import:
        # a process that only imports this module keeps Nova's options.
        gvfs_nova_conf.register_opts(CONF)
        if CONF.libvirt.images_type not in ("qcow2", "default") or (
                CONF.libvirt.images_type == "default" and
                not CONF.use_cow_images):
            raise exception.InvalidConfiguration(
                "the gvfs image backend makes qcow2 overlays: set "
                "[libvirt] images_type = qcow2 (it is %s)"
                % CONF.libvirt.images_type)
        try:
            self.image_export = gvfs_export.ImageExport(CONF.gvfs)
        except exceptions.InvalidConfig as e:
            raise exception.InvalidConfiguration(str(e)) from e
        self.image_backend = imagebackend.GvfsBackend(
            CONF.use_cow_images, self.image_export)

    def init_host(self, host):
        super().init_host(host)
        # What the first server on a fresh host would otherwise wait for:
        # about 1.1 s each on the lab's cloud (the mount across the WAN,
        # the privsep helper under rootwrap).
        self._mount_export()
        _start_privsep()

    def _mount_export(self):
        """Mount the export as nova-compute starts, not at the first clone.

        Mounting starts the mount's process and asks the DTN across the
        WAN for the export's root.  A DTN that does not answer yet is no
        reason to keep the host from serving: the first clone mounts it
        then (and says why it cannot), and images Nova downloads never
        need it.
        """
        try:
            self.image_export.datadir()
        except gvfs_export.ExportUnavailable as e:
            LOG.warning("Not mounting the GVFS export yet: %s; the first "
                        "clone will", e)

    # --- creating disks -----------------------------------------------------

    def _create_image(self, context, instance, disk_mapping, *args,
                      **kwargs):
        """Nova's, with the kernel, ramdisk and golden image fetched at once.

        Nova fetches an instance's kernel and then its ramdisk (through
        Glance into ``_base``) before it makes the root disk; across a WAN
        each is a download of its own (0.49 s and 0.21 s for the lab
        guest's), and the clone's first look at the golden image, which
        starts the proxy's prefetch or stream, waits for both.  Here the
        three start together, each as Nova runs it; Nova's own steps then
        find them done.
        """
        call = inspect.signature(
            libvirt_driver.LibvirtDriver._create_image).bind(
                self, context, instance, disk_mapping, *args, **kwargs)
        self._fetch_together(context, instance, call.arguments)
        return super()._create_image(context, instance, disk_mapping,
                                     *args, **kwargs)

    def _needs_rebase_original_qcow2_image(self, instance, backend):
        """Never for a disk on a golden image: it keeps its snapshot.

        After an unshelve (or a cross-cell resize) Nova rebases a Qcow2
        disk from the snapshot it was spawned from onto ``image_ref``'s
        copy in ``_base`` (its fix of Launchpad #1732428), so that the
        snapshot can go.  A ``gvfs`` disk's backing file is the
        snapshot itself, a golden image in the store, held by this disk:
        rebasing it would read both images whole through the mount
        (across the WAN) and fail on the ``_base`` copy that a clone
        never makes.  The disk stays on its snapshot, which Glance keeps
        (it refuses Nova's deletion) until the disk is gone; moves
        follow it (:meth:`GvfsImage._adoptable`).
        """
        if isinstance(backend, imagebackend.GvfsImage) and \
                backend.exists() and backend.golden_image() is not None:
            return False
        return super()._needs_rebase_original_qcow2_image(instance,
                                                          backend)

    def _fetch_together(self, context, instance, arguments):
        """Start what ``_create_image`` fetches, together; wait for all.

        Only images with a kernel have anything to overlap.  A step that
        fails here is left for Nova's own, which reports it.
        """
        images = arguments.get("disk_images") or {
            "image_id": instance.image_ref, "kernel_id": instance.kernel_id,
            "ramdisk_id": instance.ramdisk_id}
        if not images.get("kernel_id"):
            return
        parts = [("kernel", images["kernel_id"])]
        if images.get("ramdisk_id"):
            parts.append(("ramdisk", images["ramdisk_id"]))
        started = [imagebackend.in_background(
            self._fetch_base, context, image_id,
            thread_name="gvfs-" + name) for name, image_id in parts]
        root = self.image_backend.backend(CONF.libvirt.images_type)
        if images.get("image_id") and issubclass(
                root, imagebackend.GvfsImage) and \
                not self._is_booted_from_volume(
                    arguments.get("block_device_info")):
            started.append(imagebackend.in_background(
                root.look_ahead, context, images["image_id"],
                thread_name="gvfs-look-ahead"))
        for future in started:
            error = future.exception()
            if error is not None:
                LOG.debug("Fetching ahead failed (%s); Nova's own step "
                          "tries again", error, instance=instance)

    def _fetch_base(self, context, image_id):
        """A kernel or ramdisk into ``_base``, as Nova's own step fetches it.

        Under Nova's lock of that file (``Image.cache``), and only into
        ``_base``: the copy into the instance's directory stays Nova's,
        which makes that directory (and removes it if the spawn fails).
        """
        filename = imagecache.get_cache_fname(image_id)
        base_dir = os.path.join(CONF.instances_path,
                                CONF.image_cache.subdirectory_name)
        fileutils.ensure_tree(base_dir)
        target = os.path.join(base_dir, filename)

        # Nova's image backends' lock directory (Image.lock_path); making
        # one of them to ask it would make the instance's directory.
        @nova_utils.synchronized(filename, external=True,
                                 lock_path=os.path.join(CONF.instances_path,
                                                        "locks"))
        def fetch():
            if not os.path.exists(target):
                libvirt_utils.fetch_raw_image(context, target, image_id)
        fetch()

    # --- references follow the disks ----------------------------------------

    def _release_disks(self, instance, names, directory=None):
        directory = directory or libvirt_utils.get_instance_path(instance)
        for name in names:
            disk = self.image_backend.by_libvirt_path(
                instance, os.path.join(directory, name))
            try:
                disk.release_golden()
            except (OSError, exceptions.GvfsError,
                    exception.NovaException) as e:
                LOG.warning("Cannot drop the golden image reference of "
                            "%s: %s", name, e, instance=instance)

    def delete_instance_files(self, instance):
        directory = libvirt_utils.get_instance_path(instance)
        self._release_disks(instance, _disk_names(directory))
        return super().delete_instance_files(instance)

    def migrate_disk_and_power_off(self, context, instance, dest, flavor,
                                   network_info, block_device_info=None,
                                   timeout=0, retry_interval=0):
        """Nova's, with the destination's references taken first.

        Cold migration and resize to another host copy the overlays as
        they are; the destination then holds the golden images they back
        onto.  The references are taken here, on the export, before a
        byte leaves, so that no moment exists in which a disk is on its
        way to a host that does not hold its golden image.  The source's
        own stay until the move is confirmed (a revert boots them again);
        if the copy fails, the destination's are dropped.
        """
        target = _destination_of(context, instance)
        held = []
        try:
            if target and target != CONF.host:
                self._hold_for(instance, target, held)
            return super().migrate_disk_and_power_off(
                context, instance, dest, flavor, network_info,
                block_device_info, timeout, retry_interval)
        except BaseException:
            for disk, image_id in held:
                try:
                    disk.release_for(target, image_id)
                except (OSError, exceptions.GvfsError) as e:
                    LOG.warning("Cannot drop %s's reference to golden "
                                "image %s after a failed move: %s; its "
                                "reconciliation will", target, image_id,
                                e, instance=instance)
            raise

    def _hold_for(self, instance, host, held):
        """Take ``host``'s references to the instance's golden images.

        Each ``(disk, image id)`` held is added to ``held`` as it is.
        """
        directory = libvirt_utils.get_instance_path(instance)
        for name in _disk_names(directory):
            disk = self.image_backend.by_libvirt_path(
                instance, os.path.join(directory, name))
            image_id = disk.hold_for(host)
            if image_id is not None:
                held.append((disk, image_id))
                LOG.info("Golden image %s held for %s, where disk %s goes",
                         image_id, host, name, instance=instance)

    def confirm_migration(self, context, migration, instance, network_info):
        """Nova's, with this host's references dropped as the move is final.

        Only a move to another host: after a resize on this host the new
        disk holds the very reference the old one did.
        """
        if migration.dest_compute != CONF.host:
            directory = libvirt_utils.get_instance_path(instance) + \
                "_resize"
            self._release_disks(instance, _disk_names(directory),
                                directory)
        super().confirm_migration(context, migration, instance,
                                  network_info)

    def unrescue(self, context, instance):
        self._release_disks(instance, ["disk.rescue"])
        super().unrescue(context, instance)

    def manage_image_cache(self, context, all_instances):
        super().manage_image_cache(context, all_instances)
        try:
            self.reconcile_references()
        except (OSError, exceptions.GvfsError) as e:
            LOG.warning("Cannot reconcile golden image references: %s", e)

    def reconcile_references(self, min_age=RECONCILE_MIN_AGE):
        """Drop this host's references whose disk is gone.

        Disks deleted while nova-compute was down, or whose removal could
        not reach the export, leave references that would keep their
        golden image from ever being deleted.  Returns the dropped names.
        """
        datadir = self.image_export.datadir()
        dropped = []
        now = time.time()
        for (image_id, holder), (uuid, disk) in golden.held_by_host(
                datadir, CONF.host).items():
            base = os.path.join(CONF.instances_path, uuid)
            if any(os.path.exists(os.path.join(d, disk))
                   for d in (base, base + "_resize")):
                continue
            ref = os.path.join(datadir, golden.REFS_DIR, image_id, holder)
            try:
                if now - os.stat(ref).st_mtime < min_age:
                    continue
            except FileNotFoundError:
                continue
            golden.release(datadir, image_id, holder)
            dropped.append(holder)
            LOG.info("Dropped the reference of vanished disk %s/%s to "
                     "golden image %s", uuid, disk, image_id)
        return dropped

    # --- pre-caching --------------------------------------------------------

    def cache_image(self, context, image_id):
        """Pre-cache: warm the node's proxy for images on the export.

        Returns True if anything was fetched, like Nova's download.
        """
        socket_path = self.image_export.conf.proxy_control_socket
        if socket_path:
            meta = imagebackend.IMAGE_API.get(context, image_id,
                                              include_locations=True)
            name = self.image_export.image_id_of(meta)
            if name is not None:
                try:
                    result = control.request(
                        socket_path, "warm", None,
                        path=self.image_export.path_on_dtn(name),
                        rate_mib=self.image_export.conf.warm_rate_mib or
                        None)
                except (control.ControlError, exceptions.GvfsError) as e:
                    raise exception.ImageUnacceptable(
                        image_id=image_id,
                        reason="the GVFS proxy cannot warm it: %s" % e)
                LOG.info("Warmed image %(id)s: %(fetched)d bytes fetched, "
                         "%(already_cached)d already cached",
                         dict(result, id=image_id))
                return result["fetched"] > 0
        return super().cache_image(context, image_id)


def _disk_names(directory):
    """The instance's disk files in ``directory`` (none if it is gone)."""
    try:
        return [n for n in os.listdir(directory)
                if n == "disk" or n.startswith("disk.") and
                n not in ("disk.info", "disk.config")]
    except FileNotFoundError:
        return []


def _destination_of(context, instance):
    """The compute host the instance's current move goes to, or None."""
    migration_context = instance.migration_context
    if migration_context is None or \
            migration_context.migration_id is None:
        return None
    return objects.Migration.get_by_id(
        context, migration_context.migration_id).dest_compute


def _start_privsep():
    """Start Nova's privsep daemon now rather than inside the first spawn.

    Every spawn calls into it (Nova's kernel and ramdisk cache marks its
    files used through it), and Nova starts it at the first call.  If it
    cannot start now, Nova tries again at that call and reports it there.
    """
    context = nova.privsep.sys_admin_pctxt
    if not context.client_mode or context.channel is not None:
        return
    try:
        context.start()
    except Exception as e:
        LOG.warning("Cannot start Nova's privsep daemon yet: %s; the first "
                    "call that needs it will", e)
