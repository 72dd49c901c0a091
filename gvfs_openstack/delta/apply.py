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

The output is not fsync'd here.  Made in a fraction of a second, its
bytes are nearly all still to be written back, and waiting for the disk
is the caller's choice: the conductor flushes the staged file before
Glance may activate it, as it does a file GridFTP wrote.
"""

import contextlib
import errno
import hashlib
import os
import queue
import sys
import threading

from gvfs_openstack.delta import blocks
from gvfs_openstack.delta import codec
from gvfs_openstack import durable

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


class _Signer:
    """The rebuilt file's block signature, made from its base's.

    Copied and zero blocks take their digests from the base's signature
    and the zero digest; only the delta's own bytes (a few per cent) are
    hashed.  A run that does not fall on block boundaries (no delta this
    project makes has one) leaves the file unsigned: it is signed later,
    by reading it, when needed.
    """

    def __init__(self, base_signature):
        self.base = base_signature
        self.builder = blocks.SignatureBuilder()

    def data(self, piece):
        if self.builder is not None:
            try:
                self.builder.update(piece)
            except ValueError:  # After a short block: not a signature.
                self.builder = None

    def copy(self, base_offset, length):
        if self.builder is None:
            return
        first = base_offset // blocks.BLOCK_SIZE
        count = -(-length // blocks.BLOCK_SIZE)
        if base_offset % blocks.BLOCK_SIZE or (
                length % blocks.BLOCK_SIZE and
                base_offset + length != self.base.size) or \
                not self.builder.known(self.base.digests[
                    first * blocks.DIGEST_SIZE:
                    (first + count) * blocks.DIGEST_SIZE], length):
            self.builder = None

    def zero(self, length):
        if self.builder is not None and not self.builder.known(
                blocks.ZERO_DIGEST * -(-length // blocks.BLOCK_SIZE),
                length):
            self.builder = None

    def write(self, path):
        """Cache the signature for ``path``, written and closed, if made.

        A signature that cannot be written only makes the file slower to
        sign later, when it is read for it: said on stderr, not raised.
        """
        if self.builder is None:
            return
        try:
            blocks.write(path, self.builder.finish(os.stat(path).st_mtime_ns))
        except OSError as e:
            print("gvfs-meta: %s is left unsigned: %s" % (path, e),
                  file=sys.stderr)


def apply(base_path, delta_path, output, hash_algo, expected, mode=0o644,
          base_signature=None):
    """Make ``output`` from ``base_path`` and the delta; check its digest.

    Returns the rebuilt file's size.  With the base's ``base_signature``
    (for the base as it is), the output's signature is cached next to it
    too, at the cost of hashing only the delta's own bytes.
    """
    try:
        digest = hashlib.new(hash_algo)
    except ValueError as e:
        raise Rejected("unknown hash algorithm %r" % hash_algo) from e
    if not digest.digest_size:
        # SHAKE: Glance records no digest of a length it did not choose.
        raise Rejected("%s has no fixed digest size" % hash_algo)
    # A signature of an earlier file of this name must not outlive it.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(blocks.signature_path(output))
    base = os.open(base_path, os.O_RDONLY)
    try:
        base_st = os.fstat(base)
        parser = codec.DeltaParser(base_st.st_size)
        signer = _Signer(base_signature) if base_signature is not None and \
            base_signature.matches(base_st.st_size, base_st.st_mtime_ns) \
            else None
        hasher = _Hasher(digest, base)
        hasher.start()
        out = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        try:
            try:
                _rebuild(delta_path, parser, base, out, hasher, signer)
            finally:
                actual = hasher.finish()
            os.ftruncate(out, parser.size)
            if actual != expected:
                raise Rejected("the rebuilt file's %s is %s, the image's "
                               "is %s" % (hash_algo, actual, expected))
        except BaseException:
            os.close(out)
            os.unlink(output)
            raise
        os.close(out)
        if signer is not None:
            signer.write(output)
    except codec.DeltaError as e:
        raise Rejected(str(e)) from e
    finally:
        os.close(base)
    return parser.size


def _rebuild(delta_path, parser, base, out, hasher, signer):
    with open(delta_path, "rb") as delta:
        while True:
            data = delta.read(READ_SIZE)
            if not data:
                break
            for event in parser.feed(data):
                _do(event, base, out, hasher, signer)
    parser.close()


def _do(event, base, out, hasher, signer):
    kind = event[0]
    if kind == "data":
        _, offset, data = event
        hasher.work.put(("bytes", data))
        durable.pwrite_all(out, data, offset)
        if signer is not None:
            signer.data(data)
    elif kind == "copy":
        _, offset, length, base_offset = event
        _copy(base, out, base_offset, offset, length)
        hasher.work.put(("base", base_offset, length))
        if signer is not None:
            signer.copy(base_offset, length)
    elif kind == "zero":
        hasher.work.put(("zeros", event[2]))
        if signer is not None:
            signer.zero(event[2])


def _copy(base, out, base_offset, offset, length):
    """Bytes of the base into the output, in the kernel where it can."""
    while length:
        try:
            done = os.copy_file_range(base, out, length, base_offset, offset)
        except OSError as e:
            if e.errno not in _NO_COPY_RANGE:
                raise
            done = durable.pwrite_all(
                out, os.pread(base, min(READ_SIZE, length), base_offset),
                offset)
        if not done:
            raise codec.DeltaError("the base is shorter than the delta "
                                   "says: it changed")
        base_offset += done
        offset += done
        length -= done
