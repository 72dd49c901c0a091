# SPDX-License-Identifier: Apache-2.0
"""The test guest's pure parts: boot set, digest, marker, cache key,
module order and the initramfs archive (read back with the real
``cpio``)."""

import hashlib
import os
import re
import shutil
import subprocess

import pytest

from gvfs_lab import bootset
from gvfs_lab import guest
from gvfs_lab import initramfs

BLOCK = bootset.BLOCK

# Lines of Debian 6.1's modules.dep, in their order.
MODULES_DEP = """\
kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko \
kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio.ko: kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci_modern_dev.ko:
kernel/drivers/virtio/virtio_pci_legacy_dev.ko:
kernel/drivers/virtio/virtio_pci.ko: \
kernel/drivers/virtio/virtio_pci_legacy_dev.ko \
kernel/drivers/virtio/virtio_pci_modern_dev.ko \
kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko \
kernel/fs/jbd2/jbd2.ko
kernel/fs/mbcache.ko:
kernel/fs/jbd2/jbd2.ko:
"""


# --- boot set ---------------------------------------------------------------

def test_boot_set_is_scattered_and_reproducible():
    candidates = range(0, 16128, 2)
    blocks = bootset.choose(candidates, 806)
    assert len(blocks) == 806 == len(set(blocks))
    assert set(blocks) <= set(candidates)
    assert list(blocks) != sorted(blocks)
    # Spread over the whole region, not bunched at one end.
    assert min(blocks) < 16128 // 10 and max(blocks) > 16128 * 9 // 10
    assert bootset.choose(reversed(candidates), 806) == blocks
    assert bootset.choose(candidates, 806, seed=21) != blocks


def test_boot_set_may_take_every_candidate():
    assert sorted(bootset.choose([7, 3, 5], 3)) == [3, 5, 7]


@pytest.mark.parametrize("candidates,count", [
    (range(10), 0), (range(10), -1), (range(10), 2.5), (range(10), 11),
    ([], 1)])
def test_boot_set_bad_input_is_refused(candidates, count):
    with pytest.raises(ValueError):
        bootset.choose(candidates, count)


def test_data_blocks_skip_holes_and_written_zeros(tmp_path):
    path = tmp_path / "disk.raw"
    with open(path, "wb") as f:
        f.truncate(64 * BLOCK)
        for block, data in ((0, b"x"), (5, bytes(BLOCK)),  # Zeros.
                            (9, b"\0" * 100 + b"y"), (40, b"z" * BLOCK),
                            (63, b"w")):
            f.seek(block * BLOCK + (BLOCK - len(data) if block == 63
                                    else 0))
            f.write(data)
        # A data run across a block boundary, ending mid-block.
        f.seek(20 * BLOCK - 10)
        f.write(b"q" * 20)
    with open(path, "rb") as f:
        assert bootset.data_blocks(f, 64) == [0, 9, 19, 20, 40, 63]
        assert bootset.data_blocks(f, 40) == [0, 9, 19, 20]
        assert bootset.data_blocks(f, 0) == []


# --- digest -----------------------------------------------------------------

def _image(tmp_path, blocks=8):
    path = tmp_path / "disk.raw"
    path.write_bytes(b"".join(bytes([i]) * BLOCK for i in range(blocks)))
    return path


def test_digest_is_sha256_of_the_blocks_in_order(tmp_path):
    with open(_image(tmp_path), "rb") as f:
        got = bootset.digest(bootset.file_reader(f), [5, 1, 3])
    assert got == hashlib.sha256(
        b"\x05" * BLOCK + b"\x01" * BLOCK + b"\x03" * BLOCK).hexdigest()


def test_digest_changes_with_order_a_missing_or_a_corrupted_block(tmp_path):
    with open(_image(tmp_path), "rb") as f:
        read = bootset.file_reader(f)
        base = bootset.digest(read, [5, 1, 3])
        assert bootset.digest(read, [1, 5, 3]) != base
        assert bootset.digest(read, [5, 3]) != base

        def corrupt(n):
            data = read(n)
            return data[:100] + b"\xff" + data[101:] if n == 1 else data

        assert bootset.digest(corrupt, [5, 1, 3]) != base


def test_digest_refuses_a_short_read(tmp_path):
    with open(_image(tmp_path, blocks=2), "rb") as f:
        with pytest.raises(ValueError, match="block 2: read 0 bytes"):
            bootset.digest(bootset.file_reader(f), [0, 2])


# --- marker -----------------------------------------------------------------

DIGEST = "ab" * 32
WROTE = "cd" * 32


def test_marker_is_found_in_console_noise():
    console = ("[    0.000000] Linux version 6.1\r\nrandom: crng init\r\n"
               "GVFS-GUEST-READY uptime=7.91 io_start=2.50 digest=%s "
               "wrote=%s\r\n" % (DIGEST, WROTE))
    marker = bootset.find_marker(console)
    assert (marker.uptime, marker.io_start, marker.digest, marker.wrote) \
        == (7.91, 2.5, DIGEST, WROTE)


