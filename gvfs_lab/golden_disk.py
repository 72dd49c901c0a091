# SPDX-License-Identifier: Apache-2.0
"""The golden disk's file system: real files, generated data, holes.

What a golden image of realistic shape holds, for the lab's test guest
(:mod:`gvfs_lab.guest`): a real tree (the kernel release's own module
tree, busybox, the kernel) and generated files from a seed --
incompressible blobs of mixed sizes, compressible logs, a sparse file --
as ext4 over the first part of a sparse raw disk, its free space and
holes left as zeros, the rest of the disk (the guest's scratch region)
zero too.
"""

import errno
import os
import random
import shutil

MIB = 1024 * 1024
#: Fixed file times of the generated files (2023-11-14).
EPOCH = 1700000000


def populate(tree, spec, kernel, busybox):
    """The golden file system's tree: real files, data, holes.

    The release's module tree (hard links where possible: ``mkfs.ext4
    -d`` only reads them), busybox, the kernel, and
    ``data_mib`` of generated files from ``spec.seed``: incompressible
    blobs of mixed sizes, compressible logs, and a sparse file whose
    holes stay holes.
    """
    link_tree(kernel.modules_dir,
              os.path.join(tree, "lib", "modules", kernel.release))
    os.makedirs(os.path.join(tree, "bin"))
    shutil.copy2(busybox, os.path.join(tree, "bin", "busybox"))
    os.makedirs(os.path.join(tree, "boot"))
    shutil.copyfile(kernel.vmlinuz, os.path.join(
        tree, "boot", "vmlinuz-" + kernel.release))
    data = os.path.join(tree, "srv", "data")
    os.makedirs(data)
    rng = random.Random(spec.seed)
    budget = spec.data_mib * MIB
    _blobs(os.path.join(data, "blobs"), rng, budget // 2)
    _logs(os.path.join(data, "logs"), rng, budget // 4)
    _sparse(os.path.join(data, "sparse.img"), rng, budget // 4)
    for top, dirs, files in os.walk(data):
        for name in dirs + files:
            os.utime(os.path.join(top, name), (EPOCH, EPOCH))


def link_tree(src, dst):
    """A copy of ``src`` at ``dst``, hard links where the disk allows."""
    def link_or_copy(s, d):
        try:
            os.link(s, d)
        except OSError as e:
            if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                raise
            shutil.copy2(s, d)
    shutil.copytree(src, dst, symlinks=True, copy_function=link_or_copy)


def _blobs(path, rng, total):
    os.makedirs(path)
    number = 0
    while total > 0:
        size = min(total, rng.choice((64, 256, 1024, 4096)) * 1024 +
                   rng.randrange(4096))
        with open(os.path.join(path, "blob-%04d.bin" % number), "wb") as f:
            f.write(rng.randbytes(size))
        total -= size
        number += 1


def _logs(path, rng, total):
    os.makedirs(path)
    words = [rng.randbytes(rng.randrange(2, 6)).hex() for _ in range(500)]
    for number in range(8):
        lines, size = [], 0
        while size < total // 8:
            line = "%010d %s\n" % (rng.randrange(10 ** 10), " ".join(
                rng.choices(words, k=rng.randrange(4, 14))))
            lines.append(line)
            size += len(line)
        with open(os.path.join(path, "service-%d.log" % number), "w") as f:
            f.writelines(lines)


def _sparse(path, rng, data_bytes):
    """A 16x larger file of 1 MiB data islands between holes."""
    islands = max(1, data_bytes // MIB)
    with open(path, "wb") as f:
        for i in range(islands):
            f.seek(i * 16 * MIB)
            f.write(rng.randbytes(MIB))
        f.truncate(islands * 16 * MIB)


def make_filesystem(raw, tree, spec, run):
    """``tree`` as ext4 over the first ``fs_bytes`` of a sparse raw disk.

    ``run(argv, package)`` runs ``mkfs.ext4``.
    """
    with open(raw, "wb") as f:
        f.truncate(spec.disk_mib * MIB)
    uuid = "%08x-0000-4000-8000-%012x" % (spec.seed, spec.disk_mib)
    run(["mkfs.ext4", "-q", "-F", "-b", "4096", "-L", "gvfs-golden",
         "-U", uuid, "-E", "root_owner=0:0", "-d", tree, raw,
         str(spec.fs_bytes // 4096)], "e2fsprogs")
