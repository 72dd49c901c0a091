# SPDX-License-Identifier: Apache-2.0
"""Nova's ``gvfs`` image backend on a plain directory standing for the
export, with Nova's real driver loader, image backend and qemu-img.

Glance is a stand-in here (image metadata as Nova's image API returns
it); tests/functional/test_nova_cloud.py runs the same flows (clone,
resize, rescue, snapshot, delete, another store's download) in the
stock nova-compute on libvirt/QEMU, against a real glance-api and the
FUSE mount of the proxy chain.
"""

import errno
import json
import os
import shutil
import socket
import subprocess
import threading

import pytest

from gvfs_lab import compute
from gvfs_lab.compute import GIB
from gvfs_lab.compute import MIB
from gvfs_openstack.images import golden
from gvfs_openstack.nova import imagebackend
from gvfs_openstack.nova import lookups

GOLDEN = "5a1f0c2e-7d3b-4e8a-9c6f-0b1d2e3f4a5b"
OTHER = "6b2a1d3f-8e4c-4f9b-8d7a-1c2e3f4a5b6c"


@pytest.fixture
def nova_fixtures():
    with compute.nova_fixtures():
        yield


@pytest.fixture
def images(tmp_path):
    path = tmp_path / "export" / "images"
    path.mkdir(parents=True)
    return str(path)


@pytest.fixture
def glance_images(monkeypatch):
    """Image metadata by id, as Nova's image API would return it."""
    catalog = {}

    def get(context, image_id, include_locations=False, **kwargs):
        from nova import exception
        if image_id not in catalog:
            raise exception.ImageNotFound(image_id=image_id)
        return dict(catalog[image_id], id=image_id)

    monkeypatch.setattr(imagebackend.IMAGE_API, "get", get)
    return catalog


def refuse_download(target, *args, **kwargs):
    raise AssertionError("Nova downloaded the image to %s" % target)


def clone(node, instance):
    """Spawn ``instance`` from the golden image; it must not download."""
    return node.spawn_root_disk(instance, GOLDEN, fetch=refuse_download)


def gvfs_image(disk_format="qcow2", store="dtn", image_id=GOLDEN):
    return {"disk_format": disk_format, "container_format": "bare",
            "locations": [{"url": "gvfs://%s/%s" % (store, image_id),
                           "metadata": {}}],
            "stores": store, "properties": {}}


@pytest.fixture
def node(nova_fixtures, tmp_path, images):
    return compute.ComputeNode(
        str(tmp_path / "instances"), image_dir=images,
        glance_stores=["dtn"]).activate()


def test_nova_loads_the_driver_by_its_nova_virt_name(node):
    from nova.virt import driver

    from gvfs_openstack.nova import driver as gvfs_driver

    assert isinstance(node.driver, gvfs_driver.GvfsLibvirtDriver)
    assert isinstance(node.driver, driver.ComputeDriver)
    backend = node.driver.image_backend
    assert backend.backend("qcow2").__mro__[1] is imagebackend.GvfsImage
    assert backend.backend("raw").__name__ == "Flat"  # Others unchanged.


def test_a_full_class_path_is_not_what_nova_loads(nova_fixtures):
    """Why gvfs-nova-compute exists: Nova prefixes ``nova.virt.``."""
    from nova.virt import driver
    from nova.virt import fake

    with pytest.raises(SystemExit):
        driver.load_compute_driver(
            fake.FakeVirtAPI(),
            "gvfs_openstack.nova.driver.GvfsLibvirtDriver")


@pytest.mark.parametrize("fmt", ["qcow2", "raw"])
def test_a_clone_is_an_overlay_of_the_golden_image(node, images,
                                                   glance_images, fmt):
    path = os.path.join(images, GOLDEN)
    written = compute.make_golden(path, fmt)
    glance_images[GOLDEN] = gvfs_image(fmt)
    before = compute.qemu_img_info(path)
    instance = node.instance(root_gb=1)
    disk = clone(node, instance)

    info = compute.qemu_img_info(disk.path)
    assert info["format"] == "qcow2"
    assert info["full-backing-filename"] == path
    assert info["backing-filename-format"] == fmt
    assert info["virtual-size"] == GIB
    assert not os.path.exists(node.base_dir()) or \
        os.listdir(node.base_dir()) == []
    # The guest reads the golden image's bytes through the overlay ...
    compute.qemu_io(disk.path, *["read -P %d %d 64k" % (p, off)
                                 for off, p in written.items()])
    # ... and its writes stay in the overlay.
    compute.qemu_io(disk.path, "write -P 0xee 0 1M")
    compute.qemu_io(disk.path, "read -P 0xee 0 1M")
    compute.qemu_io(path, "read -P %d 0 64k" % written[0], fmt=fmt)
    assert compute.qemu_img_info(path) == before
    assert golden.holders(images, GOLDEN) == [
        golden.holder_name(instance.uuid, "disk", "compute-1",
                           instance.project_id)]