@pytest.mark.parametrize("console", [
    "", "booting...\r\n",
    # Cut mid-line, as a console log read while the guest writes.
    "GVFS-GUEST-READY uptime=7.91 io_start=2 digest=%s wrote=%s"
    % (DIGEST, WROTE[:10]),
    "GVFS-GUEST-READY uptime= io_start=2 digest=%s wrote=%s"
    % (DIGEST, WROTE),
    "GVFS-GUEST-READY uptime=7.91 digest=%s wrote=%s" % (DIGEST, WROTE)])
def test_no_marker_yet(console):
    assert bootset.find_marker(console) is None


def test_a_failure_line_raises_with_the_guest_reason():
    with pytest.raises(bootset.GuestFailed, match="^no /dev/vda after 30 s$"):
        bootset.find_marker("x\r\nGVFS-GUEST-FAILED no /dev/vda after 30 s"
                            "\r\n")


# --- cache key --------------------------------------------------------------

INPUTS = {"builder": ["a1"], "kernel": "6.1.0-56-amd64",
          "spec": {"disk_mib": 1024, "fraction": 0.05}}


def test_cache_key_ignores_order_and_sees_every_value():
    key = bootset.cache_key(INPUTS)
    assert key == bootset.cache_key(dict(reversed(list(INPUTS.items()))))
    assert len(key) == 24 and int(key, 16) >= 0
    for changed in ({"builder": ["a2"]}, {"kernel": "6.1.0-57-amd64"},
                    {"spec": {"disk_mib": 2048, "fraction": 0.05}},
                    {"extra": 1}):
        assert bootset.cache_key(dict(INPUTS, **changed)) != key


@pytest.mark.parametrize("bad", [{}, None, [1], {"kernel": object()}])
def test_cache_key_refuses_what_it_cannot_name(bad):
    with pytest.raises(ValueError):
        bootset.cache_key(bad)


def _kernel(tmp_path, release="6.1.0-56-amd64"):
    """A kernel release's files, as linux-image-amd64 lays them out."""
    boot = tmp_path / "boot"
    tree = tmp_path / "modules" / release
    boot.mkdir(exist_ok=True)
    (boot / ("vmlinuz-" + release)).write_bytes(b"kernel " + release.encode())
    for line in MODULES_DEP.replace("\\\n", "").splitlines():
        path = tree / line.split(":")[0]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"\x7fELF " + path.name.encode())
    (tree / "modules.dep").write_text(MODULES_DEP.replace("\\\n", ""))
    (tree / "modules.builtin").write_text("kernel/lib/crc16.ko\n")
    return guest.find_kernel(str(boot), str(tmp_path / "modules"), release)


def test_inputs_key_follows_the_spec_the_kernel_and_busybox(tmp_path):
    kernel = _kernel(tmp_path)
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"busybox 1")
    key = bootset.cache_key(guest.inputs(guest.Spec(), kernel, busybox))
    assert key == bootset.cache_key(guest.inputs(guest.Spec(), kernel,
                                                 busybox))
    assert bootset.cache_key(guest.inputs(guest.Spec(seed=3), kernel,
                                          busybox)) != key
    busybox.write_bytes(b"busybox 2")
    assert bootset.cache_key(guest.inputs(guest.Spec(), kernel,
                                          busybox)) != key


def test_inputs_say_which_package_is_missing(tmp_path):
    kernel = _kernel(tmp_path)
    with pytest.raises(guest.GuestBuildError, match="busybox-static"):
        guest.inputs(guest.Spec(), kernel, str(tmp_path / "nope"))


@pytest.mark.parametrize("fields", [
    {"disk_mib": 32}, {"write_mib": 0}, {"write_mib": 32},
    {"disk_mib": 256, "data_mib": 96}])
def test_spec_refuses_sizes_that_do_not_fit(fields):
    with pytest.raises(guest.GuestBuildError):
        guest.Spec(**fields)


def test_find_kernel_picks_the_newest_release_with_modules(tmp_path):
    _kernel(tmp_path, "6.1.0-9-amd64")
    _kernel(tmp_path, "6.1.0-56-amd64")
    (tmp_path / "boot" / "vmlinuz-6.2.0-1-amd64").write_bytes(b"no tree")
    found = guest.find_kernel(str(tmp_path / "boot"),
                              str(tmp_path / "modules"))
    assert found.release == "6.1.0-56-amd64"
    with pytest.raises(guest.GuestBuildError, match="linux-image-amd64"):
        guest.find_kernel(str(tmp_path / "nothing"),
                          str(tmp_path / "modules"))


