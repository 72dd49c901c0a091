# SPDX-License-Identifier: Apache-2.0
"""The base's bytes in the output before the delta arrives.

A new version is nearly all its base: rebuilding it copies some 97% of a
file the size of the image, and on a file system without reflinks
(ext4) that is a copy of every byte in the page cache -- the slowest
step of a delta at the destination.  Nothing in that copy waits for the
delta, so the conductor starts it (``gvfs-meta prefill``) as soon as it
knows the base, while the source signs and writes the delta and the
link carries it; the rebuild (:mod:`.apply`) then writes only what the
delta changes.

The rebuild trusts a prefilled output only with its *stamp*: a small
file beside it, written once the copy is whole, naming the base as it
was (device, inode, size, mtime) from before the copy to after it, and
the output as the copy left it.  A base that changed meanwhile, an
output touched since, or no stamp at all: the rebuild starts from an
empty file, as without a prefill -- slower, never wrong.  Holes stay
holes: only the base's data extents are copied, less the blocks its
signature says are zeros.
"""

import contextlib
import ctypes
import errno
import json
import os

from gvfs_openstack.delta import blocks
from gvfs_openstack import durable
from gvfs_openstack.sidecar import format as meta_format

SUFFIX = ".prefill"
#: Errors of copy_file_range that mean "not here": copy through memory.
NO_COPY_RANGE = (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)
READ_SIZE = 8 * 1024 * 1024


class BaseChanged(Exception):
    """The base changed while it was copied: no prefill is left."""


def stamp_path(output):
    """Where the stamp of ``output``'s prefill is (a sidecar-named file)."""
    directory, name = os.path.split(output)
    return os.path.join(directory, meta_format.sidecar_name(name) + SUFFIX)


def _identity(st):
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def prefill(base_path, output, mode=0o644):
    """Make ``output`` a copy of the base and stamp it; its size.

    Raises :class:`BaseChanged` (leaving no output) if the base changed
    during the copy, OSError if it could not be made.
    """
    stamp = stamp_path(output)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(stamp)
    base = os.open(base_path, os.O_RDONLY)
    try:
        before = os.fstat(base)
        signature = blocks.cached(base_path)
        zeros = signature.zero_runs() if signature is not None and \
            signature.matches(before.st_size, before.st_mtime_ns) else []
        out = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            for offset, length in _without(
                    data_extents(base, before.st_size), zeros):
                copy_range(base, out, offset, offset, length)
            os.ftruncate(out, before.st_size)
            if _identity(os.fstat(base)) != _identity(before):
                raise BaseChanged("%s changed while it was copied" %
                                  base_path)
            made = os.fstat(out)
        except BaseException:
            os.close(out)
            os.unlink(output)
            raise
        os.close(out)
    finally:
        os.close(base)
    tmp = "%s.tmp-%d" % (stamp, os.getpid())
    with open(tmp, "w") as f:
        json.dump({"base": _identity(before),
                   "output": _identity(made)}, f)
    os.replace(tmp, stamp)
    return before.st_size


def take(base_st, output):
    """Whether ``output`` holds the base ``base_st`` names, as prefilled.

    The stamp is used up either way: it vouches for one rebuild, the
    next that looks.
    """
    stamp = stamp_path(output)
    try:
        with open(stamp, "rb") as f:
            text = f.read()
        os.unlink(stamp)
        found = json.loads(text)
        made = os.stat(output)
    except (OSError, ValueError):
        return False
    return (isinstance(found, dict) and
            found.get("base") == _identity(base_st) and
            found.get("output") == _identity(made))


def _without(extents, holes):
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
