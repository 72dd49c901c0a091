# SPDX-License-Identifier: Apache-2.0
"""Block signatures: a short digest of every 4 KiB block of a file.

A new golden image is usually its predecessor with a few per cent of its
blocks changed.  The signature of the predecessor -- kept next to it at
the destination DTN -- is all the source DTN needs to tell which blocks
of the new version the destination already has (:mod:`.encoder`), so
only the others cross the link.  Blocks are compared by content, not by
position: a rebuilt qcow2 that moved its clusters still matches.

The signature is cached next to the file it describes as
``.gvfs-meta.<name>.blocks`` (a dot file with the sidecars' prefix, so
listings and proxies skip it), and like a sidecar it is trusted only for
the size and mtime it was made for.  Binary, version 1::

    b"GVFSBLK1" | u32 block size | u32 digest size | u64 size | u64 mtime_ns
    | one digest a block, in offset order

A digest is BLAKE2b of the block (16 bytes: a collision only costs a
rejected delta, as the whole file is checked against Glance's hash);
an all-zero block's digest is 16 zero bytes, so zeros are never looked
up.  Parsing raises nothing but :class:`SignatureError`.
"""

import dataclasses
import hashlib
import os
import re
import struct

from gvfs_openstack.files import durable
from gvfs_openstack.sidecar import format as meta_format

MAGIC = b"GVFSBLK1"
BLOCK_SIZE = 4096
DIGEST_SIZE = 16
ZERO_DIGEST = bytes(DIGEST_SIZE)
SUFFIX = ".blocks"
_HEADER = struct.Struct(">8sIIQQ")
_IDENTITY = struct.Struct(">IQ")
IDENTITY_SIZE = 32
#: Reads of this many bytes at a time (a multiple of BLOCK_SIZE).
READ_SIZE = 8 * 1024 * 1024
_ZERO_BLOCK = bytes(BLOCK_SIZE)
_ZERO_DIGESTS = re.compile(b"\\x00{%d,}" % DIGEST_SIZE)


class SignatureError(ValueError):
    """A signature that must not be used (malformed, for another file)."""


def digest(block):
    """The digest of one block (the last one of a file may be shorter)."""
    if block == _ZERO_BLOCK[:len(block)]:
        return ZERO_DIGEST
    return hashlib.blake2b(block, digest_size=DIGEST_SIZE).digest()


