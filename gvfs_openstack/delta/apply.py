# SPDX-License-Identifier: Apache-2.0
"""Rebuilding the new version on the receiving DTN: base + delta -> file.

One pass: each run is written where it belongs -- runs of the base by
``copy_file_range`` (in the kernel, a reflink where the file system has
them), zeros left as holes so a sparse image stays sparse -- while a
second thread hashes the file being made with the image's own algorithm
(hashlib lets go of the GIL), so the rebuilt file is checked against the
hash Glance recorded at the source without reading it again.  Anything
wrong -- a damaged or foreign delta, a base that changed, another digest
-- raises :class:`Rejected` and leaves no output file behind: the caller
sends the whole file instead.
"""

import errno
import hashlib
import os
import queue
import threading

from gvfs_openstack.delta import codec

READ_SIZE = 8 * 1024 * 1024
_ZEROS = memoryview(bytes(READ_SIZE))
#: Errors of copy_file_range that mean "not here": copy through memory.
_NO_COPY_RANGE = (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)


class Rejected(Exception):
    """The delta does not rebuild the file it was meant to."""


class _Hasher(threading.Thread):
    """Hashes the output's bytes in order, on a thread of its own.

    Fed ``("bytes", data)``, ``("base", offset, length)`` (read again
    from the base: in the page cache, just copied) and ``("zeros",
    length)``; at most a few items wait, so memory stays bounded.
    """

    def __init__(self, digest, base):
        super().__init__(name="gvfs-delta-hash", daemon=True)
        self.digest = digest
        self.base = base
        self.error = None
        self.work = queue.Queue(maxsize=4)

    def run(self):
        try:
            for item in iter(self.work.get, None):
                self._hash(*item)
        except BaseException as e:  # Reported by finish().
            self.error = e
            for _ in iter(self.work.get, None):
                pass

    def _hash(self, kind, *args):
        if kind == "bytes":
            self.digest.update(args[0])
        elif kind == "zeros":
            length = args[0]
            while length:
                piece = min(length, READ_SIZE)
                self.digest.update(_ZEROS[:piece])
                length -= piece
        else:
            offset, length = args
            while length:
                data = os.pread(self.base, min(READ_SIZE, length), offset)
                if not data:
                    raise codec.DeltaError("the base is shorter than the "
                                           "delta says: it changed")
                self.digest.update(data)
                offset += len(data)
                length -= len(data)

    def finish(self):
        self.work.put(None)
        self.join()
        if self.error is not None:
            raise self.error
        return self.digest.hexdigest()


def apply(base_path, delta_path, output, hash_algo, expected, mode=0o644):
    """Make ``output`` from ``base_path`` and the delta; check its digest.

    Returns the rebuilt file's size.
    """
    try:
        digest = hashlib.new(hash_algo)
    except ValueError as e:
        raise Rejected("unknown hash algorithm %r" % hash_algo) from e
    if not digest.digest_size:
        # SHAKE: Glance records no digest of a length it did not choose.
        raise Rejected("%s has no fixed digest size" % hash_algo)
    base = os.open(base_path, os.O_RDONLY)
    try:
        parser = codec.DeltaParser(os.fstat(base).st_size)
        hasher = _Hasher(digest, base)
        hasher.start()
        out = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            try:
                _rebuild(delta_path, parser, base, out, hasher)
            finally:
                actual = hasher.finish()
            os.ftruncate(out, parser.size)
            os.fsync(out)
            if actual != expected:
                raise Rejected("the rebuilt file's %s is %s, the image's "
                               "is %s" % (hash_algo, actual, expected))
        except BaseException:
            os.close(out)
            os.unlink(output)
            raise
        os.close(out)
    except codec.DeltaError as e:
        raise Rejected(str(e)) from e
    finally:
        os.close(base)
    return parser.size


def _rebuild(delta_path, parser, base, out, hasher):
    with open(delta_path, "rb") as delta:
        while True:
            data = delta.read(READ_SIZE)
            if not data:
                break
            for event in parser.feed(data):
                _do(event, base, out, hasher)
    parser.close()


def _do(event, base, out, hasher):
    kind = event[0]
    if kind == "data":
        _, offset, data = event
        hasher.work.put(("bytes", data))
        _write(out, data, offset)
    elif kind == "copy":
        _, offset, length, base_offset = event
        _copy(base, out, base_offset, offset, length)
        hasher.work.put(("base", base_offset, length))
    elif kind == "zero":
        hasher.work.put(("zeros", event[2]))


def _copy(base, out, base_offset, offset, length):
    """Bytes of the base into the output, in the kernel where it can."""
    while length:
        try:
            done = os.copy_file_range(base, out, length, base_offset, offset)
        except OSError as e:
            if e.errno not in _NO_COPY_RANGE:
                raise
            done = _write(out, os.pread(base, min(READ_SIZE, length),
                                        base_offset), offset)
        if not done:
            raise codec.DeltaError("the base is shorter than the delta "
                                   "says: it changed")
        base_offset += done
        offset += done
        length -= done


def _write(fd, data, offset):
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view = view[written:]
        offset += written
    return len(data)