# --- modules ----------------------------------------------------------------

def test_modules_load_dependencies_first_each_once():
    order = initramfs.load_order(["virtio_pci", "virtio_blk"],
                                 MODULES_DEP.replace("\\\n", ""))
    names = [os.path.basename(p) for p in order]
    assert names == ["virtio_ring.ko", "virtio.ko", "virtio_pci_modern_dev.ko",
                     "virtio_pci_legacy_dev.ko", "virtio_pci.ko",
                     "virtio_blk.ko"]


def test_built_in_modules_are_not_loaded():
    order = initramfs.load_order(["ext4", "virtio-blk"],
                                 MODULES_DEP.replace("\\\n", ""),
                                 "kernel/lib/crc16.ko\n"
                                 "kernel/drivers/virtio/virtio_ring.ko\n")
    names = [os.path.basename(p) for p in order]
    assert names == ["jbd2.ko", "mbcache.ko", "ext4.ko", "virtio.ko",
                     "virtio_blk.ko"]


def test_unknown_module_and_loop_are_errors():
    with pytest.raises(initramfs.ModuleError, match="nvme is neither"):
        initramfs.load_order(["nvme"], MODULES_DEP.replace("\\\n", ""))
    with pytest.raises(initramfs.ModuleError, match="loop: a -> b -> a"):
        initramfs.load_order(["a"], "a.ko: b.ko\nb.ko: a.ko\n")
    with pytest.raises(initramfs.ModuleError, match="no colon"):
        initramfs.parse_modules_dep("kernel/x.ko\n")


def test_compressed_modules_are_unpacked(tmp_path):
    import lzma
    path = tmp_path / "virtio.ko.xz"
    path.write_bytes(lzma.compress(b"\x7fELF module"))
    assert initramfs.read_module(str(path)) == b"\x7fELF module"
    with pytest.raises(initramfs.ModuleError, match="cannot unpack"):
        initramfs.read_module(str(tmp_path / "virtio.ko.zst"))


# --- the archive, read back by GNU cpio -------------------------------------

@pytest.fixture
def cpio():
    if shutil.which("cpio") is None:
        pytest.skip("GNU cpio (package cpio, bindep.txt) is not installed")
    return shutil.which("cpio")


def _cpio(cpio, archive, *args):
    return subprocess.run([cpio, "--quiet", "-i"] + list(args),
                          input=archive, capture_output=True,
                          check=True).stdout


def test_archive_is_newc_that_cpio_lists_and_extracts(cpio):
    archive = initramfs.Archive()
    archive.directory("bin")
    archive.directory("dev")
    archive.file("bin/busybox", b"\x7fELF" + bytes(range(256)) * 3,
                 executable=True)
    archive.symlink("bin/sh", "busybox")
    archive.char_device("dev/console", 5, 1)
    archive.file("init", b"#!/bin/sh\necho odd length\n", executable=True)
    data = archive.tobytes()
    listing = _cpio(cpio, data, "-tv").decode().splitlines()
    kinds = {line.split()[-1] if "->" not in line else
             line.split()[-3]: line[0] for line in listing}
    assert kinds == {"bin": "d", "dev": "d", "bin/busybox": "-",
                     "bin/sh": "l", "dev/console": "c", "init": "-"}
    console = [line for line in listing if line.endswith("dev/console")][0]
    assert "5,   1" in console or "5, 1" in console
    assert _cpio(cpio, data, "--to-stdout", "init") == \
        b"#!/bin/sh\necho odd length\n"
    assert _cpio(cpio, data, "--to-stdout", "bin/busybox") == \
        b"\x7fELF" + bytes(range(256)) * 3
    assert data == archive.tobytes()  # Reproducible.


def test_archive_refuses_repeated_or_empty_paths():
    archive = initramfs.Archive()
    archive.directory("etc")
    with pytest.raises(ValueError):
        archive.file("/etc/", b"")
    with pytest.raises(ValueError):
        archive.file("", b"")


