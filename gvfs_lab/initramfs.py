# SPDX-License-Identifier: Apache-2.0
"""A tiny initramfs: the kernel modules a guest needs, and a newc archive.

Two jobs, both without root: work out which modules of a kernel release
must be loaded (and in what order) to see a disk, from its
``modules.dep`` and ``modules.builtin``; and write the ``newc`` cpio
archive the kernel unpacks as its first root file system.  Writing the
archive here rather than with ``cpio -o`` lets it hold ``/dev/console``
(a device node only root could create on disk) and makes it
byte-for-byte reproducible: every entry owned by root, dated at the
epoch.
"""

import gzip
import lzma
import os
import stat


class ModuleError(Exception):
    """A module the guest needs is not in the kernel release's tree."""


def _name(path):
    """Module name of a ``modules.dep`` path (``-`` and ``_`` are one)."""
    base = os.path.basename(path)
    for suffix in (".ko", ".ko.xz", ".ko.gz", ".ko.zst"):
        if base.endswith(suffix):
            base = base[:-len(suffix)]
            break
    return base.replace("-", "_")


def parse_modules_dep(text):
    """``{name: (path, [dependency paths])}`` from ``modules.dep``."""
    modules = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        path, sep, deps = line.partition(":")
        if not sep:
            raise ModuleError("modules.dep line %d has no colon: %r"
                              % (number, line))
        modules[_name(path)] = (path.strip(), deps.split())
    return modules


def _builtin_names(modules_builtin):
    return {_name(line) for line in modules_builtin.split() if line}


def known_names(modules_dep, modules_builtin=""):
    """Names of every module the kernel has, loadable or built in."""
    return set(parse_modules_dep(modules_dep)) | \
        _builtin_names(modules_builtin)


def file_name(path):
    """The flat file name a module of ``path`` gets in an initramfs.

    ``.ko``, whatever the tree's compression: :func:`read_module`
    decompresses it.
    """
    return os.path.basename(path).split(".ko")[0] + ".ko"


def load_order(wanted, modules_dep, modules_builtin=""):
    """Paths of the modules to insert, dependencies first.

    ``wanted`` are module names (e.g. ``virtio_blk``); those built into
    the kernel (listed in ``modules_builtin``) need nothing, and neither
    do their built-in dependencies.  ``modules.dep`` lists a module's
    dependencies so that the last one is loaded first (as ``modprobe``
    does); each module appears once.
    """
    builtin = _builtin_names(modules_builtin)
    modules = parse_modules_dep(modules_dep)
    path_names = {path: name for name, (path, _) in modules.items()}
    order = []

    def add(name, chain):
        if name in builtin or name in order:
            return
        if name in chain:
            raise ModuleError("dependency loop: %s" % " -> ".join(
                chain + (name,)))
        if name not in modules:
            raise ModuleError("module %s is neither in modules.dep nor "
                              "built in" % name)
        path, deps = modules[name]
        for dep in reversed(deps):
            add(path_names.get(dep, _name(dep)), chain + (name,))
        order.append(name)

    for name in wanted:
        add(name.replace("-", "_"), ())
    return [modules[name][0] for name in order]


def read_module(path):
    """A module file's bytes, decompressed if it is ``.xz`` or ``.gz``.

    busybox ``insmod`` hands the bytes to the kernel as they are.
    """
    if path.endswith(".ko"):
        opener = open
    elif path.endswith(".ko.xz"):
        opener = lzma.open
    elif path.endswith(".ko.gz"):
        opener = gzip.open
    else:
        raise ModuleError("cannot unpack module %s (only .ko, .ko.xz and "
                          ".ko.gz)" % path)
    with opener(path, "rb") as f:
        return f.read()


class Archive:
    """A ``newc`` (SVR4, no CRC) cpio archive built in memory."""

    def __init__(self):
        self._entries = []
        self._names = set()

    def _add(self, name, mode, data=b"", rdev=(0, 0)):
        name = name.strip("/")
        if not name or name in self._names:
            raise ValueError("bad or repeated archive path %r" % name)
        self._names.add(name)
        self._entries.append((name, mode, data, rdev))

    def directory(self, name):
        self._add(name, stat.S_IFDIR | 0o755)

    def file(self, name, data, executable=False):
        self._add(name, stat.S_IFREG | (0o755 if executable else 0o644),
                  data)

    def symlink(self, name, target):
        self._add(name, stat.S_IFLNK | 0o777, target.encode())

    def char_device(self, name, major, minor, mode=0o600):
        self._add(name, stat.S_IFCHR | mode, rdev=(major, minor))

    def tobytes(self):
        out = bytearray()
        entries = self._entries + [("TRAILER!!!", 0, b"", (0, 0))]
        for ino, (name, mode, data, (major, minor)) in enumerate(entries, 1):
            encoded = name.encode() + b"\0"
            nlink = 2 if stat.S_ISDIR(mode) else 1
            fields = (ino, mode, 0, 0, nlink, 0, len(data), 0, 0, major,
                      minor, len(encoded), 0)
            out += b"070701" + b"".join(b"%08X" % f for f in fields)
            out += encoded
            out += b"\0" * (-len(out) % 4)
            out += data
            out += b"\0" * (-len(out) % 4)
        return bytes(out)