def test_images_not_on_the_export_take_novas_usual_path(node, images,
                                                        glance_images,
                                                        tmp_path):
    source = str(tmp_path / "elsewhere.qcow2")
    compute.make_golden(source, "qcow2", size_mib=16)
    glance_images[OTHER] = {
        "disk_format": "qcow2", "container_format": "bare",
        "locations": [{"url": "file:///var/lib/glance/x", "metadata": {}}],
        "stores": "local", "properties": {}}
    downloads = []

    def download(target, *args, **kwargs):
        downloads.append(target)
        shutil.copy(source, target)

    instance = node.instance()
    disk = node.spawn_root_disk(instance, OTHER, fetch=download)
    assert len(downloads) == 1
    info = compute.qemu_img_info(disk.path)
    assert info["full-backing-filename"] == downloads[0]
    assert os.path.dirname(downloads[0]) == node.base_dir()
    assert not os.path.exists(os.path.join(images, golden.REFS_DIR))


@pytest.mark.parametrize("meta", [
    gvfs_image(store="another-export"),
    dict(gvfs_image(), properties={"img_signature": "c2ln"}),
], ids=["another store", "signed"])
def test_images_nova_must_download_are_downloaded(node, images,
                                                  glance_images, meta):
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = meta
    downloads = []

    def download(target, *args, **kwargs):
        downloads.append(target)
        shutil.copy(os.path.join(images, GOLDEN), target)

    node.spawn_root_disk(node.instance(), GOLDEN, fetch=download)
    assert len(downloads) == 1
    assert golden.holders(images, GOLDEN) == []
    assert os.listdir(images) == [GOLDEN]  # The walk ahead made nothing.


def test_a_location_of_another_images_file_is_not_cloned(node, images,
                                                         glance_images):
    """A location added by hand may name another project's image file."""
    compute.make_golden(os.path.join(images, OTHER), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image(image_id=OTHER)
    downloads = []

    def download(target, *args, **kwargs):
        downloads.append(target)
        compute.make_golden(target, "qcow2", 16)

    disk = node.spawn_root_disk(node.instance(), GOLDEN, fetch=download)
    assert len(downloads) == 1
    assert compute.qemu_img_info(disk.path)["full-backing-filename"] == \
        downloads[0]
    assert golden.holders(images, OTHER) == []
    # Its own location is cloned as ever.
    assert node.driver.image_export.image_id_of(
        dict(gvfs_image(), id=GOLDEN)) == GOLDEN


def test_formats_an_overlay_cannot_back_onto_are_not_cloned(node):
    export = node.driver.image_export
    assert export.image_id_of(dict(gvfs_image("qcow2"), id=GOLDEN)) == \
        GOLDEN
    for fmt in ("vmdk", "iso", "vhdx", None):
        assert export.image_id_of(dict(gvfs_image(fmt), id=GOLDEN)) is None


def test_a_golden_image_whose_data_is_not_its_format_is_refused(
        node, images, glance_images):
    from nova import exception

    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image("raw")  # Glance says raw: a lie.
    instance = node.instance()
    with pytest.raises(exception.ImageUnacceptable):
        clone(node, instance)
    assert not os.path.exists(os.path.join(
        node.instances_path, instance.uuid, "disk"))
    assert golden.holders(images, GOLDEN) == []


def test_a_golden_image_with_a_backing_file_is_refused(node, images,
                                                       glance_images,
                                                       tmp_path):
    from nova import exception

    secret = str(tmp_path / "host-secret")
    with open(secret, "wb") as f:
        f.write(b"secret" * 1000)
    # The hostile image points at a file of the host.
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", secret,
                    "-F", "raw", os.path.join(images, GOLDEN)], check=True)
    glance_images[GOLDEN] = gvfs_image("qcow2")
    for _ in range(2):  # A refusal is not remembered as a pass.
        instance = node.instance()
        with pytest.raises(exception.InvalidDiskInfo):
            clone(node, instance)
        assert golden.holders(images, GOLDEN) == []


def test_a_golden_image_is_inspected_once_not_at_every_clone(
        node, images, glance_images, monkeypatch):
    """Nova's inspection and safety check run for the first clone only.

    Nova's own ``create_image`` would inspect the backing file again.
    """
    from nova.virt import images as nova_images

    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image("qcow2")
    inspected = []
    real = nova_images.get_image_format

    def counted(path):
        inspected.append(path)
        return real(path)

    monkeypatch.setattr(nova_images, "get_image_format", counted)
    disks = [clone(node, node.instance()) for _ in range(3)]
    assert inspected == [os.path.join(images, GOLDEN)]
    for disk in disks:
        assert compute.qemu_img_info(disk.path)["backing-filename"] == \
            os.path.join(images, GOLDEN)


