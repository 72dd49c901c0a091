# SPDX-License-Identifier: Apache-2.0
"""The lab's test guest: a golden image built from Debian packages.

What an instance of the GVFS paper's clone experiment needs, made at lab
setup from what ``linux-image-amd64`` and ``busybox-static`` installed
(no download):

* the kernel (``/boot/vmlinuz-RELEASE``) and an initramfs holding static
  busybox, the modules that show a virtio disk (``virtio_pci``,
  ``virtio_blk`` and what ``modules.dep`` says they need, unless built
  in), the boot set and :file:`guest_init.sh` as ``/init`` -- Glance
  ``aki``/``ari`` images for Nova;
* the golden disk, 1 GiB: an ext4 file system holding a real tree (the
  release's own module tree, busybox, the kernel, generated data files,
  one sparse file) over the first 1008 MiB with its free space and holes
  left as zeros, then a 16 MiB scratch region the guest writes -- raw
  and qcow2;
* the boot set: as many blocks as 5% of the file system's, drawn from
  those holding data (a boot reads files; the initramfs carries the
  list, so the disk cannot hold the initramfs);
* the digest the guest must print: the boot set read on the host from
  the raw disk.

Building takes seconds (5 to 8 here); the result is kept in a cache directory
under a key derived from every input (builder sources, kernel and
busybox bytes, sizes, seed), so a second lab setup only checks a
manifest.  Concurrent builders take a lock; a build lands under its key
by one rename, so a crash leaves no half entry behind.
"""

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time

from gvfs_lab import bootset
from gvfs_lab import cache
from gvfs_lab import golden_disk
from gvfs_lab import initramfs

MIB = 1024 * 1024
#: Bump when the cache's layout changes (sources are hashed anyway).
LAYOUT = 1
MANIFEST = "manifest.json"
HERE = os.path.dirname(os.path.abspath(__file__))
INIT_SCRIPT = os.path.join(HERE, "guest_init.sh")
#: What both guests' init scripts source (as ``lib/gvfs-guest.sh``).
INIT_LIBRARY = os.path.join(HERE, "guest_lib.sh")
BUILDER_SOURCES = (INIT_SCRIPT, INIT_LIBRARY) + tuple(
    os.path.join(HERE, name) for name in ("guest.py", "golden_disk.py",
                                          "initramfs.py", "bootset.py"))
#: Kernel command line of the lab's own domains (Nova's comes from the
#: image's ``os_command_line`` property).
CMDLINE = "console=ttyS0 quiet no_timer_check"
#: A build removes entries not used for this long, and all but the
#: ``KEEP`` last used (each is about 1 GiB on disk).
STALE_SECONDS = 14 * 86400
KEEP = 3


class GuestBuildError(Exception):
    """The test guest cannot be built here (missing package, bad spec)."""


@dataclasses.dataclass(frozen=True)
class Spec:
    """Sizes and seed of a golden image; all of it goes into its key."""

    disk_mib: int = 1024
    #: Past the file system, where the guest writes.
    scratch_mib: int = 16
    write_mib: int = 4
    #: Of the file system's blocks, this many (holding data) read at boot.
    fraction: float = 0.05
    seed: int = 20
    #: Generated files besides the copied trees (random, text, sparse).
    data_mib: int = 96
    modules: tuple = ("virtio_pci", "virtio_blk")

    def __post_init__(self):
        fs_mib = self.disk_mib - self.scratch_mib
        if not 1 <= self.write_mib <= self.scratch_mib:
            raise GuestBuildError("write_mib must be in [1, scratch_mib]")
        if fs_mib < 64 or self.data_mib * 4 > fs_mib:
            raise GuestBuildError(
                "disk_mib %d leaves %d MiB for a file system: want at "
                "least 64 and 4 x data_mib" % (self.disk_mib, fs_mib))

    @property
    def fs_bytes(self):
        return (self.disk_mib - self.scratch_mib) * MIB


