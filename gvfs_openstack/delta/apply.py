# SPDX-License-Identifier: Apache-2.0
"""Rebuilding the new version on the receiving DTN: base + delta -> file.

One pass: each run is written where it belongs -- runs of the base by
``copy_file_range`` (in the kernel, a reflink where the file system has
them), zeros left as holes so a sparse image stays sparse.  What is made
is checked one of two ways, and anything wrong -- a damaged or foreign
delta, a base that changed, another digest -- raises :class:`Rejected`
and leaves no output file behind: the caller sends the whole file
instead.  An output prefilled with the base (:mod:`.prefill`, while the
delta was still on its way) is used as it stands if the base has not
changed since: only the runs the delta changes are written.

* By block signature (the conductor's way): the base's fresh signature
  must be the one the delta was made against, and the signature of what
  is made -- the base's digests for copied blocks, the delta's own bytes
  hashed -- must be the one it was made for.  No byte of the base is
  read: Glance reads the whole file once, when it is registered, and
  checks its ``os_hash_value`` before it activates it, so hashing it here
  as well would only add a second pass over every byte.
* By the image's hash (``hash_algo``, ``expected``): a second thread
  hashes the file being made (hashlib lets go of the GIL), so the
  rebuilt file is checked without being read again -- for a base without
  a fresh signature, or a caller that wants the check before Glance's.

The output is not fsync'd here.  Made in a fraction of a second, its
bytes are nearly all still to be written back, and waiting for the disk
is the caller's choice: the conductor flushes the staged file before
Glance may activate it, as it does a file GridFTP wrote.
"""

import contextlib
import dataclasses
import hashlib
import os
import queue
import sys
import threading

from gvfs_openstack.delta import blocks
from gvfs_openstack.delta import codec
from gvfs_openstack.delta import prefill
from gvfs_openstack.files import durable
from gvfs_openstack.files import safe_files

READ_SIZE = 8 * 1024 * 1024
_ZEROS = memoryview(bytes(READ_SIZE))


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
        self._made = None

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

    def finish(self):
        """The signature of what was made (mtime 0), or None if unsigned."""
        if self._made is None and self.builder is not None:
            self._made = self.builder.finish(0)
        return self._made


def _write_signature(path, signature):
    """Cache ``signature`` (None: unsigned) for ``path``, written and closed.

    A signature that cannot be written only makes the file slower to
    sign later, when it is read for it: said on stderr, not raised.
    """
    if signature is None:
        return
    try:
        blocks.write(path, dataclasses.replace(
            signature, mtime_ns=os.stat(path).st_mtime_ns))
    except OSError as e:
        print("gvfs-meta: %s is left unsigned: %s" % (path, e),
              file=sys.stderr)


def apply(base_path, delta_path, output, hash_algo=None, expected=None,
          mode=0o644, base_signature=None, prefilled_from=None):
    """Make ``output`` from ``base_path`` and the delta; check it.

    Returns the rebuilt file's size.  Without ``hash_algo`` the check is
    by block signature: ``base_signature`` must be the base's, fresh, and
    the one the delta was made against.  With it, the output's digest
    must be ``expected``.  Either way, where the base's fresh signature
    is given, the output's is cached next to it.  ``prefilled_from``:
    ``output`` was prefilled (:func:`prefill.prefill`) from the base
    then so named; used as it stands if the base is still that one.
    """
    digest = _digest(hash_algo) if hash_algo is not None else None
    # A signature of an earlier file of this name must not outlive it.
    with contextlib.suppress(FileNotFoundError):
        os.unlink(blocks.signature_path(output))
    base = os.open(base_path, os.O_RDONLY)
    try:
        base_st = os.fstat(base)
        if base_signature is not None and not base_signature.matches(
                base_st.st_size, base_st.st_mtime_ns):
            base_signature = None
        if digest is None and base_signature is None:
            raise Rejected("the base has no block signature made since it "
                           "last changed, to check the delta against")
        parser = codec.DeltaParser(base_st.st_size)
        check = _Check(base, base_st, base_signature, digest)
        prefilled = prefilled_from is not None and \
            prefill.identity(base_st) == prefilled_from
        out = safe_files.open_output(output, mode, truncate=not prefilled,
                                     create=not prefilled)
        try:
            try:
                _rebuild(delta_path, parser, check, _Output(
                    out, base, base_st, base_signature, prefilled))
            finally:
                check.finish()
            os.ftruncate(out, parser.size)
            check.verify(parser, hash_algo, expected)
        except BaseException:
            os.close(out)
            os.unlink(output)
            raise
        os.close(out)
        _write_signature(output, check.signature())
    except codec.DeltaError as e:
        raise Rejected(str(e)) from e
    finally:
        os.close(base)
    return parser.size


def _digest(hash_algo):
    try:
        digest = hashlib.new(hash_algo)
    except ValueError as e:
        raise Rejected("unknown hash algorithm %r" % hash_algo) from e
    if not digest.digest_size:
        # SHAKE: Glance records no digest of a length it did not choose.
        raise Rejected("%s has no fixed digest size" % hash_algo)
    return digest