def test_the_kernel_ramdisk_and_golden_image_are_fetched_at_once(
        node, images, glance_images, monkeypatch):
    """Nova fetches an instance's kernel, then its ramdisk, then clones.

    Here each download waits until the other two parts have begun: in
    Nova's order it would wait in vain.  Nova's own steps afterwards
    fetch nothing again, and the clone does not inspect again.
    """
    from nova.virt import images as nova_images

    golden_path = os.path.join(images, GOLDEN)
    compute.make_golden(golden_path, "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image("qcow2")
    parts = {"kernel": ("1c9e7f52-0a4b-4d6e-8f1a-2b3c4d5e6f70", "aki"),
             "ramdisk": ("2d0f8a63-1b5c-4e7f-9a2b-3c4d5e6f7081", "ari")}
    begun = {name: threading.Event()
             for name in ("kernel", "ramdisk", "golden")}
    downloads, waited_in_vain, inspected = [], [], []

    def meta(context, image_id, **kwargs):
        [(name, fmt)] = [(n, f) for n, (i, f) in parts.items()
                         if i == image_id]
        return {"id": image_id, "disk_format": fmt,
                "container_format": fmt, "properties": {}}

    def download(context, image_id, dest_path=None, **kwargs):
        [name] = [n for n, (i, _) in parts.items() if i == image_id]
        downloads.append(name)
        begun[name].set()
        if not all(event.wait(10) for event in begun.values()):
            waited_in_vain.append(name)
        with open(dest_path, "wb") as f:
            f.write(name.encode() * 4096)

    real_format = nova_images.get_image_format

    def get_image_format(path):
        if path == golden_path:
            inspected.append(path)
            begun["golden"].set()
        return real_format(path)

    monkeypatch.setattr(nova_images.IMAGE_API, "get", meta)
    monkeypatch.setattr(nova_images.IMAGE_API, "download", download)
    monkeypatch.setattr(nova_images, "get_image_format", get_image_format)
    from nova.virt.libvirt import imagecache
    from nova.virt.libvirt import utils as libvirt_utils

    instance = node.instance()
    # Before Nova's _create_image makes it (and removes it if the spawn
    # fails): nothing may make it first.
    directory = os.path.join(node.instances_path, instance.uuid)
    os.rmdir(directory)
    disk_images = {"image_id": GOLDEN, "kernel_id": parts["kernel"][0],
                   "ramdisk_id": parts["ramdisk"][0]}
    node.driver._fetch_together(node.context, instance,
                                {"disk_images": disk_images})
    assert sorted(downloads) == ["kernel", "ramdisk"]
    assert waited_in_vain == []
    assert not os.path.exists(directory)
    os.makedirs(directory)
    for name, (image_id, _) in parts.items():
        # Nova's own step, as _create_image runs it: nothing to fetch.
        node.driver.image_backend.by_name(
            instance, name, image_type="raw").cache(
                fetch_func=libvirt_utils.fetch_raw_image,
                context=node.context,
                filename=imagecache.get_cache_fname(image_id),
                image_id=image_id)
        with open(os.path.join(directory, name), "rb") as f:
            assert f.read() == name.encode() * 4096
    disk = clone(node, instance)
    assert sorted(downloads) == ["kernel", "ramdisk"]
    assert inspected == [golden_path]
    assert compute.qemu_img_info(disk.path)["backing-filename"] == \
        golden_path


def test_an_image_without_a_kernel_has_nothing_to_fetch_ahead(
        node, images, glance_images, monkeypatch):
    from nova.virt import images as nova_images

    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image("qcow2")
    looked = []
    monkeypatch.setattr(imagebackend.GvfsImage, "look_ahead",
                        lambda self, *args: looked.append(args))
    monkeypatch.setattr(nova_images.IMAGE_API, "download",
                        refuse_download)
    node.driver._fetch_together(node.context, node.instance(), {
        "disk_images": {"image_id": GOLDEN, "kernel_id": None,
                        "ramdisk_id": None}})
    assert looked == []


def test_a_flavor_smaller_than_the_image_is_refused(node, images,
                                                    glance_images):
    from nova import exception

    compute.make_golden(os.path.join(images, GOLDEN), "qcow2",
                        size_mib=2048, pattern_every_mib=1024)
    glance_images[GOLDEN] = gvfs_image()
    with pytest.raises(exception.FlavorDiskSmallerThanImage):
        clone(node, node.instance(root_gb=1))
    assert golden.holders(images, GOLDEN) == []


def test_a_golden_image_gone_from_the_export_is_downloaded(
        node, images, glance_images, tmp_path):
    source = str(tmp_path / "copy.qcow2")
    compute.make_golden(source, "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()  # Listed, but not on the export.
    downloads = []

    def download(target, *args, **kwargs):
        downloads.append(target)
        shutil.copy(source, target)

    node.spawn_root_disk(node.instance(), GOLDEN, fetch=download)
    assert len(downloads) == 1
    assert golden.holders(images, GOLDEN) == []
    assert os.listdir(images) == []  # Nothing left behind.


def _hold_after_the_overlay(monkeypatch, first=None):
    """Make the reference wait until the overlay exists (and ``first()``).

    A clone that took its reference before making the overlay waits in
    vain and fails: the two are to overlap.
    """
    from nova.virt.libvirt import utils as libvirt_utils

    made = threading.Event()
    create_image = libvirt_utils.create_image
    hold = golden.hold

    def creating(*args, **kwargs):
        create_image(*args, **kwargs)
        made.set()

    def holding(*args):
        assert made.wait(10), "the reference was taken before the overlay"
        if first is not None:
            first()
        return hold(*args)

    monkeypatch.setattr(libvirt_utils, "create_image", creating)
    monkeypatch.setattr(golden, "hold", holding)


def test_the_path_to_the_image_is_walked_while_glance_is_asked(
        node, images, glance_images, monkeypatch):
    """The mount's lookups overlap the Images API's round trips.

    Glance answers only once the image's path has been looked at from
    another thread; a clone that walks it only after Glance fails.
    """
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    image = os.path.join(images, GOLDEN)
    walked = threading.Event()
    stat, get = os.stat, imagebackend.IMAGE_API.get

    def watching(path, *args, **kwargs):
        if path == image and threading.current_thread().name == "gvfs-walk":
            walked.set()
        return stat(path, *args, **kwargs)

    def asked(*args, **kwargs):
        assert walked.wait(10), "the path was not walked beside Glance"
        return get(*args, **kwargs)

    monkeypatch.setattr(os, "stat", watching)
    monkeypatch.setattr(imagebackend.IMAGE_API, "get", asked)
    instance = node.instance()
    disk = clone(node, instance)
    assert compute.qemu_img_info(disk.path)["full-backing-filename"] == image


def test_the_reference_is_taken_while_the_overlay_is_made(
        node, images, glance_images, monkeypatch):
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    _hold_after_the_overlay(monkeypatch)
    instance = node.instance()
    disk = clone(node, instance)
    assert compute.qemu_img_info(disk.path)["full-backing-filename"] == \
        os.path.join(images, GOLDEN)
    assert golden.holders(images, GOLDEN) == [
        golden.holder_name(instance.uuid, "disk", "compute-1",
                           instance.project_id)]


def test_an_image_gone_before_its_reference_held_is_downloaded(
        node, images, glance_images, monkeypatch, tmp_path):
    """The overlay was made, then the reference found the image gone."""
    path = os.path.join(images, GOLDEN)
    compute.make_golden(path, "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    source = str(tmp_path / "copy.qcow2")
    shutil.copy(path, source)

    _hold_after_the_overlay(monkeypatch, lambda: os.remove(path))
    downloads = []

    def download(target, *args, **kwargs):
        downloads.append(target)
        shutil.copy(source, target)

    disk = node.spawn_root_disk(node.instance(), GOLDEN, fetch=download)
    assert len(downloads) == 1
    assert compute.qemu_img_info(disk.path)["full-backing-filename"] != \
        path
    assert golden.holders(images, GOLDEN) == []


def test_a_reference_that_fails_leaves_no_overlay(node, images,
                                                  glance_images,
                                                  monkeypatch):
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()

    def dead_mount():
        raise OSError(errno.EIO, "the mount timed out")

    _hold_after_the_overlay(monkeypatch, dead_mount)
    instance = node.instance()
    with pytest.raises(OSError, match="timed out"):
        clone(node, instance)
    assert not os.path.exists(os.path.join(node.instances_path,
                                           instance.uuid, "disk"))


def test_an_interrupt_is_not_taken_for_a_gone_image(
        node, images, glance_images, monkeypatch):
    from nova.virt.libvirt import utils as libvirt_utils

    path = os.path.join(images, GOLDEN)
    compute.make_golden(path, "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    removed = threading.Event()
    hold = golden.hold

    def interrupted(*args, **kwargs):
        os.remove(path)
        removed.set()
        raise KeyboardInterrupt()

    def holding(*args):
        assert removed.wait(10)
        return hold(*args)

    monkeypatch.setattr(libvirt_utils, "create_image", interrupted)
    monkeypatch.setattr(golden, "hold", holding)
    with pytest.raises(KeyboardInterrupt):
        clone(node, node.instance())
    assert golden.holders(images, GOLDEN) == []


def test_later_clones_do_not_ask_glance_again(node, images, glance_images,
                                              monkeypatch, tmp_path):
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    asked = []
    get = imagebackend.IMAGE_API.get

    def counting_get(*args, **kwargs):
        asked.append(args[1])
        return get(*args, **kwargs)

    monkeypatch.setattr(imagebackend.IMAGE_API, "get", counting_get)
    for _ in range(3):
        clone(node, node.instance())
    assert asked == [GOLDEN]
    assert len(golden.holders(images, GOLDEN)) == 3
    # Deleted meanwhile: the clone finds the file gone, forgets what it
    # knew and takes Nova's usual path, which asks Glance (here: gone).
    from nova import exception
    os.remove(os.path.join(images, GOLDEN))
    del glance_images[GOLDEN]
    with pytest.raises(exception.ImageNotFound):
        node.spawn_root_disk(node.instance(), GOLDEN,
                             fetch=_fetch_asking(imagebackend.IMAGE_API))
    assert asked == [GOLDEN, GOLDEN]


def _fetch_asking(image_api):
    """A download that asks the image API first, as Nova's does."""
    def fetch(target, context=None, image_id=None, **kwargs):
        image_api.get(context, image_id)
        raise AssertionError("downloaded an image Glance does not have")
    return fetch


def test_lookups_expire():
    now = [0.0]
    found = lookups.GoldenLookups(60.0, clock=lambda: now[0])
    found.put(GOLDEN, (GOLDEN, "raw"))
    now[0] = 59.0
    assert found.get(GOLDEN) == (GOLDEN, "raw")
    now[0] = 60.0
    assert found.get(GOLDEN) is None
    never = lookups.GoldenLookups(0.0)
    never.put(GOLDEN, (GOLDEN, "raw"))
    assert never.get(GOLDEN) is None


def test_a_restart_of_an_existing_clone_downloads_nothing(node, images,
                                                          glance_images):
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance(root_gb=1)
    disk = clone(node, instance)
    # A reference lost (say, removed by hand) comes back at the next
    # hard reboot, which runs the same cache() on the existing disk; a
    # larger flavor grows the overlay.
    golden.release(images, GOLDEN, golden.holder_name(
        instance.uuid, "disk", "compute-1", instance.project_id))
    instance.flavor.root_gb = 2
    clone(node, instance)
    assert compute.qemu_img_info(disk.path)["virtual-size"] == 2 * GIB
    assert len(golden.holders(images, GOLDEN)) == 1


def _swap_golden(images, kind, secret):
    """Put another file in the golden image's place, as an attacker would.

    ``kind``: "host-backing" (a qcow2 whose backing file is ``secret``, a
    file of the host) or "raw" (the same bytes, another format).
    """
    path = os.path.join(images, GOLDEN)
    os.unlink(path)
    if kind == "host-backing":
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b",
                        secret, "-F", "raw", path], check=True)
    else:
        compute.make_golden(path, "raw", 16)


@pytest.mark.parametrize("kind", ["host-backing", "raw"])
def test_a_golden_image_swapped_under_an_existing_disk_is_refused(
        node, images, glance_images, tmp_path, monkeypatch, kind):
    """A hard reboot re-checks the backing chain before the disk is used."""
    from nova import exception
    from nova.virt import images as nova_images

    secret = str(tmp_path / "host-secret")
    with open(secret, "wb") as f:
        f.write(b"secret" * 1000)
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance(root_gb=1)
    disk = clone(node, instance)
    inspected = []
    real = nova_images.get_image_format
    monkeypatch.setattr(nova_images, "get_image_format",
                        lambda path: inspected.append(path) or real(path))
    # The same golden file: used again without inspecting it again.
    node.spawn_root_disk(instance, GOLDEN, fetch=refuse_download,
                         name=disk.path)
    assert inspected == []

    _swap_golden(images, kind, secret)
    for _ in range(2):  # A refusal is not remembered as a pass.
        with pytest.raises(exception.InvalidDiskInfo):
            node.spawn_root_disk(instance, GOLDEN, fetch=refuse_download,
                                 name=disk.path)
    # Inspected again: it is another file now.
    assert set(inspected) == {os.path.join(images, GOLDEN)}
    # The disk is left as it was, for the operator to look at.
    assert compute.qemu_img_info(disk.path)["full-backing-filename"] == \
        os.path.join(images, GOLDEN)


def test_an_existing_disk_whose_golden_image_is_gone_is_refused(
        node, images, glance_images):
    from nova import exception

    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance(root_gb=1)
    disk = clone(node, instance)
    os.unlink(os.path.join(images, GOLDEN))
    with pytest.raises(exception.InvalidDiskInfo, match=GOLDEN):
        node.spawn_root_disk(instance, GOLDEN, fetch=refuse_download,
                             name=disk.path)


def test_a_power_on_holds_the_reference_spawn_took(node, images,
                                                   glance_images):
    """Nova's power-on and hard reboot name the disk by its whole path.

    ``_create_images_and_backing`` passes ``disk_name=<instance
    dir>/disk``; a reference named after that path would be a second
    one, which deleting the instance (by its disks' file names) leaves
    behind, keeping the golden image "in use".
    """
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance(root_gb=1)
    disk = clone(node, instance)
    node.spawn_root_disk(instance, GOLDEN, fetch=refuse_download,
                         name=disk.path)
    assert golden.holders(images, GOLDEN) == [
        golden.holder_name(instance.uuid, "disk", "compute-1",
                           instance.project_id)]
    assert node.driver.delete_instance_files(instance)
    assert golden.holders(images, GOLDEN) == []


def test_a_reference_of_an_earlier_release_goes_with_its_disk(
        node, images, glance_images):
    """An earlier release's reference is dropped with its disk.

    Disks cloned before references named their project hold a name of
    three parts; left behind, it would keep the golden image "in use"
    until the image cache manager ran.
    """
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance(root_gb=1)
    clone(node, instance)
    current = golden.holder_name(instance.uuid, "disk", "compute-1",
                                 instance.project_id)
    earlier = golden.holder_name(instance.uuid, "disk", "compute-1")
    golden.release(images, GOLDEN, current)
    golden.hold(images, GOLDEN, earlier)
    assert node.driver.delete_instance_files(instance)
    assert golden.holders(images, GOLDEN) == []


def test_deleting_the_instance_drops_its_reference(node, images,
                                                   glance_images):
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    kept = node.instance()
    gone = node.instance()
    clone(node, kept)
    clone(node, gone)
    assert len(golden.holders(images, GOLDEN)) == 2
    assert node.driver.delete_instance_files(gone)
    assert golden.holders(images, GOLDEN) == [
        golden.holder_name(kept.uuid, "disk", "compute-1",
                           kept.project_id)]
    with pytest.raises(golden.GoldenImageInUse):
        golden.retire(images, GOLDEN, grace=0)
    assert node.driver.delete_instance_files(kept)
    os.unlink(golden.retire(images, GOLDEN, grace=0))


def test_a_disk_whose_reference_cannot_be_read_is_still_deleted(
        node, images, glance_images, caplog):
    """Releasing references warns and goes on: Nova's own cleanup runs."""
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance()
    disk = clone(node, instance)
    # A qcow2 header qemu-img refuses: the backing file cannot be read.
    with open(disk.path, "r+b") as f:
        f.write(b"QFI\xfb\x00\x00\x00\x63")
    with caplog.at_level("WARNING"):
        assert node.driver.delete_instance_files(instance)
    assert not os.path.exists(os.path.dirname(disk.path))
    assert "Cannot drop the golden image reference of disk" in caplog.text


def test_references_of_vanished_disks_are_reconciled(node, images,
                                                     glance_images):
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    kept, lost = node.instance(), node.instance()
    clone(node, kept)
    clone(node, lost)
    # Another host's references are not this host's to judge.
    golden.hold(images, GOLDEN, golden.holder_name("x", "disk", "compute-2"))
    shutil.rmtree(os.path.join(node.instances_path, lost.uuid))
    assert node.driver.reconcile_references() == []  # Too young yet.
    assert node.driver.reconcile_references(min_age=0) == [
        golden.holder_name(lost.uuid, "disk", "compute-1",
                           lost.project_id)]
    assert sorted(golden.holders(images, GOLDEN)) == sorted([
        golden.holder_name(kept.uuid, "disk", "compute-1",
                           kept.project_id),
        golden.holder_name("x", "disk", "compute-2")])


def test_a_direct_snapshot_lands_in_the_store_directory(node, images,
                                                        glance_images,
                                                        tmp_path):
    from gvfs_openstack.sidecar import format as meta_format
    from gvfs_openstack.sidecar import scan

    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 64)
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance()
    disk = clone(node, instance)
    compute.qemu_io(disk.path, "write -P 0x5a 4M 1M")
    snap = "7c3b2e4d-9f5a-4a0c-9e8b-2d3f4a5b6c7d"
    location = disk.direct_snapshot(node.context, "snap", "qcow2",
                                    snap, GOLDEN)
    assert location == "gvfs://dtn/%s" % snap
    path = os.path.join(images, snap)
    expected = str(tmp_path / "expected.qcow2")
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", disk.path,
                    expected], check=True)
    subprocess.run(["qemu-img", "compare", "-f", "qcow2", "-F", "qcow2",
                    expected, path], check=True, capture_output=True)
    assert compute.qemu_img_info(path).get("backing-filename") is None
    sidecar = meta_format.parse(open(scan.sidecar_path(path), "rb").read())
    assert sidecar.matches(os.stat(path).st_size,
                           os.stat(path).st_mtime_ns)
    assert not [n for n in os.listdir(images)
                if n.startswith(imagebackend.UPLOAD_PREFIX)]
    disk.cleanup_direct_snapshot({"url": location})
    assert not os.path.exists(path)
    assert not os.path.exists(scan.sidecar_path(path))