def digests(data):
    """The digests of ``data``'s blocks, concatenated.

    Sliced as bytes: comparing a memoryview with the zero block goes
    byte by byte in Python, a bytes slice by memcmp (16 times faster
    for an image with many zero blocks).
    """
    data = bytes(data)
    if data == _zeros(len(data)):
        return ZERO_DIGEST * -(-len(data) // BLOCK_SIZE)
    return b"".join(digest(data[at:at + BLOCK_SIZE])
                    for at in range(0, len(data), BLOCK_SIZE))


def _zeros(length):
    return bytes(length) if length != READ_SIZE else _ZERO_READ


_ZERO_READ = bytes(READ_SIZE)


@dataclasses.dataclass(frozen=True)
class Signature:
    size: int
    mtime_ns: int
    digests: bytes
    block_size: int = BLOCK_SIZE

    @property
    def count(self):
        return len(self.digests) // DIGEST_SIZE

    def block(self, number):
        """The digest of block ``number``."""
        at = number * DIGEST_SIZE
        return self.digests[at:at + DIGEST_SIZE]

    def block_length(self, number):
        return min(self.block_size, self.size - number * self.block_size)

    def index(self):
        """Each non-zero digest and the offset of its first block."""
        # Built last block first, so that the first block of a digest
        # is the one left; in C (slices, zip, dict), not a Python loop.
        last = (self.count - 1) * DIGEST_SIZE
        where = dict(zip(
            [self.digests[at:at + DIGEST_SIZE]
             for at in range(last, -1, -DIGEST_SIZE)],
            range(last // DIGEST_SIZE * self.block_size, -1,
                  -self.block_size)))
        where.pop(ZERO_DIGEST, None)
        return where

    def zero_runs(self):
        """``(offset, length)`` of each run of all-zero blocks, in order.

        Found by a search over the digests (in C), not a loop over the
        blocks: a run of zero digests is a run of zero bytes, and a run
        of zero bytes holds zero digests where it covers whole ones.
        """
        runs = []
        for found in _ZERO_DIGESTS.finditer(self.digests):
            first = -(-found.start() // DIGEST_SIZE)
            end = found.end() // DIGEST_SIZE
            if end > first:
                offset = first * self.block_size
                runs.append((offset, min(end * self.block_size, self.size) -
                             offset))
        return runs

    def matches(self, size, mtime_ns):
        return self.size == size and self.mtime_ns == mtime_ns

    def identity(self):
        """What the signature says of the bytes, in 32 bytes.

        BLAKE2b-256 of the block size, the file's size and every digest;
        not of the mtime, which belongs to one copy of the file.  A delta
        names its base's and its result's identities, so that the end
        that applies it can check both without reading either file.
        """
        digest = hashlib.blake2b(_IDENTITY.pack(self.block_size, self.size),
                                 digest_size=IDENTITY_SIZE)
        digest.update(self.digests)
        return digest.digest()

    def to_bytes(self):
        return _HEADER.pack(MAGIC, self.block_size, DIGEST_SIZE, self.size,
                            self.mtime_ns) + self.digests


class SignatureBuilder:
    """The signature of a stream, fed in pieces of any length.

    For a file being written (an upload): the bytes are signed as they
    go by, so the file need not be read again.
    """

    def __init__(self):
        self._parts = []
        self._tail = b""
        self._short = False
        self.size = 0

    def update(self, data):
        if self._short and data:
            raise ValueError("bytes after the short block that ended the "
                             "stream")
        data = bytes(data)
        self.size += len(data)
        if self._tail:
            data = self._tail + data
        whole = len(data) - len(data) % BLOCK_SIZE
        if whole:
            self._parts.append(digests(data if whole == len(data)
                                       else data[:whole]))
        self._tail = data[whole:]

    def known(self, digests, length):
        """Take ``length`` bytes whose block digests are known already.

        Bytes copied from a signed file: ``digests`` are its digests of
        the blocks copied.  Only from a block boundary, and whole blocks
        (or the stream's last); False, taking nothing, when not.
        """
        count = -(-length // BLOCK_SIZE)
        if self._tail or self._short or len(digests) != count * DIGEST_SIZE:
            return False
        self._parts.append(bytes(digests))
        self.size += length
        # A short block ends the stream: nothing may follow it.
        self._short = bool(length % BLOCK_SIZE)
        return True

    def finish(self, mtime_ns):
        """The signature, for a file of the bytes fed and ``mtime_ns``."""
        if self._tail:
            self._parts.append(digests(self._tail))
            self._tail = b""
        return Signature(self.size, mtime_ns, b"".join(self._parts))


def parse(data):
    """A :class:`Signature` from its bytes; SignatureError if unusable."""
    if len(data) < _HEADER.size:
        raise SignatureError("shorter than its header")
    magic, block_size, digest_size, size, mtime_ns = _HEADER.unpack_from(
        data)
    if magic != MAGIC:
        raise SignatureError("not a block signature")
    if block_size != BLOCK_SIZE or digest_size != DIGEST_SIZE:
        raise SignatureError("blocks of %d bytes with %d-byte digests; "
                             "this version reads %d and %d" % (
                                 block_size, digest_size, BLOCK_SIZE,
                                 DIGEST_SIZE))
    body = bytes(data[_HEADER.size:])
    if len(body) != -(-size // block_size) * digest_size:
        raise SignatureError("%d digest bytes for a file of %d bytes" % (
            len(body), size))
    return Signature(size, mtime_ns, body, block_size)


def signature_path(path):
    directory, name = os.path.split(path)
    return os.path.join(directory, meta_format.sidecar_name(name) + SUFFIX)


def compute(path):
    """The signature of ``path`` as it is now, reading all of it."""
    fd = os.open(path, os.O_RDONLY)
    try:
        before = os.fstat(fd)
        parts = []
        offset = 0
        while offset < before.st_size:
            data = os.pread(fd, min(READ_SIZE, before.st_size - offset),
                            offset)
            if not data:
                raise SignatureError("%s shrank while it was read" % path)
            parts.append(digests(data))
            offset += len(data)
        after = os.fstat(fd)
    finally:
        os.close(fd)
    if (after.st_size, after.st_mtime_ns) != (before.st_size,
                                              before.st_mtime_ns):
        raise SignatureError("%s changed while it was read" % path)
    return Signature(before.st_size, before.st_mtime_ns, b"".join(parts))


def cached(path):
    """The cached signature of ``path`` if it still describes it, or None."""
    try:
        with open(signature_path(path), "rb") as f:
            found = parse(f.read())
    except (OSError, SignatureError):
        return None
    st = os.stat(path)
    return found if found.matches(st.st_size, st.st_mtime_ns) else None


def write(path, signature):
    """Cache ``signature`` next to ``path`` (atomically); its path."""
    return durable.replace_with(signature_path(path), signature.to_bytes())


def ensure(path):
    """The signature of ``path``: cached, or computed and cached.

    A directory this account may not write to keeps no cache: the
    signature is computed each time, which is slower, not wrong.
    """
    found = cached(path)
    if found is None:
        found = compute(path)
        try:
            write(path, found)
        except PermissionError:
            pass
    return found