class _Check:
    """What the rebuild is checked by: the image's digest or signatures.

    Told each run as it is written; hashes it (``digest``, on the
    hasher's thread) and signs it (from the base's fresh signature,
    where there is one).  Without a digest, the signatures are the check.
    """

    def __init__(self, base, base_st, base_signature, digest):
        self.base = base
        self.base_st = base_st
        self.signer = _Signer(base_signature) if base_signature is not None \
            else None
        self.hasher = _Hasher(digest, base) if digest is not None else None
        self.made = None
        if self.hasher is not None:
            self.hasher.start()

    def header(self, parser):
        """The delta's header is in: by signature, is it for this base?

        Checked before a byte is copied: a base changed since the source
        made the delta is refused at once.
        """
        if self.hasher is None and \
                parser.base_identity != self.signer.base.identity():
            raise Rejected("the delta was made against another version of "
                           "the base: it changed since it was signed")

    def data(self, data):
        if self.hasher is not None:
            self.hasher.work.put(("bytes", data))
        if self.signer is not None:
            self.signer.data(data)

    def copy(self, base_offset, length):
        if self.hasher is not None:
            self.hasher.work.put(("base", base_offset, length))
        if self.signer is not None:
            self.signer.copy(base_offset, length)

    def zero(self, length):
        if self.hasher is not None:
            self.hasher.work.put(("zeros", length))
        if self.signer is not None:
            self.signer.zero(length)

    def finish(self):
        """No more runs: the hasher's thread ends, its digest taken."""
        if self.hasher is not None:
            self.made = self.hasher.finish()

    def verify(self, parser, hash_algo, expected):
        """Rejected unless the output is the file the delta was made for."""
        if self.hasher is not None:
            if self.made != expected:
                raise Rejected("the rebuilt file's %s is %s, the image's "
                               "is %s" % (hash_algo, self.made, expected))
            return
        st = os.fstat(self.base)
        if (st.st_size, st.st_mtime_ns) != (self.base_st.st_size,
                                            self.base_st.st_mtime_ns):
            raise Rejected("the base changed while the file was rebuilt")
        made = self.signer.finish()
        if made is None:
            raise Rejected("the delta's runs are not whole blocks: what it "
                           "makes can be checked only by the image's hash")
        if made.identity() != parser.identity:
            raise Rejected("the rebuilt file's block signature is not the "
                           "one the delta was made for")

    def signature(self):
        """The output's signature (mtime 0), or None if not made."""
        return self.signer.finish() if self.signer is not None else None


def _rebuild(delta_path, parser, check, output):
    with open(delta_path, "rb") as delta:
        while True:
            data = delta.read(READ_SIZE)
            if not data:
                break
            for event in parser.feed(data):
                _do(event, parser, check, output)
    parser.close()


def _do(event, parser, check, output):
    kind = event[0]
    if kind == "header":
        check.header(parser)
    elif kind == "data":
        _, offset, data = event
        check.data(data)
        durable.pwrite_all(output.fd, data, offset)
    elif kind == "copy":
        _, offset, length, base_offset = event
        output.copy(base_offset, offset, length)
        check.copy(base_offset, length)
    elif kind == "zero":
        _, offset, length = event
        output.zero(offset, length)
        check.zero(length)


class _Output:
    """The file being made, empty or prefilled with its base's bytes.

    Empty: copies are made, zeros left as holes.  Prefilled
    (:mod:`.prefill`): a copy from the same offset is there already, and
    holes are punched (zeros written, where holes cannot be) only where
    the base had data -- the blocks its signature does not give the zero
    digest, or all of its part of the run without a signature.
    """

    def __init__(self, fd, base, base_st, base_signature, prefilled):
        self.fd = fd
        self.base = base
        self.base_size = base_st.st_size
        self.base_signature = base_signature
        self.prefilled = prefilled
        self._base_zeros = None

    def copy(self, base_offset, offset, length):
        if self.prefilled and base_offset == offset:
            return
        try:
            prefill.copy_range(self.base, self.fd, base_offset, offset,
                               length)
        except prefill.BaseChanged as e:
            raise codec.DeltaError(str(e)) from e

    def zero(self, offset, length):
        if not self.prefilled:
            return
        end = min(offset + length, self.base_size)
        for start, size in self._base_data(offset, end):
            if prefill.punch_hole(self.fd, start, size):
                continue
            stop = start + size
            while start < stop:
                piece = min(stop - start, READ_SIZE)
                durable.pwrite_all(self.fd, _ZEROS[:piece], start)
                start += piece

    def _base_data(self, offset, end):
        """Runs ``(offset, length)`` of ``[offset, end)`` with base data.

        All of it but the blocks the base's signature says are zeros
        (found once, for every zero run of the delta).
        """
        if offset >= end:
            return []
        if self._base_zeros is None:
            self._base_zeros = self.base_signature.zero_runs() \
                if self.base_signature is not None else []
        return prefill.outside([(offset, end - offset)], self._base_zeros)
