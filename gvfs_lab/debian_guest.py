# SPDX-License-Identifier: Apache-2.0
"""The lab's realistic guest: a Debian root file system, read as a boot does.

Beside the worst-case guest (:mod:`gvfs_lab.guest`: one O_DIRECT 64 KiB
read at a time, scattered) this one boots as a Debian server reads its
disk: its golden image is an ext4 root file system unpacked from the
package archive (:mod:`gvfs_lab.debian_root`) with the kernel's module
tree, and its init (:file:`debian_init.sh`) mounts it read-only and has
several readers at once read, buffered and with the kernel's read-ahead,
the files a boot reads, then prints the same marker as the other guest.

The digest it must print is computed on the host from the same files.
Built at lab setup in some tens of seconds (the download is the
package set's ~50 MB), and kept in the lab cache under a key of every
input, the packages' versions included.
"""

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time

from gvfs_lab import debian_root
from gvfs_lab import golden_disk
from gvfs_lab import guest

MIB = 1024 * 1024
HERE = os.path.dirname(os.path.abspath(__file__))
INIT_SCRIPT = os.path.join(HERE, "debian_init.sh")
BUILDER_SOURCES = (INIT_SCRIPT, guest.INIT_LIBRARY) + tuple(
    os.path.join(HERE, name) for name in (
        "debian_guest.py", "debian_root.py", "guest.py", "golden_disk.py",
        "initramfs.py"))
#: Bump when the cache's layout changes (sources are hashed anyway).
LAYOUT = 1


@dataclasses.dataclass(frozen=True)
class Spec:
    """Sizes of the Debian guest; all of it goes into its cache key."""

    disk_mib: int = 1024
    #: Past the file system, where the guest writes.
    scratch_mib: int = 16
    write_mib: int = 4
    #: Readers at once at boot, as systemd starts services in parallel.
    readers: int = 4
    #: The initramfs loads these to mount the root file system.
    modules: tuple = ("virtio_pci", "virtio_blk", "crc32c_generic", "ext4")
    packages: tuple = debian_root.BOOT_PACKAGES
    #: Only its UUID (see :func:`golden_disk.make_filesystem`).
    seed: int = 20

    def __post_init__(self):
        if not 1 <= self.write_mib <= self.scratch_mib:
            raise guest.GuestBuildError(
                "write_mib must be in [1, scratch_mib]")
        if self.readers < 1:
            raise guest.GuestBuildError("readers must be at least 1")
        if self.disk_mib - self.scratch_mib < 512:
            raise guest.GuestBuildError(
                "disk_mib %d leaves no room for a root file system and "
                "the module tree" % self.disk_mib)

    @property
    def fs_bytes(self):
        return (self.disk_mib - self.scratch_mib) * MIB


@dataclasses.dataclass(frozen=True)
class Golden(guest.Built):
    """A built (cached) Debian guest; paths are inside its cache entry."""

    directory: str
    kernel_release: str
    disk_bytes: int
    #: Per reader, the files it reads at boot (paths in the root).
    boot_files: tuple
    boot_bytes: int
    expected_digest: str
    scratch_offset: int
    write_bytes: int
    qcow2_sha256: str
    build_seconds: float
    packages: tuple
    cmdline: str = guest.CMDLINE

    @classmethod
    def load(cls, directory):
        with open(os.path.join(directory, guest.MANIFEST)) as f:
            fields = json.load(f)
        fields["boot_files"] = tuple(tuple(run)
                                     for run in fields["boot_files"])
        fields["packages"] = tuple(tuple(p) for p in fields["packages"])
        return cls(directory=directory, **fields)


def default_cache_dir():
    """The lab cache's ``debian-guest`` directory."""
    return guest.cache.directory("debian-guest")


def digest(read_file, runs):
    """What the guest prints: sha256 of its readers' ``sha256sum`` lines.

    Reader N hashes the bytes of ``runs[N]``'s files, concatenated in
    order; busybox prints ``<hex>  -``; the digest is of those lines in
    reader order.  ``read_file(path)`` returns a file's bytes.
    """
    lines = []
    for paths in runs:
        hasher = hashlib.sha256()
        for path in paths:
            hasher.update(read_file(path))
        lines.append("%s  -\n" % hasher.hexdigest())
    return hashlib.sha256("".join(lines).encode()).hexdigest()


def golden(cache_dir=None, spec=None, kernel=None, busybox="/bin/busybox"):
    """The Debian guest for ``spec``, built unless cached.

    Resolving the package set asks apt each time (a second or two): a
    new version in the archive makes a new image.
    """
    spec = spec or Spec()
    kernel = kernel or guest.find_kernel()
    packages = debian_root.closure(spec.packages)
    pinned = debian_root.versions(packages)
    key = dict(guest.inputs(spec, kernel, busybox, LAYOUT, BUILDER_SOURCES),
               packages=pinned)
    return Golden.load(guest.cached(
        cache_dir or default_cache_dir(), key,
        lambda work: _build(work, spec, kernel, busybox, packages, pinned)))


def _build(work, spec, kernel, busybox, packages, pinned):
    start = time.monotonic()
    shutil.copyfile(kernel.vmlinuz, os.path.join(work, "vmlinuz"))
    with tempfile.TemporaryDirectory(dir=work) as scratch:
        debs = debian_root.download(packages, os.path.join(scratch, "debs"))
        tree = os.path.join(scratch, "tree")
        debian_root.unpack(debs, tree)
        modules_in_tree = os.path.join("lib", "modules", kernel.release)
        golden_disk.link_tree(kernel.modules_dir,
                              os.path.join(tree, modules_in_tree))
        os.makedirs(os.path.join(tree, "boot"), exist_ok=True)
        shutil.copyfile(kernel.vmlinuz, os.path.join(
            tree, "boot", "vmlinuz-" + kernel.release))
        loaded = guest.module_order(kernel, guest.present_modules(
            kernel, debian_root.VM_MODULES))
        paths = debian_root.boot_files(
            tree, [os.path.join(modules_in_tree, p) for p in loaded])
        sizes = {p: os.path.getsize(os.path.join(tree, p)) for p in paths}
        runs = debian_root.split(paths, sizes, spec.readers)

        def read_file(path):
            with open(os.path.join(tree, path), "rb") as f:
                return f.read()

        expected = digest(read_file, runs)
        golden_disk.make_filesystem(os.path.join(work, "disk.raw"), tree,
                                    spec, guest.run)
    order = guest.module_order(kernel, spec.modules)
    files = {"etc/gvfs-guest.conf": guest.guest_conf(
        spec, order, READERS=spec.readers)}
    for number, run in enumerate(runs):
        files["etc/boot-files.%d" % number] = "".join(
            path + "\n" for path in run).encode()
    with open(os.path.join(work, "initrd.img"), "wb") as f:
        f.write(guest.initramfs_of(kernel, order, busybox, INIT_SCRIPT,
                                   files))
    guest.finish(work, spec, kernel, start, boot_files=runs,
                 boot_bytes=sum(sizes.values()), expected_digest=expected,
                 packages=pinned)


def main():
    """``python -m gvfs_lab.debian_guest``: build or find it, say where."""
    guest.report(
        golden,
        boot_files=lambda image: sum(len(run) for run in image.boot_files),
        boot_mib=lambda image: round(image.boot_bytes / MIB, 1),
        packages=lambda image: len(image.packages))


if __name__ == "__main__":
    main()