def test_initramfs_holds_modules_boot_set_and_sizes(tmp_path, cpio):
    kernel = _kernel(tmp_path)
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"static busybox")
    spec = guest.Spec()
    blocks = bootset.choose(range(spec.fs_bytes // BLOCK), 806)
    data = guest.make_initramfs(kernel, spec, blocks, str(busybox))
    conf = _cpio(cpio, data, "--to-stdout", "etc/gvfs-guest.conf").decode()
    assert conf == (
        'MODULES="virtio_ring.ko virtio.ko virtio_pci_modern_dev.ko '
        'virtio_pci_legacy_dev.ko virtio_pci.ko virtio_blk.ko"\n'
        "DISK_BYTES=1073741824\nSCRATCH_BLOCK=16128\nWRITE_BLOCKS=64\n")
    listed = [int(b) for b in _cpio(cpio, data, "--to-stdout",
                                    "etc/boot-set").split()]
    assert tuple(listed) == blocks
    assert _cpio(cpio, data, "--to-stdout", "lib/modules/virtio_blk.ko") == \
        b"\x7fELF virtio_blk.ko"
    with open(guest.INIT_SCRIPT, "rb") as f:
        assert _cpio(cpio, data, "--to-stdout", "init") == f.read()


# --- building and the cache (small images, real mkfs.ext4 and qemu-img) ----

SMALL = guest.Spec(disk_mib=80, data_mib=4)


@pytest.fixture
def small_guest(tmp_path):
    for tool in ("mkfs.ext4", "qemu-img"):
        if shutil.which(tool) is None and not os.path.exists(
                "/sbin/" + tool):
            pytest.skip("%s (e2fsprogs, qemu-utils: bindep.txt) is not "
                        "installed" % tool)
    kernel = _kernel(tmp_path)
    busybox = tmp_path / "busybox"
    busybox.write_bytes(b"static busybox")
    cache = str(tmp_path / "cache")
    return lambda spec=SMALL: guest.golden(cache, spec, kernel,
                                           str(busybox))


def test_build_gives_an_image_whose_digest_the_host_can_check(small_guest,
                                                              tmp_path):
    image = small_guest()
    assert os.path.getsize(image.raw) == 80 * 2 ** 20
    assert image.scratch_offset == 64 * 2 ** 20
    assert len(image.boot_set) == round(1024 * 0.05)
    # Every boot block holds data: a boot reads files, not free space.
    with open(image.raw, "rb") as f:
        read = bootset.file_reader(f)
        assert all(read(n) != bytes(BLOCK) for n in image.boot_set)
    # The qcow2 holds the raw disk's bytes: read the boot set through it.
    subprocess.run(["qemu-img", "convert", "-f", "qcow2", "-O", "raw",
                    image.qcow2, str(tmp_path / "back.raw")], check=True)
    out = (tmp_path / "back.raw").read_bytes()
    assert bootset.digest(lambda n: out[n * BLOCK:(n + 1) * BLOCK],
                          image.boot_set) == image.expected_digest
    # A real ext4 file system with the tree, and zeros past it.
    info = subprocess.run(["dumpe2fs", "-h", image.raw], capture_output=True,
                          text=True, check=True).stdout
    assert "gvfs-golden" in info and "Block count:              16384" in info
    sparse = subprocess.run(["debugfs", "-R", "stat /srv/data/sparse.img",
                             image.raw], capture_output=True, text=True,
                            check=True).stdout
    size = int(re.search(r"Size: (\d+)", sparse).group(1))
    allocated = int(re.search(r"Blockcount: (\d+)", sparse).group(1)) * 512
    assert size == 16 * allocated  # Its holes stayed holes.
    modules = subprocess.run(["debugfs", "-R", "cat /lib/modules/"
                              "6.1.0-56-amd64/kernel/drivers/virtio/"
                              "virtio.ko", image.raw], capture_output=True,
                             check=True).stdout
    assert modules == b"\x7fELF virtio.ko"
    assert out[image.scratch_offset:] == bytes(16 * 2 ** 20)
    assert image.unchanged()
    assert image.digest_with({image.boot_set[0]: b"\xab" * BLOCK}) != \
        image.expected_digest


def test_a_cached_image_is_not_built_again(small_guest):
    first = small_guest()
    mtime = os.stat(first.qcow2).st_mtime_ns
    again = small_guest()
    assert again == first
    assert os.stat(again.qcow2).st_mtime_ns == mtime
    other = small_guest(guest.Spec(disk_mib=80, data_mib=4, seed=3))
    assert other.directory != first.directory
    assert other.boot_set != first.boot_set


def test_prune_keeps_the_last_used_entries(tmp_path):
    for number in range(5):
        entry = tmp_path / ("key%d" % number)
        entry.mkdir()
        (entry / "disk.raw").write_bytes(b"x")
        (entry / "disk.raw").chmod(0o444)
        (entry / guest.MANIFEST).write_text("{}")
        os.utime(entry / guest.MANIFEST, (1e9 + number, 1e9 + number))
    (tmp_path / ".build-crashed").mkdir()
    (tmp_path / "no-manifest").mkdir()
    (tmp_path / ".lock").write_text("")
    os.utime(tmp_path / "key4" / guest.MANIFEST)  # Used just now.
    guest.STALE_SECONDS, stale = 10 ** 10, guest.STALE_SECONDS
    try:
        guest._prune(str(tmp_path))
    finally:
        guest.STALE_SECONDS = stale
    assert sorted(os.listdir(tmp_path)) == [".lock", "key3", "key4"]
    guest._prune(str(tmp_path))  # key3 is years old.
    assert sorted(os.listdir(tmp_path)) == [".lock", "key4"]