def test_a_running_guest_is_snapshotted_the_usual_way(node, images,
                                                      glance_images):
    from nova.compute import power_state

    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance()
    disk = clone(node, instance)
    instance.power_state = power_state.RUNNING
    with pytest.raises(NotImplementedError):
        disk.direct_snapshot(node.context, "s", "qcow2", OTHER, GOLDEN)
    assert OTHER not in os.listdir(images)


def test_a_direct_snapshot_onto_a_full_export_leaves_nothing(
        node, images, glance_images, monkeypatch):
    from nova import exception
    from nova.virt.libvirt import utils as libvirt_utils

    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    disk = clone(node, node.instance())

    def full(source, fmt, target, out_format):
        with open(target, "wb") as f:
            f.write(b"partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(libvirt_utils, "extract_snapshot", full)
    with pytest.raises(exception.ImageUnacceptable):
        disk.direct_snapshot(node.context, "s", "qcow2", OTHER, GOLDEN)
    left = os.listdir(images)
    assert OTHER not in left and ".gvfs-meta." + OTHER not in left
    assert not [n for n in left if n.startswith(imagebackend.UPLOAD_PREFIX)]


def test_pre_caching_warms_the_proxy_instead_of_downloading(
        nova_fixtures, glance_images, tmp_path):
    path = str(tmp_path / "control.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen(1)
    asked = []

    def proxy():
        conn, _ = server.accept()
        with conn:
            asked.append(json.loads(conn.makefile().readline()))
            conn.sendall(json.dumps({"result": {
                "path": asked[0]["path"], "size": MIB, "fetched": MIB,
                "already_cached": 0, "seconds": 0.1}}).encode() + b"\n")

    thread = threading.Thread(target=proxy)
    thread.start()
    # Nothing is mounted to pre-warm: the proxy fetches the image.
    node = compute.ComputeNode(
        str(tmp_path / "instances"), mount_type="fuse",
        export="/srv/dtn", image_dir="images", glance_stores=["dtn"],
        mount_point_base=str(tmp_path / "mounts"),
        proxy_control_socket=path, warm_rate_mib=40).activate()
    glance_images[GOLDEN] = gvfs_image()
    try:
        assert node.driver.cache_image(node.context, GOLDEN) is True
    finally:
        thread.join(5)
        server.close()
    assert asked == [{"command": "warm", "rate_mib": 40,
                      "path": "/srv/dtn/images/" + GOLDEN}]
    assert not os.path.exists(node.base_dir())


def test_nova_compute_starts_while_the_dtn_does_not_answer(
        nova_fixtures, tmp_path, caplog):
    # init_host mounts the export so that the first clone need not; a
    # proxy that is not there yet must not keep the host from serving.
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    node = compute.ComputeNode(
        str(tmp_path / "instances"), mount_type="nfs",
        proxy="127.0.0.1:%d" % port, export="/export", image_dir="images",
        mount_point_base=str(tmp_path / "mounts"), io_timeout=2.0,
        glance_stores=["dtn"]).activate()
    node.driver.init_host(node.host)
    assert "Not mounting the GVFS export yet" in caplog.text


def _moved_here(node, instance, source_images, backing_id=GOLDEN):
    """The instance's disk as a cold migration leaves it on this host.

    Nova copies the overlay as it is: its backing file names the golden
    image on the source host's mount (``source_images``), not this one's.
    """
    directory = os.path.join(node.instances_path, instance.uuid)
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "disk")
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F",
                    "qcow2", "-b", os.path.join(source_images, backing_id),
                    path, "1G"], check=True)
    return path


