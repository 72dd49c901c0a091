# SPDX-License-Identifier: Apache-2.0
"""The base's bytes in the output before the delta arrives.

A new version is nearly all its base: rebuilding it copies some 97% of a
file the size of the image, and on a file system without reflinks
(ext4) that is a copy of every byte in the page cache -- the slowest
step of a delta at the destination.  Nothing in that copy waits for the
delta, so the destination starts it as soon as the conductor names the
base, while the source writes the delta and the link carries it; the
rebuild (:mod:`.apply`) then writes only what the delta changes.

Both run in one process (``gvfs-meta rebuild``), and the rebuild uses
the copy only if the base is still the file it was copied from (device,
inode, size, mtime, unchanged from before the copy to after it); else it
starts from an empty file, as without a prefill -- slower, never wrong.
Holes stay holes: only the base's data extents are copied, less the
blocks its signature says are zeros.

How the bytes are copied (:class:`Copier`): by reflink where the file
system shares blocks between files (XFS, btrfs: no bytes move at all),
else through one buffer and out by direct I/O.  A buffered copy would
take a new page-cache page for each 4 KiB of the copy: on a DTN that
evicts the transfers' own pages for a file nobody reads again soon, and
in the lab's VM it was the copy's whole cost (1.3-1.9 s for 512 MiB in
the page cache, 0.15-0.26 s for the rebuild step by direct I/O).  What
cannot go by direct I/O (pieces not aligned to 4 KiB, a file system
that refuses ``O_DIRECT``) goes by ``copy_file_range``.
"""

import ctypes
import errno
import fcntl
import mmap
import os
import struct

from gvfs_openstack.delta import blocks
from gvfs_openstack.files import durable
from gvfs_openstack.files import safe_files

#: Errors of copy_file_range that mean "not here": copy through memory.
NO_COPY_RANGE = (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)
#: Errors of a reflink or of direct I/O that mean "not on this file
#: system" (ENOTTY: no such ioctl).
NOT_HERE = NO_COPY_RANGE + (errno.ENOTTY,)
READ_SIZE = 8 * 1024 * 1024
#: What direct I/O's offsets and lengths are multiples of: a page, the
#: largest logical block size of a disk.
DIRECT_ALIGN = 4096
#: ioctl FICLONERANGE: struct file_clone_range {s64 src_fd; u64
#: src_offset, src_length, dest_offset}.
_FICLONERANGE = 0x4020940d


#: The copy asks whether to go on before each slice this long.
SLICE = 64 * 1024 * 1024


class BaseChanged(Exception):
    """The base changed while it was copied: no prefill is left."""


class Stopped(Exception):
    """The copy was told to stop: no prefill is left."""


def identity(st):
    """Which version of a file ``st`` (its stat) is, for :func:`prefill`."""
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def prefill(base_path, output, mode=0o644, going_on=None):
    """Make ``output`` a copy of the base; the base's :func:`identity`.

    The rebuild uses the copy only if the base still has that identity.
    Raises :class:`BaseChanged` (leaving no output) if the base changed
    during the copy, :class:`Stopped` (leaving none either) if
    ``going_on()`` said False before a slice of it, OSError if it could
    not be made.
    """
    base = os.open(base_path, os.O_RDONLY)
    try:
        before = os.fstat(base)
        signature = blocks.cached(base_path)
        zeros = signature.zero_runs() if signature is not None and \
            signature.matches(before.st_size, before.st_mtime_ns) else []
        out = safe_files.open_output(output, mode)
        try:
            with Copier(base, out) as copier:
                for offset, length in _slices(outside(
                        data_extents(base, before.st_size), zeros)):
                    if going_on is not None and not going_on():
                        raise Stopped("the copy of %s was stopped" %
                                      base_path)
                    copier.copy(offset, length)
            os.ftruncate(out, before.st_size)
            if identity(os.fstat(base)) != identity(before):
                raise BaseChanged("%s changed while it was copied" %
                                  base_path)
        except BaseException:
            os.close(out)
            os.unlink(output)
            raise
        os.close(out)
    finally:
        os.close(base)
    return identity(before)


def _slices(runs):
    """``runs`` cut into pieces of at most :data:`SLICE` bytes."""
    for offset, length in runs:
        end = offset + length
        while offset < end:
            yield offset, min(SLICE, end - offset)
            offset += SLICE