def guest_conf(spec, order, **more):
    """``/etc/gvfs-guest.conf``: what :file:`guest_lib.sh` reads.

    ``order`` are the paths of the modules the init loads, in order.
    """
    values = {"MODULES": '"%s"' % " ".join(initramfs.file_name(path)
                                           for path in order),
              "DISK_BYTES": spec.disk_mib * MIB,
              "SCRATCH_BLOCK": spec.fs_bytes // bootset.BLOCK,
              "WRITE_BLOCKS": spec.write_mib * MIB // bootset.BLOCK}
    values.update(more)
    return "".join("%s=%s\n" % item for item in values.items()).encode()


#: The functional tests' guest: the same disk, 1% of its blocks read at
#: boot.  What they check (the guest read the right bytes through every
#: path Nova takes) needs no 806 serial reads a boot, each some 16 ms of
#: a TCG guest's I/O: that was 13 s of each of their 15 boots.  The
#: boot benchmark keeps ``Spec()``, the worst case the targets are for.
FUNCTIONAL = Spec(fraction=0.01)


@dataclasses.dataclass(frozen=True)
class Kernel:
    release: str
    vmlinuz: str
    modules_dir: str


class Built:
    """The files of a built guest's cache entry (``directory``)."""

    #: The guest's marker line (see :mod:`gvfs_lab.bootset`).
    marker = bootset.MARKER

    kernel = property(lambda self: os.path.join(self.directory, "vmlinuz"))
    initrd = property(lambda self: os.path.join(self.directory,
                                                "initrd.img"))
    raw = property(lambda self: os.path.join(self.directory, "disk.raw"))
    qcow2 = property(lambda self: os.path.join(self.directory,
                                               "disk.qcow2"))

    def unchanged(self):
        """True if the qcow2 golden image still has its built bytes."""
        return sha256_file(self.qcow2) == self.qcow2_sha256


@dataclasses.dataclass(frozen=True)
class Golden(Built):
    """A built (cached) test guest; paths are inside its cache entry."""

    directory: str
    kernel_release: str
    disk_bytes: int
    boot_set: tuple
    expected_digest: str
    scratch_offset: int
    write_bytes: int
    qcow2_sha256: str
    build_seconds: float
    cmdline: str = CMDLINE

    @classmethod
    def load(cls, directory):
        with open(os.path.join(directory, MANIFEST)) as f:
            fields = json.load(f)
        fields["boot_set"] = tuple(fields["boot_set"])
        return cls(directory=directory, **fields)

    def digest_with(self, replaced):
        """The digest the guest prints if blocks ``replaced`` differ.

        ``replaced`` maps a block number to the bytes a test put there
        (in an overlay); the others are read from the raw golden image.
        """
        with open(self.raw, "rb") as f:
            read = bootset.file_reader(f)
            return bootset.digest(
                lambda n: replaced[n] if n in replaced else read(n),
                self.boot_set)

    @property
    def boot_bytes(self):
        """What the guest reads at boot."""
        return len(self.boot_set) * bootset.BLOCK


def default_cache_dir():
    """The lab cache's ``guest`` directory (see :mod:`gvfs_lab.cache`)."""
    return cache.directory("guest")


def _version_key(release):
    return [int(p) if p.isdigit() else p
            for p in re.split(r"(\d+)", release)]


def find_kernel(boot="/boot", modules="/lib/modules", release=None):
    """The newest packaged kernel with both its image and module tree.

    ``release`` picks one (``uname -r`` style).  Debian's
    ``linux-image-amd64`` installs into a container too: the image in
    /boot, the modules in /lib/modules/RELEASE.
    """
    found = []
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(boot):
            if not name.startswith("vmlinuz-"):
                continue
            rel = name[len("vmlinuz-"):]
            tree = os.path.join(modules, rel)
            if os.path.isfile(os.path.join(tree, "modules.dep")) and \
                    release in (None, rel):
                found.append(Kernel(rel, os.path.join(boot, name), tree))
    if not found:
        raise GuestBuildError(
            "no kernel %sin %s with modules in %s: install "
            "linux-image-amd64 (tools/install-deps.sh)"
            % (release + " " if release else "", boot, modules))
    return max(found, key=lambda k: _version_key(k.release))


def sha256_file(path):
    """sha256 (hex) of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(8 * MIB):
            digest.update(chunk)
    return digest.hexdigest()


def _read(path):
    with open(path) as f:
        return f.read()


def inputs(spec, kernel, busybox, layout=LAYOUT, sources=BUILDER_SOURCES):
    """Everything a golden image is made from, as JSON values.

    ``layout`` and ``sources`` are its builder's (another guest's too).
    """
    return {
        "layout": layout,
        "builder": [sha256_file(p) for p in sources],
        "spec": dataclasses.asdict(spec),
        **kernel_inputs(kernel, busybox),
    }


def kernel_inputs(kernel, busybox):
    """The kernel's and busybox's part of a guest's inputs."""
    for path, package in ((busybox, "busybox-static"),
                          (kernel.vmlinuz, "linux-image-amd64")):
        if not os.path.isfile(path):
            raise GuestBuildError("%s is missing: install %s"
                                  % (path, package))
    tree = kernel.modules_dir
    return {
        "kernel": kernel.release,
        "vmlinuz": sha256_file(kernel.vmlinuz),
        "modules": [sha256_file(os.path.join(tree, name)) for name in
                    ("modules.dep", "modules.builtin")
                    if os.path.exists(os.path.join(tree, name))],
        "busybox": sha256_file(busybox),
    }