@pytest.fixture
def source_images(tmp_path, images):
    """The source host's mount of the same export, at another path."""
    path = tmp_path / "source-mount" / "images"
    path.mkdir(parents=True)
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    shutil.copyfile(os.path.join(images, GOLDEN), path / GOLDEN)
    return str(path)


def test_a_disk_moved_from_another_host_backs_onto_this_hosts_mount(
        node, images, glance_images, source_images):
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance(root_gb=1)
    path = _moved_here(node, instance, source_images)
    # finish_migration makes the instance's disks as spawn does.
    clone(node, instance)
    info = compute.qemu_img_info(path)
    assert info["full-backing-filename"] == os.path.join(images, GOLDEN)
    assert info["backing-filename-format"] == "qcow2"
    assert golden.holders(images, GOLDEN) == [
        golden.holder_name(instance.uuid, "disk", "compute-1",
                           instance.project_id)]


def test_a_moved_disk_backing_onto_another_image_is_not_re_pointed(
        node, images, glance_images, source_images):
    glance_images[GOLDEN] = gvfs_image()
    shutil.copyfile(os.path.join(source_images, GOLDEN),
                    os.path.join(source_images, OTHER))
    instance = node.instance(root_gb=1)
    path = _moved_here(node, instance, source_images, backing_id=OTHER)
    with pytest.raises(AssertionError, match="downloaded"):
        clone(node, instance)
    assert compute.qemu_img_info(path)["full-backing-filename"] == \
        os.path.join(source_images, OTHER)
    assert golden.holders(images, GOLDEN) == []


