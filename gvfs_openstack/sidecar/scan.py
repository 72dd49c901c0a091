# SPDX-License-Identifier: Apache-2.0
"""Making sidecars: from a file on disk, or from bytes as they stream in.

:class:`SidecarBuilder` is fed a file's bytes in order (any chunk sizes)
and, for holes already known, lengths of zeros; it finds the all-zero
4 KiB grains and hashes the rest.  :func:`scan_file` drives it over a
file on disk, asking the file system for holes first (SEEK_DATA /
SEEK_HOLE) so a sparse image is not read where it has no data.  The
Glance driver uses the builder directly while an image uploads.
"""

import errno
import hashlib
import os

from gvfs_openstack.files import durable
from gvfs_openstack.sidecar import format as meta_format

READ_SIZE = 8 * 1024 * 1024
GRAIN = meta_format.ZERO_GRAIN
_ZERO_GRAIN = bytes(GRAIN)
_ZERO_READ = bytes(READ_SIZE)


class FileChanged(Exception):
    """The file changed while it was scanned; its sidecar would lie."""


class SidecarBuilder:
    def __init__(self):
        self.offset = 0
        self._hash = hashlib.sha256()
        self._zeros = []
        self._carry = b""

    def _zero_run(self, start, end):
        if self._zeros and self._zeros[-1][1] == start:
            self._zeros[-1][1] = end
        else:
            self._zeros.append([start, end])

    def update(self, data):
        """The next bytes of the file."""
        if self._carry:
            need = GRAIN - len(self._carry)
            self._carry += bytes(data[:need])
            data = memoryview(data)[need:]
            if len(self._carry) < GRAIN:
                return
            self._grains(self._carry)
            self._carry = b""
        whole = len(data) - len(data) % GRAIN
        if whole:
            self._grains(bytes(data[:whole]) if not isinstance(data, bytes)
                         else data[:whole])
        if whole < len(data):
            self._carry = bytes(data[whole:])

    def _grains(self, data):
        """Whole grains: zero runs are noted, the rest hashed."""
        start = self.offset
        zero = _ZERO_READ if len(data) == READ_SIZE else bytes(len(data))
        if data == zero:
            self._zero_run(start, start + len(data))
            self.offset += len(data)
            return
        view = memoryview(data)
        run_from = 0  # Start of the current non-zero run in ``data``.
        for at in range(0, len(data), GRAIN):
            if data[at:at + GRAIN] == _ZERO_GRAIN:
                if run_from < at:
                    self._hash.update(view[run_from:at])
                self._zero_run(start + at, start + at + GRAIN)
                run_from = at + GRAIN
        if run_from < len(data):
            self._hash.update(view[run_from:])
        self.offset += len(data)

    def add_zeros(self, length):
        """``length`` bytes known to be zero (a hole): nothing is read."""
        head = min(length, (-self.offset - len(self._carry)) % GRAIN)
        if head:
            self.update(bytes(head))
            length -= head
        bulk = length - length % GRAIN
        if bulk:
            self._zero_run(self.offset, self.offset + bulk)
            self.offset += bulk
        if length - bulk:
            self.update(bytes(length - bulk))

    def finish(self, mtime_ns, action="on_demand", compression="none"):
        """The sidecar of the file whose bytes were fed, all of them."""
        size = self.offset + len(self._carry)
        if self._carry:
            if self._carry == _ZERO_GRAIN[:len(self._carry)]:
                self._zero_run(self.offset, size)
            else:
                self._hash.update(self._carry)
            self._carry = b""
            self.offset = size
        zeros = [(s, e - s) for s, e in _coarsen(self._zeros)]
        return meta_format.Sidecar(
            size, mtime_ns, "sha256-nonzero", self._hash.hexdigest(),
            meta_format.ZeroMap.from_extents(zeros), action, compression)


def _coarsen(runs):
    """Drop the shortest zero runs until the map fits its limit."""
    shortest = GRAIN
    while len(runs) > meta_format.MAX_EXTENTS:
        shortest *= 2
        runs = [r for r in runs if r[1] - r[0] >= shortest]
    return runs


def _seek(fd, offset, whence, size):
    """lseek for SEEK_DATA/SEEK_HOLE; without support: all data."""
    try:
        return os.lseek(fd, offset, whence)
    except OSError as e:
        if e.errno == errno.ENXIO:
            return size  # No data after offset.
        if e.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return offset if whence == os.SEEK_DATA else size
        raise


def scan_file(path, action="on_demand", compression="none"):
    """The sidecar describing ``path`` as it is now.

    Raises FileChanged if the file was modified during the scan.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        before = os.fstat(fd)
        size = before.st_size
        builder = SidecarBuilder()
        offset = 0
        while offset < size:
            data_at = min(_seek(fd, offset, os.SEEK_DATA, size), size)
            if data_at > offset:
                builder.add_zeros(data_at - offset)
                offset = data_at
            if offset >= size:
                break
            hole_at = min(_seek(fd, offset, os.SEEK_HOLE, size), size)
            while offset < hole_at:
                data = os.pread(fd, min(READ_SIZE, hole_at - offset), offset)
                if not data:
                    raise FileChanged("%s shrank while it was scanned"
                                      % path)
                builder.update(data)
                offset += len(data)
        after = os.fstat(fd)
        if (after.st_size, after.st_mtime_ns) != (size, before.st_mtime_ns):
            raise FileChanged("%s changed while it was scanned" % path)
        return builder.finish(before.st_mtime_ns, action, compression)
    finally:
        os.close(fd)


def sidecar_path(path):
    directory, name = os.path.split(path)
    return os.path.join(directory, meta_format.sidecar_name(name))


def write_sidecar(path, sidecar):
    """Store ``sidecar`` next to ``path`` (atomically: temp + rename)."""
    return durable.replace_with(sidecar_path(path), sidecar.to_bytes())
