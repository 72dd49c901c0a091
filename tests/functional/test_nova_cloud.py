# SPDX-License-Identifier: Apache-2.0
"""A real OpenStack around the plugins: servers booted by Nova.

Keystone, a glance-api whose default store ``dtn`` is the ``gvfs``
store on the DTN export, Placement, neutron's API, nova-api,
-conductor, -scheduler and the stock nova-compute with ``compute_driver
= gvfs.GvfsLibvirtDriver`` on the lab's libvirtd (QEMU with TCG).  A
project member uploads the test guest (kernel, initramfs, golden disk)
and boots it with the ``openstack`` CLI, as a user of a cloud does; the
guest prints the digest of its boot set on its serial console, which
must be the one the host computed from the golden image, read through
the instance's overlay whose backing file is the golden image on the
compute host's GVFS mount.  Only the test guest boots here (TCG is
CPU-heavy): the Debian guest's realistic reads of a root file system
over the same kind of mount are ``test_guest_boot.py``'s.
"""

import hashlib
import os
import subprocess
import time

import pytest

from gvfs_lab import bootset
from gvfs_lab import compute
from gvfs_lab import guest
from gvfs_lab import guestvm
from gvfs_lab import libvirt
from gvfs_lab import nova as nova_lab
from gvfs_lab import postgres
from gvfs_lab import process
from gvfs_lab import rabbitmq
from gvfs_openstack.images import golden as golden_refs

USER = "alpha-member"
FLAVOR = "lab.tiny"
#: The flavor a resize grows to: a 2 GB root disk.
FLAVOR_2 = "lab.small"
#: The second compute host's name (Nova's host, libvirtd's host name).
HOST_2 = "lab-compute-2"
#: The LAN proxy (the first host's) holds what every test here reads
#: through it: about 560 MB.  At 512 MiB it replaced about 300 blocks of
#: the boot set with later images' blocks (``cache_evictions``), since
#: the first host's page cache answers its own re-reads and the proxy's
#: least-recently-used order never sees them; the second host then
#: fetched up to 9.5 of its 14.5 MB from the DTN.
CACHE = {"capacity_mb": 2048, "consistency": "immutable"}
MARKER_TIMEOUT = 240.0


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp", cache=CACHE)


@pytest.fixture(scope="module")
def golden():
    return guest.golden(spec=guest.FUNCTIONAL)


@pytest.fixture(scope="module")
def cloud(nova_parts, lab, glance, keystone, tmp_path_factory):
    """Nova and what it needs, started for this module; stopped by PID."""
    work = tmp_path_factory.mktemp("nova-cloud")
    parts = []
    try:
        hv = libvirt.Libvirt(str(work / "libvirt"))
        parts.append(hv)
        db = postgres.PostgreSQL(str(work / "postgres"))
        parts.append(db)
        broker = rabbitmq.RabbitMQ(str(work / "rabbitmq"))
        parts.append(broker)
        started = time.monotonic()
        nova = nova_lab.Nova(str(work / "nova"), keystone, glance, broker,
                             db, hv, _gvfs(lab.client_proxy, lab))
        parts.append(nova)
        print("\nNova up in %.1f s" % (time.monotonic() - started))
        yield nova
    finally:
        for part in reversed(parts):
            part.stop()


def _gvfs(proxy, lab):
    """``[gvfs]`` of a compute host whose client proxy is ``proxy``."""
    return {"mount_type": "fuse", "proxy": "127.0.0.1:%d" % proxy.port,
            "export": lab.export, "image_dir": "images",
            "glance_stores": ["dtn"], "io_timeout": 20.0}


def _cli(cloud, *args, user=USER, timeout=600):
    return cloud.cli(*args, user=user, timeout=timeout)


@pytest.fixture(scope="module")
def images(cloud, golden):
    """The guest's kernel, initramfs and disk, uploaded by a member."""
    uploaded = cloud.upload_guest(golden, "lab-guest")
    for name, disk_gb in ((FLAVOR, "1"), (FLAVOR_2, "2")):
        _cli(cloud, "flavor", "create", "--ram", "256", "--disk", disk_gb,
             "--vcpus", "1", "--public", name, user="admin")
    return uploaded