def _held_for(images, instance, host, image_id=OTHER, disk="disk"):
    """The reference a move's source takes for ``host`` (``hold_for``)."""
    holder = golden.holder_name(instance.uuid, disk, host,
                                instance.project_id)
    golden.hold(images, image_id, holder)
    return holder


def _moved_onto_other(node, images, glance_images, source_images):
    """An instance of GOLDEN whose moved overlay backs onto OTHER.

    OTHER is on the export (both hosts' mounts); ``(instance, path)``.
    """
    glance_images[GOLDEN] = gvfs_image()
    for directory in (images, source_images):
        shutil.copyfile(os.path.join(source_images, GOLDEN),
                        os.path.join(directory, OTHER))
    instance = node.instance(root_gb=1)
    return instance, _moved_here(node, instance, source_images,
                                 backing_id=OTHER)


def test_a_moved_disk_on_a_golden_image_held_for_it_here_is_re_pointed(
        node, images, glance_images, source_images):
    # Launchpad #1732428: an unshelved instance's overlay backs onto its
    # shelved snapshot (OTHER) while Nova's image_ref names GOLDEN.  The
    # source held OTHER for this disk on this host before the copy.
    instance, path = _moved_onto_other(node, images, glance_images,
                                       source_images)
    held = _held_for(images, instance, "compute-1")
    clone(node, instance)
    info = compute.qemu_img_info(path)
    assert info["full-backing-filename"] == os.path.join(images, OTHER)
    assert golden.holders(images, OTHER) == [held]
    assert golden.holders(images, GOLDEN) == []


