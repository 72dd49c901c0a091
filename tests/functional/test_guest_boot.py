# SPDX-License-Identifier: Apache-2.0
"""The test guest boots for real: libvirtd, virtlogd and QEMU (TCG).

The golden image is built (or found in the cache) from Debian packages;
each guest's disk is a qcow2 overlay on it, as the ``gvfs`` Nova backend
makes them.  The guest must print the digest the host computed from the
golden image, a guest whose overlay hides one boot block must print the
digest of that block's new bytes, its writes must land in its overlay
and never in the golden image -- and the same guest must boot with its
backing file on the lab's GVFS FUSE mount.  The Debian guest boots from
that mount too: its buffered readers at once, with the kernel's
read-ahead, are the realistic read pattern of a root file system, and
the mount is where a compute host's boots read (Nova's path to the
same overlay is proven by the test guest in ``test_nova_cloud.py``).
"""

import hashlib
import os
import shutil
import subprocess
import time

import pytest

from gvfs_lab import bootset
from gvfs_lab import debian_guest
from gvfs_lab import guest
from gvfs_lab import guestvm
from gvfs_lab import libvirt
from gvfs_lab import topology

BLOCK = bootset.BLOCK
#: Bytes the corrupted guest's overlay puts over one boot block.
PATTERN = 0xAB
MARKER_TIMEOUT = 90.0
#: What Nova's libvirt driver gives a guest booted from aki/ari images
#: with ``virt_type = qemu`` when the image sets no ``os_command_line``.
NOVA_CMDLINE = ("root=/dev/vda console=tty0 console=ttyS0 console=hvc0 "
                "no_timer_check")


@pytest.fixture(scope="module")
def golden():
    start = time.monotonic()
    image = guest.golden(spec=guest.FUNCTIONAL)
    print("\ngolden image %s: %.1f s here, %.1f s when built"
          % (image.directory, time.monotonic() - start, image.build_seconds))
    return image


@pytest.fixture(scope="module")
def debian():
    start = time.monotonic()
    image = debian_guest.golden()
    print("\nDebian guest %s: %.1f s here, %.1f s when built"
          % (image.directory, time.monotonic() - start, image.build_seconds))
    return image


@pytest.fixture(scope="module")
def hypervisor(tmp_path_factory):
    if not libvirt.mount_namespaces_work():
        pytest.skip("this kernel or container refuses mount namespaces "
                    "(unshare --mount): the lab's libvirtd cannot run")
    with libvirt.Libvirt(str(tmp_path_factory.mktemp("libvirt"))) as hv:
        yield hv


def _corrupt_block(golden):
    """A boot block from the middle of the boot set."""
    return golden.boot_set[len(golden.boot_set) // 2]


def _boot(hv, golden, workdir, names_and_disks, **options):
    """Start every domain, then wait for each marker; destroys them.

    ``options[name]`` are the domain XML options of domain ``name``.
    """
    domains = []
    try:
        for name, disk in names_and_disks:
            domains.append(guestvm.Domain(hv, workdir, name, golden, disk,
                                          **options.get(name, {})))
        results = {}
        for domain in domains:
            marker = domain.wait_for_marker(MARKER_TIMEOUT)
            results[domain.name] = (marker, domain.marked - domain.started,
                                    domain.cpu_seconds())
            print("%s: marker after %.1f s (guest uptime %.1f s), QEMU CPU "
                  "%.1f s" % (domain.name, results[domain.name][1],
                              marker.uptime, results[domain.name][2]))
        return results
    finally:
        for domain in domains:
            domain.destroy()


@pytest.fixture(scope="module")
def boots(hypervisor, golden, tmp_path_factory):
    """Guests booted at once, each on an overlay of the golden image.

    ``clean``; ``corrupted``, whose overlay hides one boot block; and
    ``nova``, with the kernel command line Nova gives it and the 128 MiB
    of a small flavor.
    """
    work = str(tmp_path_factory.mktemp("guests"))
    disks = [(name, guestvm.make_overlay(golden.qcow2, "qcow2", os.path.join(
        work, name + ".qcow2"))) for name in ("clean", "corrupted", "nova")]
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P %d %d %d" % (
        PATTERN, _corrupt_block(golden) * BLOCK, BLOCK), disks[1][1]],
        check=True, capture_output=True)
    markers = _boot(hypervisor, golden, work, disks, nova={
        "cmdline": NOVA_CMDLINE, "memory_mib": 128})
    return {name: (markers[name][0], disk) for name, disk in disks}