@pytest.fixture(scope="module")
def server(cloud, images, golden):
    """One server booted from the golden disk; its facts, then deleted."""
    started = time.monotonic()
    created = _cli(cloud, "--os-compute-api-version", "2.37", "server",
                   "create", "--image", images["disk"], "--flavor", FLAVOR,
                   "--nic", "none", "--wait", "lab-guest-1", timeout=900)
    active = time.monotonic()
    marker = [None]

    def marked():
        marker[0] = bootset.find_marker(cloud.console_log(created["id"]))
        return marker[0] is not None

    process.wait_until(marked, "the guest's marker in its console log",
                       MARKER_TIMEOUT, interval=2.0)
    print("server create to ACTIVE %.1f s, to the marker %.1f s"
          % (active - started, time.monotonic() - started))
    disk = os.path.join(cloud.instances_path, created["id"], "disk")
    yield {"id": created["id"], "status": created["status"],
           "marker": marker[0], "disk": disk,
           "chain": guestvm.backing_chain(disk)}
    cloud.openstack("server", "delete", "--wait", created["id"])


def _references(cloud, server_id, disks=("disk",)):
    """The references ``disks`` of the server on the first host hold."""
    project = _cli(cloud, "server", "show", server_id,
                   user="admin")["project_id"]
    return sorted(golden_refs.holder_name(server_id, disk, nova_lab.HOST,
                                          project) for disk in disks)


def _mounts_under(base):
    """The mount points in ``base`` (a compute host's mount base)."""
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return []
    return [n for n in names if os.path.ismount(os.path.join(base, n))]


def test_nova_compute_mounts_the_export_as_it_starts(cloud):
    # Before any server: the first clone does not wait for the mount.
    assert _mounts_under(cloud.mount_base)


def test_a_member_boots_a_server_from_the_gvfs_store(server, golden):
    assert server["status"] == "ACTIVE"
    assert server["marker"].digest == golden.expected_digest


def _holders(lab, images):
    """The references the golden disk image has on the export."""
    return golden_refs.holders(os.path.join(lab.export, "images"),
                               images["disk"])


def test_the_disk_is_an_overlay_on_the_golden_image_on_the_mount(
        server, cloud, images, lab):
    top, backing = server["chain"]
    assert top == server["disk"]
    info = compute.qemu_img_info(top)
    assert info["format"] == "qcow2"
    assert info["backing-filename-format"] == "qcow2"
    # The golden image itself, on the compute host's GVFS mount of the
    # export (MOUNT/images/IMAGE_ID), not a copy in Nova's _base.
    assert backing.startswith(cloud.mount_base + os.sep)
    assert os.path.basename(backing) == images["disk"]
    assert os.path.ismount(os.path.dirname(os.path.dirname(backing)))
    # Nova's image cache names a download by the image id's SHA-1.
    cached = hashlib.sha1(images["disk"].encode()).hexdigest()
    assert not os.path.exists(os.path.join(cloud.instances_path, "_base",
                                           cached))
    # The golden image on the export knows this disk holds it.
    assert _holders(lab, images) == _references(cloud, server["id"])


def test_deleting_the_server_leaves_the_golden_image(server, cloud, images,
                                                     lab):
    deleted = cloud.openstack("server", "delete", "--wait", server["id"])
    assert deleted.returncode == 0, deleted.stderr[-3000:]
    assert not os.path.exists(os.path.dirname(server["disk"]))
    listed = _cli(cloud, "server", "list")
    assert server["id"] not in [s["ID"] for s in listed]
    image = _cli(cloud, "image", "show", images["disk"])
    assert image["status"] == "active"
    assert os.path.exists(os.path.join(lab.export, "images",
                                       images["disk"]))
    assert _holders(lab, images) == []


def _boot(cloud, name, image):
    """A server created and ACTIVE (``--wait``); its id."""
    created = _cli(cloud, "server", "create", "--image", image, "--flavor",
                   FLAVOR, "--nic", "none", "--wait", name, timeout=900)
    assert created["status"] == "ACTIVE", created
    return created["id"]


def _next_boot(cloud, server_id, seen, user=USER):
    """The marker of a boot not in ``seen`` (``wrote`` digests), added.

    Each boot writes random data, so a marker with a new ``wrote`` is a
    new boot whether Nova kept the console log or started a new one.
    """
    found = []

    def booted():
        found[:] = [m for m in bootset.find_markers(cloud.console_log(
            server_id, user)) if m.wrote not in seen]
        return bool(found)

    process.wait_until(booted, "a new boot's marker in the console log",
                       MARKER_TIMEOUT, interval=2.0)
    seen.add(found[0].wrote)
    return found[0]


