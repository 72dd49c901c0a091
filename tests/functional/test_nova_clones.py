# SPDX-License-Identifier: Apache-2.0
"""Nova's ``gvfs`` backend end to end: a real glance-api whose ``dtn``
store is on the DTN export, compute nodes running Nova's real driver and
image backend that mount the export through their own client proxy
(``gvfs-proxy mount``), and real ``qemu-img``/``qemu-io`` as the guest.
"""

import hashlib
import json
import os
import subprocess
import sys
import urllib.error

import pytest

from gvfs_openstack import golden
from gvfs_openstack.mount import mounter
from tests.functional.test_glance_api import wait_for
from tests.lab import compute
from tests.lab.compute import MIB


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp", cache={"capacity_mb": 512})


@pytest.fixture(scope="module")
def golden_image(glance, tmp_path_factory):
    """A 64 MiB qcow2 golden image in the ``dtn`` store: id, patterns."""
    path = str(tmp_path_factory.mktemp("golden") / "golden.qcow2")
    written = compute.make_golden(path, "qcow2", size_mib=64)
    image_id = glance.create_image("golden", disk_format="qcow2")
    assert glance.upload(image_id, path, store="dtn") == 204
    assert glance.image(image_id)["stores"] == "dtn"
    return image_id, written


def reads_of(written):
    return ["read -P %d %d 64k" % (p, off) for off, p in written.items()]


@pytest.fixture
def mounts(tmp_path):
    """Mount bases of the compute nodes; unmounted after the test."""
    made = []

    def make(name):
        base = str(tmp_path / name)
        made.append(base)
        return base

    yield make
    for base in made:
        mounter.FuseMounter(base).unmount_all()


def node_options(lab, mount_base, proxy=None):
    proxy = proxy or lab.client_proxy
    return {"mount_type": "fuse", "proxy": "127.0.0.1:%d" % proxy.port,
            "export": lab.export, "image_dir": "images",
            "mount_point_base": mount_base, "glance_stores": ["dtn"],
            "io_timeout": 20.0}


@pytest.fixture
def node(lab, glance, mounts, tmp_path):
    with compute.nova_fixtures():
        yield compute.ComputeNode(
            str(tmp_path / "instances"), glance_url=glance.url,
            auth_token=glance.token(),
            service_auth=glance.keystone.auth_options("nova"),
            **node_options(lab, mounts("nova-mounts"))).activate()


def export_sha256(lab, image_id):
    digest = hashlib.sha256()
    with open(os.path.join(lab.export, "images", image_id), "rb") as f:
        while chunk := f.read(8 * MIB):
            digest.update(chunk)
    return digest.hexdigest()


def test_spawn_clones_an_overlay_of_the_golden_image_on_the_mount(
        node, lab, golden_image):
    image_id, written = golden_image
    before = export_sha256(lab, image_id)
    instance = node.instance(root_gb=1)
    disk = node.spawn_root_disk(instance, image_id)

    mounted = node.driver.image_export.datadir()
    info = compute.qemu_img_info(disk.path)
    assert info["full-backing-filename"] == os.path.join(mounted, image_id)
    assert os.path.ismount(os.path.dirname(mounted))
    assert not os.path.exists(node.base_dir())  # Nothing downloaded.
    compute.qemu_io(disk.path, *reads_of(written))
    compute.qemu_io(disk.path, "write -P 0xee 0 2M", "read -P 0xee 0 2M")
    assert export_sha256(lab, image_id) == before
    assert golden.holders(os.path.join(lab.export, "images"), image_id) == \
        [golden.holder_name(instance.uuid, "disk", "compute-1")]
    assert node.driver.delete_instance_files(instance)
    assert golden.holders(os.path.join(lab.export, "images"),
                          image_id) == []


def test_resize_and_rescue_leave_the_golden_image_alone(
        node, lab, golden_image):
    """Nova's own Qcow2 code resizes and rescues; references follow."""
    image_id, written = golden_image
    before = export_sha256(lab, image_id)
    images = os.path.join(lab.export, "images")
    instance = node.instance(root_gb=1)
    disk = node.spawn_root_disk(instance, image_id)
    backing = compute.qemu_img_info(disk.path)["full-backing-filename"]
    # Resize to a larger flavor grows the overlay, not what it is made of.
    disk.resize_image(2 * 1024 * MIB)
    info = compute.qemu_img_info(disk.path)
    assert info["virtual-size"] == 2 * 1024 * MIB
    assert info["full-backing-filename"] == backing
    compute.qemu_io(disk.path, *reads_of(written))
    compute.qemu_io(disk.path, "write -P 0x5a 1536M 64k",
                    "read -P 0x5a 1536M 64k")
    # Rescue boots a second overlay of the same golden image.
    rescue = node.spawn_root_disk(instance, image_id, name="disk.rescue")
    assert compute.qemu_img_info(rescue.path)["full-backing-filename"] == \
        backing
    assert sorted(golden.holders(images, image_id)) == sorted(
        golden.holder_name(instance.uuid, name, "compute-1")
        for name in ("disk", "disk.rescue"))
    # Unrescue drops the rescue disk's reference, then Nova's own
    # unrescue goes on to the guest's saved definition (which a rescue
    # through libvirt would have written; there is no libvirt here).
    with pytest.raises(FileNotFoundError, match="unrescue.xml"):
        node.driver.unrescue(node.context, instance)
    assert golden.holders(images, image_id) == [
        golden.holder_name(instance.uuid, "disk", "compute-1")]
    assert node.driver.delete_instance_files(instance)
    assert golden.holders(images, image_id) == []
    assert export_sha256(lab, image_id) == before