def test_guest_prints_the_digest_of_its_boot_set(boots, golden):
    marker, _ = boots["clean"]
    assert marker.digest == golden.expected_digest
    assert 0 < marker.uptime < MARKER_TIMEOUT


def test_guest_boots_with_novas_kernel_command_line(boots, golden):
    # Its last console= is hvc0, which the guest lacks: the marker still
    # reaches the serial port, Nova's console.log.
    marker, _ = boots["nova"]
    assert marker.digest == golden.expected_digest


def test_a_corrupted_boot_block_changes_the_digest(boots, golden):
    marker, _ = boots["corrupted"]
    assert marker.digest != golden.expected_digest
    # Exactly the digest of the golden reads with that block replaced:
    # the guest read every block from its disk, this one from the overlay.
    assert marker.digest == golden.digest_with(
        {_corrupt_block(golden): bytes([PATTERN]) * BLOCK})


def test_guest_writes_land_in_its_overlay_not_the_golden_image(
        boots, golden):
    for marker, overlay in boots.values():
        assert guestvm.top_layer_covers(overlay, golden.scratch_offset,
                                        golden.write_bytes)
        written = guestvm.read_region(overlay, golden.scratch_offset,
                                      golden.write_bytes)
        assert hashlib.sha256(written).hexdigest() == marker.wrote
    assert len({marker.wrote for marker, _ in boots.values()}) == len(boots)
    assert guestvm.read_region(golden.qcow2, golden.scratch_offset,
                               golden.write_bytes) == \
        bytes(golden.write_bytes)
    assert golden.unchanged()


def _debian_overlay(debian, tmp_path):
    return guestvm.make_overlay(debian.qcow2, "qcow2",
                                str(tmp_path / "debian.qcow2"))


@pytest.fixture(scope="module")
def gvfs(hypervisor, tmp_path_factory):
    """The lab's export, FUSE-mounted where the lab's QEMU sees it.

    Mounted after libvirtd started, as a compute host's mounts are.
    """
    with topology.Lab(str(tmp_path_factory.mktemp("gvfs-lab")), cache={
            "capacity_mb": 1024, "consistency": "immutable"}) as lab:
        images = os.path.join(lab.export, "images")
        os.makedirs(images)
        os.chown(images, topology.FILE_UID, topology.FILE_GID)
        mount = lab.mount(os.path.join(hypervisor.mounts_dir, "gvfs"))
        yield lab, mount.mountpoint


def _overlay_on_the_mount(gvfs, image, name, tmp_path):
    """An overlay on ``image``'s golden disk, read through the mount.

    The golden disk is put on the export as ``images/name``.
    """
    lab, mountpoint = gvfs
    path = os.path.join(lab.export, "images", name)
    shutil.copyfile(image.qcow2, path)
    os.chown(path, topology.FILE_UID, topology.FILE_GID)
    backing = os.path.join(mountpoint, "images", name)
    return guestvm.make_overlay(backing, "qcow2",
                                str(tmp_path / (name + ".overlay")))


def _fetched(gvfs):
    return gvfs[0].client_proxy.stats()["upstream_bytes_in"]