@pytest.mark.parametrize("host,disk", [("compute-3", "disk"),
                                       ("compute-1", "disk.rescue")])
def test_a_reference_for_another_host_or_disk_adopts_nothing(
        node, images, glance_images, source_images, host, disk):
    instance, path = _moved_onto_other(node, images, glance_images,
                                       source_images)
    held = _held_for(images, instance, host, disk=disk)
    with pytest.raises(AssertionError, match="downloaded"):
        clone(node, instance)
    assert compute.qemu_img_info(path)["full-backing-filename"] == \
        os.path.join(source_images, OTHER)
    assert golden.holders(images, OTHER) == [held]


def test_an_unshelved_disk_stays_on_its_snapshot(node, images,
                                                 glance_images):
    """Nova would rebase it onto image_ref's copy in _base: not a clone.

    Its golden image is the shelved snapshot (here GOLDEN), read on
    demand through the mount; the rebase would read both images whole
    and wants a _base copy no clone makes.
    """
    from nova.compute import vm_states
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance(root_gb=1)
    disk = clone(node, instance)
    instance.vm_state = vm_states.SHELVED_OFFLOADED
    assert disk.golden_image() == GOLDEN
    assert not node.driver._needs_rebase_original_qcow2_image(instance, disk)
    # A Qcow2 disk of Nova's own, unshelved, is rebased as Nova does.
    from nova.virt.libvirt import imagebackend as nova_backends
    plain = nova_backends.Qcow2(instance=instance, disk_name="disk.plain")
    assert node.driver._needs_rebase_original_qcow2_image(instance, plain)


def test_a_move_holds_the_golden_image_for_the_destination_first(
        node, images, glance_images):
    compute.make_golden(os.path.join(images, GOLDEN), "qcow2", 16)
    glance_images[GOLDEN] = gvfs_image()
    instance = node.instance(root_gb=1)
    disk = clone(node, instance)
    mine, theirs = (golden.holder_name(instance.uuid, "disk", host,
                                       instance.project_id)
                    for host in ("compute-1", "compute-2"))
    assert disk.hold_for("compute-2") == GOLDEN
    assert sorted(golden.holders(images, GOLDEN)) == sorted([mine, theirs])
    disk.release_for("compute-2", GOLDEN)
    assert golden.holders(images, GOLDEN) == [mine]
