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
compute host's GVFS mount.  One boot: TCG is CPU-heavy.
"""

import hashlib
import json
import os
import subprocess
import time

import pytest

from tests.lab import bootset
from tests.lab import compute
from tests.lab import guest
from tests.lab import guestvm
from tests.lab import libvirt
from tests.lab import nova as nova_lab
from tests.lab import postgres
from tests.lab import process
from tests.lab import rabbitmq

USER = "alpha-member"
FLAVOR = "lab.tiny"
MARKER_TIMEOUT = 240.0


def _mount_namespaces_work():
    return subprocess.run(["unshare", "--mount", "true"],
                          capture_output=True).returncode == 0


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp", cache={"capacity_mb": 512,
                                     "consistency": "immutable"})


@pytest.fixture(scope="module")
def golden():
    return guest.golden()


@pytest.fixture(scope="module")
def cloud(lab, glance, keystone, tmp_path_factory):
    """Nova and what it needs, started for this module; stopped by PID."""
    if not _mount_namespaces_work():
        pytest.skip("this kernel or container refuses mount namespaces "
                    "(unshare --mount): the lab's libvirtd cannot run")
    if not postgres.available():
        raise process.LabError("PostgreSQL is missing: run "
                               "tools/install-deps.sh")
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
        nova = nova_lab.Nova(
            str(work / "nova"), keystone, glance, broker, db, hv, {
                "mount_type": "fuse",
                "proxy": "127.0.0.1:%d" % lab.client_proxy.port,
                "export": lab.export, "image_dir": "images",
                "glance_stores": ["dtn"], "io_timeout": 20.0})
        parts.append(nova)
        print("\nNova up in %.1f s" % (time.monotonic() - started))
        yield nova
    finally:
        for part in reversed(parts):
            part.stop()


def _cli(cloud, *args, user=USER, timeout=600):
    """``openstack ARGS -f json`` as ``user``; the parsed output."""
    result = cloud.openstack(*args, "-f", "json", user=user,
                             timeout=timeout)
    assert result.returncode == 0, "openstack %s: %s" % (
        " ".join(args[:2]), result.stderr[-3000:])
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def images(cloud, golden):
    """The guest's kernel, initramfs and disk, uploaded by a member."""
    kernel = _cli(cloud, "image", "create", "--disk-format", "aki",
                  "--container-format", "aki", "--file", golden.kernel,
                  "lab-guest-kernel")
    ramdisk = _cli(cloud, "image", "create", "--disk-format", "ari",
                   "--container-format", "ari", "--file", golden.initrd,
                   "lab-guest-initrd")
    disk = _cli(cloud, "image", "create", "--disk-format", "qcow2",
                "--container-format", "bare", "--file", golden.qcow2,
                "--property", "kernel_id=%s" % kernel["id"],
                "--property", "ramdisk_id=%s" % ramdisk["id"],
                "lab-guest")
    _cli(cloud, "flavor", "create", "--ram", "256", "--disk", "1",
         "--vcpus", "1", "--public", FLAVOR, user="admin")
    return {"kernel": kernel["id"], "ramdisk": ramdisk["id"],
            "disk": disk["id"]}


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
        shown = cloud.openstack("console", "log", "show", created["id"])
        marker[0] = bootset.find_marker(shown.stdout)
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


def test_a_member_boots_a_server_from_the_gvfs_store(server, golden):
    assert server["status"] == "ACTIVE"
    assert server["marker"].digest == golden.expected_digest


def test_the_disk_is_an_overlay_on_the_golden_image_on_the_mount(
        server, cloud, images):
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


def _boot(cloud, name, image):
    """A server created and ACTIVE (``--wait``); its id."""
    created = _cli(cloud, "server", "create", "--image", image, "--flavor",
                   FLAVOR, "--nic", "none", "--wait", name, timeout=900)
    assert created["status"] == "ACTIVE", created
    return created["id"]


def _next_boot(cloud, server_id, seen):
    """The marker of a boot not in ``seen`` (``wrote`` digests), added.

    Each boot writes random data, so a marker with a new ``wrote`` is a
    new boot whether Nova kept the console log or started a new one.
    """
    found = []

    def booted():
        shown = cloud.openstack("console", "log", "show", server_id)
        found[:] = [m for m in bootset.find_markers(shown.stdout)
                    if m.wrote not in seen]
        return bool(found)

    process.wait_until(booted, "a new boot's marker in the console log",
                       MARKER_TIMEOUT, interval=2.0)
    seen.add(found[0].wrote)
    return found[0]


def _status(cloud, server_id):
    return _cli(cloud, "server", "show", server_id)["status"]


def _wait_status(cloud, server_id, status, timeout=300):
    process.wait_until(lambda: _status(cloud, server_id) == status,
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
def test_the_guest_boots_again_after(running, cloud, golden, images,
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


def test_a_direct_snapshot_lands_in_the_gvfs_store_and_boots(
        running, cloud, golden, lab):
    snapshot = _cli(cloud, "server", "image", "create", "--wait",
                    "--name", "lab-guest-snapshot", running["id"],
                    timeout=900)
    try:
        shown = _cli(cloud, "image", "show", snapshot["id"])
        assert shown["status"] == "active"
        assert os.path.exists(os.path.join(lab.export, "images",
                                           snapshot["id"]))
        server_id = _boot(cloud, "lab-guest-from-snapshot", snapshot["id"])
        try:
            marker = _next_boot(cloud, server_id, set())
            assert marker.digest == golden.expected_digest
        finally:
            cloud.openstack("server", "delete", "--wait", server_id)
    finally:
        cloud.openstack("image", "delete", snapshot["id"])