def test_the_debian_guest_reads_its_root_file_system(
        hypervisor, gvfs, debian, tmp_path):
    """Buffered readers at once over a real root on the GVFS mount."""
    disk = _overlay_on_the_mount(gvfs, debian, "debian.qcow2", tmp_path)
    before = _fetched(gvfs)
    (marker, _, _), = _boot(hypervisor, debian, str(tmp_path),
                            [("debian", disk)], debian={
                                "cmdline": NOVA_CMDLINE}).values()
    assert marker.digest == debian.expected_digest
    # Its root came through the client proxy, not from a local file.
    assert _fetched(gvfs) > before
    assert guestvm.read_region(disk, debian.scratch_offset,
                               debian.write_bytes) != \
        bytes(debian.write_bytes)
    assert debian.unchanged()


def test_a_debian_guest_whose_library_changed_prints_another_digest(
        hypervisor, debian, tmp_path):
    """A library's bytes changed under the guest: another digest."""
    disk = _debian_overlay(debian, tmp_path)
    path = debian.boot_files[0][0]
    offset = _file_offset(debian.raw, path)
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P %d %d 4096"
                    % (PATTERN, offset), disk], check=True,
                   capture_output=True)
    (marker, _, _), = _boot(hypervisor, debian, str(tmp_path),
                            [("changed", disk)]).values()
    assert marker.digest != debian.expected_digest


def _file_offset(raw, path):
    """Byte offset in ``raw`` of the first block of ``path``'s data."""
    out = subprocess.run(["debugfs", "-R", "bmap /%s 0" % path, raw],
                         capture_output=True, text=True, check=True)
    return int(out.stdout.split()[0]) * 4096


def test_stop_destroys_domains_and_leaves_no_process(golden, tmp_path):
    if not libvirt.mount_namespaces_work():
        pytest.skip("mount namespaces refused: no lab libvirtd")
    hv = libvirt.Libvirt(str(tmp_path / "libvirt"))
    try:
        disk = guestvm.make_overlay(golden.qcow2, "qcow2",
                                    str(tmp_path / "disk.qcow2"))
        domain = guestvm.Domain(hv, str(tmp_path), "left-running", golden,
                                disk)
        assert domain.pid in hv.pids()
        # The serial log is written by virtlogd, as Nova's console.log is.
        fds = "/proc/%d/fd" % hv.virtlogd.pid
        assert domain.console_log in [os.readlink(os.path.join(fds, fd))
                                      for fd in os.listdir(fds)]
        # libvirt's state is in the lab, not in the machine's /run.
        assert os.path.exists(hv.path("/run/libvirt/qemu/left-running.pid"))
        assert hv.path("/run/libvirt").startswith(str(tmp_path))
        assert not os.path.exists("/run/libvirt/qemu/left-running.pid")
        daemons = [hv.libvirtd.pid, hv.virtlogd.pid, hv.holder.pid]
    finally:
        hv.stop()
    assert hv.pids() == []
    for pid in daemons + [domain.pid]:
        assert not os.path.exists("/proc/%d" % pid)
    assert not os.path.ismount(hv.mounts_dir)


def test_guest_boots_from_a_golden_image_on_the_gvfs_mount(
        hypervisor, gvfs, golden, tmp_path):
    """The backing file on a FUSE mount made after libvirtd started."""
    overlay = _overlay_on_the_mount(gvfs, golden, "golden.qcow2", tmp_path)
    before = _fetched(gvfs)
    marker, = [m for m, _, _ in _boot(hypervisor, golden, str(tmp_path),
                                      [("gvfs", overlay)]).values()]
    fetched = _fetched(gvfs) - before
    assert marker.digest == golden.expected_digest
    # The boot set came through the proxy (zero blocks may be answered
    # without a fetch, so not all of it).
    assert fetched > 0
    print("gvfs: %.1f MiB fetched through the client proxy for a %.1f MiB "
          "boot set" % (fetched / 2 ** 20,
                        len(golden.boot_set) * BLOCK / 2 ** 20))