def _status(cloud, server_id, user=USER):
    return cloud.server(server_id, user)["status"]


def _wait_status(cloud, server_id, status, timeout=300, user=USER):
    process.wait_until(lambda: _status(cloud, server_id, user) == status,
                       "server %s %s" % (server_id, status), timeout,
                       interval=2.0)


@pytest.fixture(scope="module")
def running(cloud, images):
    """A second server, booted, for the lifecycle operations."""
    server_id = _boot(cloud, "lab-guest-2", images["disk"])
    seen = set()
    _next_boot(cloud, server_id, seen)
    yield {"id": server_id, "seen": seen}
    cloud.openstack("server", "delete", "--wait", server_id)


def test_a_golden_image_in_use_is_not_deleted(running, cloud, images,
                                              lab):
    refused = cloud.openstack("image", "delete", images["disk"])
    assert refused.returncode != 0
    assert "in use" in refused.stderr or "409" in refused.stderr, \
        refused.stderr
    assert _cli(cloud, "image", "show", images["disk"])["status"] == \
        "active"
    assert os.path.exists(os.path.join(lab.export, "images",
                                       images["disk"]))


@pytest.mark.parametrize("action,then", [
    ((("server", "stop"), ("server", "start")), "ACTIVE"),
    ((("server", "reboot", "--hard", "--wait"),), "ACTIVE"),
    ((("server", "rebuild", "--wait"),), "ACTIVE"),
    ((("server", "rescue"),), "RESCUE"),
    ((("server", "unrescue"),), "ACTIVE"),
])
def test_the_guest_boots_again_after(running, cloud, golden, images, lab,
                                     action, then):
    server_id = running["id"]
    for step in action:
        args = list(step) + [server_id]
        if step[:2] == ("server", "rebuild"):
            args[2:2] = ["--image", images["disk"]]
        done = cloud.openstack(*args, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        if step == ("server", "stop"):
            _wait_status(cloud, server_id, "SHUTOFF")
    _wait_status(cloud, server_id, then)
    marker = _next_boot(cloud, server_id, running["seen"])
    # Rescue boots the rescue disk made from the same golden image.
    assert marker.digest == golden.expected_digest
    # The rescue disk holds the golden image until unrescue.
    disks = ["disk", "disk.rescue"] if then == "RESCUE" else ["disk"]
    assert sorted(_holders(lab, images)) == \
        _references(cloud, server_id, disks)


def test_a_direct_snapshot_lands_in_the_gvfs_store_and_boots(
        running, cloud, golden, lab):
    snapshot = _cli(cloud, "server", "image", "create", "--wait",
                    "--name", "lab-guest-snapshot", running["id"],
                    timeout=900)
    try:
        # As the Images API gives it (the CLI folds stores and hashes into
        # its properties).
        shown = cloud.glance.image(snapshot["id"], user=USER)
        assert shown["status"] == "active"
        assert shown["stores"] == "dtn"
        # Registered by location: Glance hashed the file the driver wrote
        # on the export.
        digest = hashlib.sha512()
        with open(os.path.join(lab.export, "images", snapshot["id"]),
                  "rb") as f:
            while chunk := f.read(8 << 20):
                digest.update(chunk)
        assert shown["os_hash_value"] == digest.hexdigest()
        server_id = _boot(cloud, "lab-guest-from-snapshot", snapshot["id"])
        try:
            marker = _next_boot(cloud, server_id, set())
            assert marker.digest == golden.expected_digest
        finally:
            cloud.openstack("server", "delete", "--wait", server_id)
    finally:
        cloud.openstack("image", "delete", snapshot["id"])


def _disk_of(node_instances, server_id):
    disk = os.path.join(node_instances, server_id, "disk")
    return disk, guestvm.backing_chain(disk)[-1]


def test_a_resize_grows_the_overlay_over_the_same_golden_image(
        running, cloud, golden, images, lab):
    server_id = running["id"]
    done = cloud.openstack("server", "resize", "--flavor", FLAVOR_2,
                           server_id, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    _wait_status(cloud, server_id, "VERIFY_RESIZE", timeout=600)
    done = cloud.openstack("server", "resize", "confirm", server_id)
    assert done.returncode == 0, done.stderr[-3000:]
    _wait_status(cloud, server_id, "ACTIVE")
    assert _next_boot(cloud, server_id, running["seen"]).digest == \
        golden.expected_digest
    disk, backing = _disk_of(cloud.instances_path, server_id)
    info = compute.qemu_img_info(disk)
    assert info["virtual-size"] == 2 * 1024 ** 3
    assert backing.startswith(cloud.mount_base + os.sep)
    assert os.path.basename(backing) == images["disk"]
    assert _holders(lab, images) == _references(cloud, server_id)


def test_an_image_in_another_store_takes_novas_usual_download(
        cloud, images, golden):
    """Only images in ``[gvfs] glance_stores`` are cloned on the mount."""
    # The CLI has no way to name a store for an upload (its --store is
    # Image v1's): the Images API's X-Image-Meta-Store header does.
    local = {"id": cloud.glance.create_image(
        "lab-guest-local", disk_format="qcow2",
        kernel_id=images["kernel"], ramdisk_id=images["ramdisk"],
        user=USER)}
    try:
        assert cloud.glance.upload(local["id"], golden.qcow2,
                                   store="local") == 204
        assert cloud.glance.image(local["id"], user=USER)["stores"] == \
            "local"
        server_id = _boot(cloud, "lab-guest-local", local["id"])
        try:
            marker = _next_boot(cloud, server_id, set())
            assert marker.digest == golden.expected_digest
            _, backing = _disk_of(cloud.instances_path, server_id)
            # Downloaded into Nova's image cache, named by the id's SHA-1.
            assert backing == os.path.join(
                cloud.instances_path, "_base",
                hashlib.sha1(local["id"].encode()).hexdigest())
        finally:
            cloud.openstack("server", "delete", "--wait", server_id)
    finally:
        cloud.openstack("image", "delete", local["id"])


def _boot_on(cloud, host, name, image, count=1):
    """``count`` servers made at once on ``host`` (an admin's choice).

    Their ids, once each is ACTIVE and its guest printed its marker; and
    the markers.
    """
    args = ["--os-compute-api-version", "2.74", "server", "create",
            "--image", image, "--flavor", FLAVOR, "--nic", "none",
            "--host", host, name]
    if count > 1:
        args[-1:-1] = ["--min", str(count), "--max", str(count)]
    _cli(cloud, *args, user="admin", timeout=900)
    listed = _cli(cloud, "server", "list", "--name", "^%s" % name,
                  user="admin")
    ids = [s["ID"] for s in listed]
    assert len(ids) == count, listed
    for server_id in ids:
        process.wait_until(
            lambda: _status(cloud, server_id, "admin") != "BUILD",
            "server %s built" % server_id, 600, interval=2.0)
        shown = _cli(cloud, "server", "show", server_id, user="admin")
        assert shown["status"] == "ACTIVE", shown.get("fault")
    return ids, [_next_boot(cloud, server_id, set(), user="admin")
                 for server_id in ids]


def _host_of(cloud, server_id):
    return cloud.server(server_id, "admin")["OS-EXT-SRV-ATTR:host"]


def test_two_servers_at_once_from_one_golden_image_on_one_host(
        server, cloud, images, golden):
    ids, markers = _boot_on(cloud, nova_lab.HOST, "lab-pair",
                            images["disk"], count=2)
    try:
        assert [m.digest for m in markers] == [golden.expected_digest] * 2
        backings = set()
        for server_id in ids:
            assert _host_of(cloud, server_id) == nova_lab.HOST
            _, backing = _disk_of(cloud.instances_path, server_id)
            assert backing.startswith(cloud.mount_base + os.sep)
            backings.add(backing)
        # Two overlays, one golden image under both.
        assert len(backings) == 1
    finally:
        cloud.openstack("server", "delete", "--wait", *ids, user="admin")


@pytest.fixture(scope="module")
def second_host(server, cloud, lab, tmp_path_factory):
    """A second compute host whose LAN cache is the first host's proxy.

    Its own libvirtd (host name :data:`HOST_2`), nova-compute, client
    proxy with an empty cache whose next hop is the first host's client
    proxy, and its own GVFS mount.  It starts after ``server`` booted on
    the first host, so the LAN cache holds the boot set.
    """
    hv = libvirt.Libvirt(str(tmp_path_factory.mktemp("libvirt-2")),
                         hostname=HOST_2)
    try:
        assert hv.virsh("hostname").stdout.strip() == HOST_2
        leaf = lab.add_leaf(HOST_2, cache=CACHE)
        node = cloud.add_compute(HOST_2, hv, _gvfs(leaf, lab))
        try:
            yield {"node": node, "proxy": leaf}
        finally:
            cloud.remove_compute(node)
    finally:
        hv.stop()


def test_a_second_host_boots_the_golden_image_from_its_lan_cache(
        second_host, cloud, images, golden, lab):
    node, leaf = second_host["node"], second_host["proxy"]
    boot_bytes = len(golden.boot_set) * bootset.BLOCK
    lan_before = lab.client_proxy.stats()["cache_bytes_fetched"]
    # Mounted as its nova-compute started, before its first clone.
    assert _mounts_under(node.mount_base)
    ids, markers = _boot_on(cloud, HOST_2, "lab-second-host",
                            images["disk"])
    try:
        assert markers[0].digest == golden.expected_digest
        assert _host_of(cloud, ids[0]) == HOST_2
        _, backing = _disk_of(node.instances_path, ids[0])
        assert backing.startswith(node.mount_base + os.sep)
        assert os.path.basename(backing) == images["disk"]
        # The second host fetched its boot set through its own proxy (as
        # the guest read it, or ahead of it: its profile, its stream)...
        stats = leaf.stats()
        leaf_fetched = stats["cache_bytes_fetched"] + \
            stats["stream_raw_bytes"] + stats.get("prefetch_bytes", 0)
        lan_fetched = lab.client_proxy.stats()["cache_bytes_fetched"] - \
            lan_before
        print("second host: %d bytes fetched from its LAN proxy, which "
              "fetched %d from the DTN (boot set %d)"
              % (leaf_fetched, lan_fetched, boot_bytes))
        for name, proxy in (("leaf", leaf), ("lan", lab.client_proxy)):
            print(name, {k: v for k, v in proxy.stats().items()
                         if k.startswith(("cache_", "stream", "prefetch"))})
        assert leaf_fetched >= boot_bytes // 2
        # ...and most of it came from the LAN proxy's cache, not the DTN.
        assert lan_fetched < boot_bytes // 2
    finally:
        cloud.openstack("server", "delete", "--wait", ids[0], user="admin")


#: The compute API version of ``server migrate --host``.
MIGRATE_TO_HOST = "2.56"


@pytest.fixture(scope="module")
def mover(second_host, cloud, golden, images):
    """A server on the first host, of a golden image of its own.

    Its own image, so that who holds it is this server's disks alone:
    its deletion is refused while either host holds it, and allowed
    once the server is gone.  ``last``: its guest's latest marker.
    """
    image = _cli(cloud, "image", "create", "--disk-format", "qcow2",
                 "--container-format", "bare", "--file", golden.qcow2,
                 "--property", "kernel_id=%s" % images["kernel"],
                 "--property", "ramdisk_id=%s" % images["ramdisk"],
                 "lab-mover")["id"]
    ids, markers = _boot_on(cloud, nova_lab.HOST, "lab-mover", image)
    state = {"id": ids[0], "image": image, "last": markers[0],
             "seen": {markers[0].wrote}}
    yield state
    cloud.openstack("server", "delete", "--wait", ids[0], user="admin")
    cloud.openstack("image", "delete", image)


def _holding(lab, mover):
    """``(host, disk)`` of each reference the mover's image has."""
    return sorted(golden_refs.parse_holder(name)[::2][:2] for name in
                  golden_refs.holders(os.path.join(lab.export, "images"),
                                      mover["image"]))


def _admin(cloud, *args, timeout=900):
    done = cloud.openstack(*args, user="admin", timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]


def _migrate_to(cloud, mover, host):
    """Cold-migrate the mover to ``host``; wait for VERIFY_RESIZE."""
    _admin(cloud, "--os-compute-api-version", MIGRATE_TO_HOST, "server",
           "migrate", "--host", host, mover["id"])
    _wait_status(cloud, mover["id"], "VERIFY_RESIZE", timeout=600,
                 user="admin")
    assert _host_of(cloud, mover["id"]) == host


def _booted(cloud, mover, golden):
    """The mover's guest booted again, from its golden image."""
    mover["last"] = _next_boot(cloud, mover["id"], mover["seen"],
                               user="admin")
    assert mover["last"].digest == golden.expected_digest


def _image_deletion_refused(cloud, mover):
    refused = cloud.openstack("image", "delete", mover["image"])
    assert refused.returncode != 0
    assert "in use" in refused.stderr or "409" in refused.stderr, \
        refused.stderr


def _scratch_digest(disk, golden, work):
    """SHA-256 of the region the guest writes at each boot, in ``disk``."""
    out = os.path.join(work, "scratch.raw")
    # The region, as a raw image over the overlay (QEMU's raw driver
    # takes an offset and a size).
    done = subprocess.run(
        ["qemu-img", "convert", "--image-opts",
         "driver=raw,offset=%d,size=%d,file.driver=qcow2,"
         "file.file.filename=%s" % (
             golden.scratch_offset, golden.write_bytes, disk),
         "-O", "raw", out], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    with open(out, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_a_cold_migration_to_the_other_host_reverted(
        mover, second_host, cloud, golden, lab):
    node = second_host["node"]
    assert _holding(lab, mover) == [(nova_lab.HOST, "disk")]
    _migrate_to(cloud, mover, HOST_2)
    _booted(cloud, mover, golden)
    # The overlay moved; on the second host it backs onto the golden
    # image on that host's own mount, which it holds (the first host
    # keeps its reference until the move is confirmed).
    disk, backing = _disk_of(node.instances_path, mover["id"])
    assert backing.startswith(node.mount_base + os.sep)
    assert os.path.basename(backing) == mover["image"]
    assert _holding(lab, mover) == [(nova_lab.HOST, "disk"),
                                    (HOST_2, "disk")]
    _image_deletion_refused(cloud, mover)
    _admin(cloud, "server", "resize", "revert", mover["id"])
    _wait_status(cloud, mover["id"], "ACTIVE", timeout=600, user="admin")
    assert _host_of(cloud, mover["id"]) == nova_lab.HOST
    _booted(cloud, mover, golden)
    _, backing = _disk_of(cloud.instances_path, mover["id"])
    assert backing.startswith(cloud.mount_base + os.sep)
    assert not os.path.exists(os.path.join(node.instances_path,
                                           mover["id"]))
    assert _holding(lab, mover) == [(nova_lab.HOST, "disk")]


def test_a_stopped_guest_cold_migrated_and_confirmed_keeps_its_data(
        mover, second_host, cloud, golden, lab, tmp_path):
    node = second_host["node"]
    _admin(cloud, "server", "stop", mover["id"])
    _wait_status(cloud, mover["id"], "SHUTOFF", user="admin")
    _migrate_to(cloud, mover, HOST_2)
    # Powered off on the second host: what the guest last wrote on the
    # first host is on the disk that moved.
    disk, backing = _disk_of(node.instances_path, mover["id"])
    assert backing.startswith(node.mount_base + os.sep)
    assert _scratch_digest(disk, golden, str(tmp_path)) == \
        mover["last"].wrote
    assert _holding(lab, mover) == [(nova_lab.HOST, "disk"),
                                    (HOST_2, "disk")]
    _admin(cloud, "server", "resize", "confirm", mover["id"])
    _wait_status(cloud, mover["id"], "SHUTOFF", user="admin")
    source = os.path.join(cloud.instances_path, mover["id"])
    assert not os.path.exists(source)
    assert not os.path.exists(source + "_resize")
    # Only the second host holds the image now, and that is enough.
    assert _holding(lab, mover) == [(HOST_2, "disk")]
    _image_deletion_refused(cloud, mover)
    _admin(cloud, "server", "start", mover["id"])
    _wait_status(cloud, mover["id"], "ACTIVE", user="admin")
    _booted(cloud, mover, golden)
    _admin(cloud, "server", "delete", "--wait", mover["id"])
    assert _holding(lab, mover) == []
    deleted = cloud.openstack("image", "delete", mover["image"])
    assert deleted.returncode == 0, deleted.stderr[-3000:]