def test_glance_keeps_an_image_instances_are_made_of(node, lab, glance,
                                                     tmp_path):
    path = str(tmp_path / "doomed.qcow2")
    compute.make_golden(path, "qcow2", size_mib=16)
    image_id = glance.create_image("doomed", disk_format="qcow2")
    assert glance.upload(image_id, path, store="dtn") == 204
    instance = node.instance()
    node.spawn_root_disk(instance, image_id)

    refused = glance.openstack("image", "delete", image_id)
    assert refused.returncode != 0
    assert "in use" in refused.stderr or "409" in refused.stderr, \
        refused.stderr
    assert glance.image(image_id)["status"] == "active"
    assert os.path.exists(os.path.join(lab.export, "images", image_id))

    assert node.driver.delete_instance_files(instance)
    deleted = glance.openstack("image", "delete", image_id)
    assert deleted.returncode == 0, deleted.stderr
    assert not os.path.exists(os.path.join(lab.export, "images", image_id))


def test_a_direct_snapshot_is_registered_in_glance_by_location(
        node, lab, glance, golden_image, tmp_path):
    from nova.image import glance as nova_glance

    image_id, written = golden_image
    instance = node.instance()
    disk = node.spawn_root_disk(instance, image_id)
    compute.qemu_io(disk.path, "write -P 0x77 3M 5M")
    # nova-api creates the queued image; the driver's snapshot() writes
    # it and hands Glance the location.
    snapshot_id = glance.create_image("snap", disk_format="qcow2")
    location = disk.direct_snapshot(node.context, "snap", "qcow2",
                                    snapshot_id, image_id)
    assert location == "gvfs://dtn/%s" % snapshot_id
    nova_glance.API().update(node.context, snapshot_id,
                             {"location": location}, purge_props=False)
    # Glance reads it through its own mount to hash it (the location
    # import task), then activates it.
    snapshot = wait_for(glance, snapshot_id,
                        lambda image: image["status"] == "active" and
                        image.get("os_hash_value"))

    expected = str(tmp_path / "expected.qcow2")
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", disk.path,
                    expected], check=True)
    with open(expected, "rb") as f:
        data = f.read()
    assert snapshot["checksum"] == hashlib.md5(data).hexdigest()
    assert snapshot["os_hash_value"] == hashlib.sha512(data).hexdigest()
    assert snapshot["stores"] == "dtn"
    # The snapshot is a golden image of its own: clone it.
    child = node.instance()
    compute.qemu_io(node.spawn_root_disk(child, snapshot_id).path,
                    "read -P 0x77 3M 5M", *reads_of(written)[1:])
    for done in (instance, child):
        assert node.driver.delete_instance_files(done)


def test_an_image_in_another_store_takes_novas_usual_download(
        node, glance, tmp_path):
    path = str(tmp_path / "local.qcow2")
    written = compute.make_golden(path, "qcow2", size_mib=16)
    image_id = glance.create_image("local", disk_format="qcow2")
    assert glance.upload(image_id, path, store="local") == 204
    disk = node.spawn_root_disk(node.instance(), image_id)
    backing = compute.qemu_img_info(disk.path)["full-backing-filename"]
    assert os.path.dirname(backing) == node.base_dir()
    compute.qemu_io(disk.path, *reads_of(written))


def clone_on_host(spec):
    return subprocess.Popen(
        [sys.executable, "-m", "tests.lab.compute"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True), json.dumps(spec)


def test_concurrent_clones_on_one_host_and_on_two_hosts(
        lab, glance, golden_image, mounts, tmp_path):
    image_id, written = golden_image
    images = os.path.join(lab.export, "images")
    held_before = set(golden.holders(images, image_id))
    second = lab.add_leaf("compute-2-proxy", cache={"capacity_mb": 256})
    hosts = {
        "compute-1": node_options(lab, mounts("host-1-mounts")),
        "compute-2": node_options(lab, mounts("host-2-mounts"), second),
    }
    running = []
    for host, options in hosts.items():
        process, spec = clone_on_host({
            "instances_path": str(tmp_path / host), "host": host,
            "glance_url": glance.url, "auth_token": glance.token(),
            "gvfs": options, "image_id": image_id, "count": 4, "root_gb": 1,
            "reads": reads_of(written)})
        running.append((host, process, spec))
    for _, process, spec in running:
        process.stdin.write(spec)
        process.stdin.close()
    clones = []
    for host, process, _ in running:
        out = process.stdout.read()
        assert process.wait(timeout=300) == 0, process.stderr.read()
        results = json.loads(out)
        assert len(results) == 4
        mount_base = hosts[host]["mount_point_base"]
        for result in results:
            assert result["backing"].startswith(mount_base + "/")
            assert result["backing"].endswith("/images/" + image_id)
            clones.append(golden.holder_name(result["uuid"], "disk", host))
            mounted = os.path.dirname(result["backing"])
    assert set(golden.holders(images, image_id)) - held_before == \
        set(clones)
    with pytest.raises(urllib.error.HTTPError) as refused:
        glance._request("/v2/images/%s" % image_id, "DELETE").close()
    assert refused.value.code == 409
    # Released through a mount, as the hosts would: a change made on the
    # export behind NFS-Ganesha's back leaves its cache stale.
    for name in clones:
        golden.release(mounted, image_id, name)