class Copier:
    """Copies ranges of ``base`` to the same offsets of ``out``.

    ``out`` is open for writing.  For direct I/O it is opened once more
    through ``/proc/self/fd``: the same file, whatever has its name by
    then.  A reflink is tried first, then direct I/O, each
    given up for good at its first "not here" answer.
    """

    def __init__(self, base, out):
        self.base = base
        self.out = out
        self.reflinks = True
        #: The output opened for direct I/O; None before it is tried and
        #: once the file system refused it.
        self.direct = None
        #: Set once direct I/O was tried: the buffer, page-aligned as
        #: direct I/O wants its memory.
        self.buffer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.direct is not None:
            os.close(self.direct)
        if self.buffer is not None:
            self.buffer.close()

    def copy(self, offset, length):
        if self.reflinks and self._reflink(offset, length):
            return
        # The pieces before and after the aligned middle go buffered.
        start = min(-(-offset // DIRECT_ALIGN) * DIRECT_ALIGN,
                    offset + length)
        end = max((offset + length) // DIRECT_ALIGN * DIRECT_ALIGN, start)
        if start > offset:
            copy_range(self.base, self.out, offset, offset, start - offset)
        while start < end and self._direct_file() is not None:
            start += self._write_direct(start, min(READ_SIZE, end - start))
        if end > start:
            copy_range(self.base, self.out, start, start, end - start)
        if offset + length > end:
            copy_range(self.base, self.out, end, end, offset + length - end)

    def _reflink(self, offset, length):
        """Share the base's blocks; False where that cannot be done."""
        try:
            fcntl.ioctl(self.out, _FICLONERANGE, struct.pack(
                "qQQQ", self.base, offset, length, offset))
        except OSError as e:
            if e.errno not in NOT_HERE:
                raise
            if e.errno != errno.EINVAL:
                # EINVAL may be one range's alignment, not the file
                # system's lack of reflinks.
                self.reflinks = False
            return False
        return True

    def _direct_file(self):
        if self.buffer is None:
            self.buffer = mmap.mmap(-1, READ_SIZE)
            try:
                self.direct = os.open("/proc/self/fd/%d" % self.out,
                                      os.O_WRONLY | os.O_DIRECT)
            except OSError as e:
                if e.errno not in NOT_HERE:
                    raise
        return self.direct

    def _write_direct(self, offset, length):
        """Copy up to ``length`` aligned bytes at ``offset``; how many."""
        view = memoryview(self.buffer)[:length]
        try:
            got = os.preadv(self.base, [view], offset)
            if got != length:
                raise BaseChanged("the base is shorter than it was: it "
                                  "changed")
            done = os.pwritev(self.direct, [view], offset)
        except OSError as e:
            if e.errno not in NOT_HERE:
                raise
            os.close(self.direct)
            self.direct = None
            return 0
        finally:
            view.release()
        if not done:
            raise OSError(errno.EIO, "direct write of %d bytes at %d wrote "
                          "nothing" % (length, offset))
        return done


def outside(extents, holes):
    """The parts of ``extents`` outside ``holes`` (both sorted runs)."""
    holes = iter(holes)
    hole = next(holes, None)
    for offset, length in extents:
        end = offset + length
        while offset < end:
            while hole is not None and hole[0] + hole[1] <= offset:
                hole = next(holes, None)
            if hole is None or hole[0] >= end:
                yield offset, end - offset
                break
            if hole[0] > offset:
                yield offset, hole[0] - offset
            offset = hole[0] + hole[1]


def punch_hole(fd, offset, length):
    """Make ``length`` bytes at ``offset`` a hole; False where it cannot.

    ``fallocate(PUNCH_HOLE | KEEP_SIZE)``, which Python's ``os`` does not
    offer: the bytes read back as zeros and take no space.
    """
    if _fallocate is None:
        return False
    if _fallocate(fd, _PUNCH_HOLE | _KEEP_SIZE, ctypes.c_int64(offset),
                  ctypes.c_int64(length)) == 0:
        return True
    error = ctypes.get_errno()
    if error in (errno.EOPNOTSUPP, errno.ENOSYS):
        return False
    raise OSError(error, os.strerror(error))


def _libc_fallocate():
    try:
        function = ctypes.CDLL(None, use_errno=True).fallocate
    except (OSError, AttributeError):
        return None
    function.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64,
                         ctypes.c_int64)
    return function


_KEEP_SIZE, _PUNCH_HOLE = 0x01, 0x02
_fallocate = _libc_fallocate()


def data_extents(fd, size):
    """``(offset, length)`` of the data in the file's first ``size`` bytes.

    By SEEK_DATA and SEEK_HOLE; a file system without them is all data.
    """
    offset = 0
    while offset < size:
        try:
            start = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:
                return      # Only a hole is left.
            if e.errno != errno.EINVAL:
                raise
            yield offset, size - offset
            return
        if start >= size:
            return
        end = min(os.lseek(fd, start, os.SEEK_HOLE), size)
        yield start, end - start
        offset = end


def copy_range(source, out, source_offset, offset, length):
    """Bytes of one file into another, in the kernel where it can.

    ``copy_file_range`` (a reflink where the file system has them);
    through memory where it is not supported between the two.  Raises
    :class:`BaseChanged` if the source ends early.
    """
    while length:
        try:
            done = os.copy_file_range(source, out, length, source_offset,
                                      offset)
        except OSError as e:
            if e.errno not in NO_COPY_RANGE:
                raise
            done = durable.pwrite_all(
                out, os.pread(source, min(READ_SIZE, length), source_offset),
                offset)
        if not done:
            raise BaseChanged("the base is shorter than it was: it changed")
        source_offset += done
        offset += done
        length -= done