def golden(cache_dir=None, spec=None, kernel=None, busybox="/bin/busybox"):
    """The test guest for ``spec`` (default sizes), built unless cached.

    ``kernel`` defaults to :func:`find_kernel`; ``busybox`` must be a
    static binary (``busybox-static``).
    """
    spec = spec or Spec()
    kernel = kernel or find_kernel()
    return Golden.load(cached(
        cache_dir or default_cache_dir(), inputs(spec, kernel, busybox),
        lambda work: _build(work, spec, kernel, busybox)))


def cached(root, key_inputs, build):
    """The cache entry of ``key_inputs`` under ``root``, built unless there.

    ``build(work)`` fills an empty directory and writes its
    :data:`MANIFEST` last; the directory becomes the entry by one rename.
    """
    os.makedirs(root, exist_ok=True)
    entry = os.path.join(root, bootset.cache_key(key_inputs))
    with _locked(root):
        if not os.path.exists(os.path.join(entry, MANIFEST)):
            _prune(root)
            _build_into(entry, build)
        os.utime(os.path.join(entry, MANIFEST))
    return entry


@contextlib.contextmanager
def _locked(root):
    with open(os.path.join(root, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _prune(root):
    """Drop half builds, entries unused for long, and all but a few."""
    now = time.time()
    entries = []
    for name in os.listdir(root):
        path = os.path.join(root, name)
        if not os.path.isdir(path):
            continue
        manifest = os.path.join(path, MANIFEST)
        if name.startswith(".build-") or not os.path.exists(manifest) or \
                now - os.stat(manifest).st_mtime > STALE_SECONDS:
            _remove_tree(path)
        else:
            entries.append((os.stat(manifest).st_mtime, path))
    # Room for the entry about to be built.
    for _, path in sorted(entries, reverse=True)[KEEP - 1:]:
        _remove_tree(path)


def _remove_tree(path):
    # Entries are read-only: make them writable to remove them.
    for top, dirs, _ in os.walk(path):
        for d in dirs:
            os.chmod(os.path.join(top, d), 0o755)
    os.chmod(path, 0o755)
    shutil.rmtree(path)


def _build_into(entry, build):
    work = tempfile.mkdtemp(prefix=".build-", dir=os.path.dirname(entry))
    try:
        build(work)
        os.rename(work, entry)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _build(work, spec, kernel, busybox):
    start = time.monotonic()
    shutil.copyfile(kernel.vmlinuz, os.path.join(work, "vmlinuz"))
    tree = os.path.join(work, "tree")
    golden_disk.populate(tree, spec, kernel, busybox)
    raw = os.path.join(work, "disk.raw")
    golden_disk.make_filesystem(raw, tree, spec, run)
    shutil.rmtree(tree)
    region = spec.fs_bytes // bootset.BLOCK
    with open(raw, "rb") as f:
        blocks = bootset.choose(bootset.data_blocks(f, region),
                                max(1, round(region * spec.fraction)),
                                spec.seed)
        expected = bootset.digest(bootset.file_reader(f), blocks)
    with open(os.path.join(work, "initrd.img"), "wb") as f:
        f.write(make_initramfs(kernel, spec, blocks, busybox))
    finish(work, spec, kernel, start, boot_set=list(blocks),
           expected_digest=expected)


def finish(work, spec, kernel, start, **fields):
    """The qcow2 of ``work``'s raw disk, read-only files, the manifest.

    The manifest holds what every guest has and ``fields``; it is
    written last, as what makes ``work`` a complete entry.
    """
    raw = os.path.join(work, "disk.raw")
    qcow2 = os.path.join(work, "disk.qcow2")
    run(["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", raw,
         qcow2], "qemu-utils")
    run(["qemu-img", "compare", "-q", "-f", "raw", "-F", "qcow2", raw,
         qcow2], "qemu-utils")
    for name in os.listdir(work):
        os.chmod(os.path.join(work, name), 0o444)
    os.chmod(work, 0o755)  # Readable by whoever uploads or boots it.
    manifest = {
        "kernel_release": kernel.release,
        "disk_bytes": spec.disk_mib * MIB,
        "scratch_offset": spec.fs_bytes,
        "write_bytes": spec.write_mib * MIB,
        "qcow2_sha256": sha256_file(qcow2),
        "build_seconds": round(time.monotonic() - start, 2),
        **fields,
    }
    with open(os.path.join(work, MANIFEST), "w") as f:
        json.dump(manifest, f, indent=1)


def run(argv, package):
    """Run a build tool; a clear error naming its package if it fails."""
    try:
        subprocess.run(argv, check=True, capture_output=True, text=True)
    except FileNotFoundError as e:
        raise GuestBuildError("%s not found: install %s"
                              % (argv[0], package)) from e
    except subprocess.CalledProcessError as e:
        raise GuestBuildError("%s failed: %s" % (
            " ".join(argv[:3]), e.stderr.strip()[-2000:])) from e


def make_initramfs(kernel, spec, blocks, busybox):
    """The initramfs (newc cpio bytes) of the guest.

    busybox, ``/init``, the modules to load (flat, in load order), the
    boot set (one block number per line) and the sizes the init reads.
    """
    order = module_order(kernel, spec.modules)
    return initramfs_of(kernel, order, busybox, INIT_SCRIPT, {
        "etc/gvfs-guest.conf": guest_conf(spec, order),
        "etc/boot-set": "".join("%d\n" % b for b in blocks).encode()})


def _module_indexes(kernel):
    """``modules.dep`` and ``modules.builtin`` of ``kernel`` (text)."""
    builtin = os.path.join(kernel.modules_dir, "modules.builtin")
    return (_read(os.path.join(kernel.modules_dir, "modules.dep")),
            _read(builtin) if os.path.exists(builtin) else "")


def module_order(kernel, wanted):
    """Paths (in ``kernel``'s tree) of ``wanted`` and their dependencies.

    In load order; built-in ones are left out.
    """
    return initramfs.load_order(wanted, *_module_indexes(kernel))


def present_modules(kernel, names):
    """Those of module ``names`` ``kernel`` has (a module or built in)."""
    known = initramfs.known_names(*_module_indexes(kernel))
    return [name for name in names if name in known]


def initramfs_of(kernel, order, busybox, init_script, files):
    """A guest's initramfs: busybox, ``init_script`` as ``/init``.

    With :data:`INIT_LIBRARY`, the modules of ``order`` flat under
    ``lib/modules`` and ``files`` (archive path to bytes).
    """
    tree = kernel.modules_dir
    archive = initramfs.Archive()
    for name in ("bin", "dev", "etc", "lib", "lib/modules", "proc", "sys",
                 "tmp"):
        archive.directory(name)
    archive.char_device("dev/console", 5, 1)
    with open(busybox, "rb") as f:
        archive.file("bin/busybox", f.read(), executable=True)
    archive.symlink("bin/sh", "busybox")
    with open(init_script, "rb") as f:
        archive.file("init", f.read(), executable=True)
    with open(INIT_LIBRARY, "rb") as f:
        archive.file("lib/gvfs-guest.sh", f.read())
    for path in order:
        archive.file("lib/modules/" + initramfs.file_name(path),
                     initramfs.read_module(os.path.join(tree, path)))
    for name, data in files.items():
        archive.file(name, data)
    return archive.tobytes()


def report(build, **more):
    """Build or find a guest with ``build()``; print where, and ``more``.

    What ``python -m gvfs_lab.guest`` (and ``.debian_guest``) print.
    """
    start = time.monotonic()
    image = build()
    print(json.dumps({
        "directory": image.directory, "kernel": image.kernel,
        "initrd": image.initrd, "qcow2": image.qcow2, "raw": image.raw,
        "cmdline": image.cmdline, "expected_digest": image.expected_digest,
        **{name: value(image) for name, value in more.items()},
        "build_seconds": image.build_seconds,
        "seconds_now": round(time.monotonic() - start, 2)}, indent=1))


def main():
    """``python -m gvfs_lab.guest``: build or find the guest, say where."""
    report(golden, boot_blocks=lambda image: len(image.boot_set))


if __name__ == "__main__":
    main()
