# SPDX-License-Identifier: Apache-2.0
"""The delta format, sans I/O: what to send, and reading it back safely.

A delta rebuilds one file (the new version) from another (its base) at
the receiving end.  It is a header and records that cover the new file
from its first byte to its last, in order, each one of:

``ZERO``  a run of zeros (left a hole);
``COPY``  a run found in the base, at ``base_offset``;
``DATA``  a run the base does not have, its bytes following.

and an ``END`` record with a BLAKE2b-256 digest of every byte before it,
so a delta damaged on the way is refused as a whole.  The header names
the block signature of the base it was made against and that of the file
it makes (:meth:`blocks.Signature.identity`), so the receiving end checks
what it rebuilds against the second, and that its base is still the
first, without reading either file again.  ::

    header  b"GVFSDLT2" | u32 block size | u32 flags (0) | u64 size
            | u64 base size | 32-byte base identity | 32-byte identity
    record  u8 op | u64 offset | u64 length [| u64 base_offset (COPY)]
            [| length bytes (DATA)]
    end     u8 0xff | 32-byte digest

:func:`plan` decides the records from the two files' block signatures;
:class:`DeltaParser` is fed the delta's bytes in any pieces and yields
what to do, raising :class:`DeltaError` at the first thing that is not a
well-formed delta for a base of the size it was told.
"""

import hashlib
import struct

from gvfs_openstack.delta import blocks

MAGIC = b"GVFSDLT2"
ZERO, COPY, DATA, END = 1, 2, 3, 0xFF
HEADER = struct.Struct(">8sIIQQ32s32s")
RECORD = struct.Struct(">BQQ")
BASE_OFFSET = struct.Struct(">Q")
TRAILER_DIGEST = 32
#: The longest DATA record made; longer runs are split.
MAX_DATA_RUN = 8 * 1024 * 1024


class DeltaError(ValueError):
    """A delta that must not be applied."""


#: Blocks compared at once where the new file may be its base in place:
#: a span found equal is one slice comparison, not one per block.
SPAN = 512
#: How many pieces a span that is not all one kind is looked at in.
SPLIT = 16


def plan(new, base):
    """The records that make ``new`` from ``base`` (two Signatures).

    A list of ``(op, offset, length, base_offset)``; ``base_offset`` is
    None but for COPY.  A block is copied from where it sits in the base
    if it is there unchanged, else from the first base block equal to
    it, else it is data.

    A new version is mostly its base in place, so the digests are
    compared a span at a time (bytes compared by memcmp), and only a
    span with a change in it is split, down to single blocks: a 512 MiB
    image with 3% of its blocks changed is planned in a few hundredths
    of a second instead of half a second of Python per block.
    """
    runs = _Runs()
    lookup = _Lookup(base)
    # Blocks before this one are whole in both files: spans apply there.
    whole = min(new.size, base.size) // new.block_size
    _plan_span(new, base, 0, whole, SPAN, runs, lookup)
    for number in range(whole, new.count):
        _plan_block(new, base, number, lookup, runs)
    return runs.runs


def _plan_span(new, base, first, end, step, runs, lookup):
    """Plan blocks ``first`` to ``end`` (whole in both), ``step`` at once."""
    size, block_size = blocks.DIGEST_SIZE, new.block_size
    for number in range(first, end, step):
        stop = min(number + step, end)
        digests = new.digests[number * size:stop * size]
        if digests == base.digests[number * size:stop * size] and \
                not _has_zero_digest(digests):
            runs.add(COPY, number * block_size, (stop - number) * block_size,
                     number * block_size)
        elif digests == _zero_digests(stop - number):
            runs.add(ZERO, number * block_size, (stop - number) * block_size,
                     None)
        elif step > SPLIT:
            _plan_span(new, base, number, stop, step // SPLIT, runs, lookup)
        else:
            for one in range(number, stop):
                _plan_block(new, base, one, lookup, runs)


def _has_zero_digest(digests):
    """Whether a zero digest may be among ``digests`` (a fast over-guess).

    A substring search finds it at any byte offset; one found off a
    digest boundary only sends the span to be split.
    """
    return blocks.ZERO_DIGEST in digests


def _zero_digests(count):
    return blocks.ZERO_DIGEST * count


def _plan_block(new, base, number, lookup, runs):
    size, block_size = new.size, new.block_size
    offset = number * block_size
    length = min(block_size, size - offset)
    found = new.block(number)
    base_offset = None
    if found == blocks.ZERO_DIGEST:
        op = ZERO
    elif number < base.count and base.block(number) == found and \
            base.block_length(number) == length:
        op, base_offset = COPY, offset
    else:
        base_offset = lookup.find(found, length)
        op = DATA if base_offset is None else COPY
    runs.add(op, offset, length, base_offset)


class _Lookup:
    """Where in the base a block's digest first is; indexed when needed.

    Most plans never look a block up away from its own offset, or only
    once a change is found: the index of every base block (a dict of a
    hundred thousand digests for a 512 MiB image) is built at the first
    lookup, not before.
    """

    def __init__(self, base):
        self.base = base
        self._where = None

    def find(self, digest, length):
        if self._where is None:
            self._where = self.base.index()
        offset = self._where.get(digest)
        if offset is None or offset + length > self.base.size:
            return None
        return offset


class _Runs:
    """Records being planned; a run that extends the last one joins it."""

    def __init__(self):
        self.runs = []

    def add(self, op, offset, length, base_offset):
        if self.runs:
            last_op, last_offset, last_length, last_base = self.runs[-1]
            if last_op == op and (
                    op == ZERO or
                    (op == COPY and last_base + last_length == base_offset) or
                    (op == DATA and last_length + length <= MAX_DATA_RUN)):
                self.runs[-1] = (op, last_offset, last_length + length,
                                 last_base)
                return
        self.runs.append((op, offset, length, base_offset))


def delta_size(runs):
    """The bytes of the delta ``runs`` (from :func:`plan`) make, exactly."""
    size = HEADER.size + 1 + TRAILER_DIGEST
    for op, _, length, _ in runs:
        size += RECORD.size
        if op == COPY:
            size += BASE_OFFSET.size
        elif op == DATA:
            size += length
    return size


def header(size, base_size, base_identity, identity):
    """The header of a delta: what it makes, and from what.

    A file of ``size`` bytes whose signature has ``identity``, from a
    base of ``base_size`` bytes whose signature has ``base_identity``.
    """
    return HEADER.pack(MAGIC, blocks.BLOCK_SIZE, 0, size, base_size,
                       base_identity, identity)


def record(op, offset, length, base_offset=None):
    """A record's head (DATA's bytes follow it)."""
    head = RECORD.pack(op, offset, length)
    if op == COPY:
        head += BASE_OFFSET.pack(base_offset)
    return head


class Trailer:
    """The running digest of a delta being written; :meth:`end` closes it."""

    def __init__(self):
        self._digest = hashlib.blake2b(digest_size=TRAILER_DIGEST)

    def __call__(self, data):
        self._digest.update(data)
        return data

    def end(self):
        op = bytes([END])
        self._digest.update(op)
        return op + self._digest.digest()


class DeltaParser:
    """Feed a delta's bytes; get what to do, in order.

    :meth:`feed` returns a list of events: ``("header", size,
    base_size)``, ``("zero", offset, length)``, ``("copy", offset,
    length, base_offset)``, ``("data", offset, bytes)`` (a run's bytes
    may come in several events) and ``("end",)`` once the whole delta
    checked out.  ``base_size`` is the size of the base it will be
    applied to: a delta for another base is refused.  Once the header is
    in, ``base_identity`` and ``identity`` are the identities of the
    signatures it was made from and for.
    """

    def __init__(self, base_size):
        self.base_size = base_size
        self.size = None
        self.base_identity = None
        self.identity = None
        self.finished = False
        self._buffer = bytearray()
        self._digest = hashlib.blake2b(digest_size=TRAILER_DIGEST)
        self._next = 0          # The offset the next record must start at.
        self._data_left = 0     # Bytes of the current DATA record to come.

    def feed(self, data):
        if self.finished and data:
            raise DeltaError("bytes after the end of the delta")
        self._buffer += data
        events = []
        while True:
            event = self._step()
            if event is None:
                return events
            events.append(event)

    def close(self):
        """The delta ended: raise unless it ended where it must."""
        if not self.finished:
            raise DeltaError("the delta is cut short at byte %d of the "
                             "file" % self._next)

    def _take(self, count):
        data = bytes(self._buffer[:count])
        del self._buffer[:count]
        self._digest.update(data)
        return data

    def _step(self):
        if self.finished:
            if self._buffer:
                raise DeltaError("bytes after the end of the delta")
            return None
        if self.size is None:
            if len(self._buffer) < HEADER.size:
                return None
            magic, block_size, flags, size, base_size, base_identity, \
                identity = HEADER.unpack(self._take(HEADER.size))
            if magic[:7] == MAGIC[:7] and magic != MAGIC:
                raise DeltaError("a delta in another version of the format "
                                 "(%s; this one reads %s)" % (
                                     magic.decode(errors="replace"),
                                     MAGIC.decode()))
            if magic != MAGIC:
                raise DeltaError("not a delta")
            if flags or block_size != blocks.BLOCK_SIZE:
                raise DeltaError("a delta of another version (flags %d, "
                                 "blocks of %d bytes)" % (flags, block_size))
            if base_size != self.base_size:
                raise DeltaError("made for a base of %d bytes; this base "
                                 "has %d" % (base_size, self.base_size))
            self.size = size
            self.base_identity, self.identity = base_identity, identity
            return ("header", size, base_size)
        if self._data_left:
            if not self._buffer:
                return None
            piece = self._take(min(self._data_left, len(self._buffer)))
            offset = self._next - self._data_left
            self._data_left -= len(piece)
            return ("data", offset, piece)
        if not self._buffer:
            return None
        if self._buffer[0] == END:
            return self._end()
        return self._record()

    def _end(self):
        if len(self._buffer) < 1 + TRAILER_DIGEST:
            return None
        self._take(1)
        expected = self._digest.digest()
        found = bytes(self._buffer[:TRAILER_DIGEST])
        del self._buffer[:TRAILER_DIGEST]
        if found != expected:
            raise DeltaError("the delta's digest does not match its bytes: "
                             "it was damaged")
        if self._next != self.size:
            raise DeltaError("the delta ends at byte %d of a %d-byte file"
                             % (self._next, self.size))
        self.finished = True
        return ("end",)

    def _record(self):
        op = self._buffer[0]
        need = RECORD.size + (BASE_OFFSET.size if op == COPY else 0)
        if op not in (ZERO, COPY, DATA):
            raise DeltaError("unknown record %d at byte %d of the file"
                             % (op, self._next))
        if len(self._buffer) < need:
            return None
        _, offset, length = RECORD.unpack(self._take(RECORD.size))
        if offset != self._next:
            raise DeltaError("a record for byte %d where byte %d comes "
                             "next" % (offset, self._next))
        if length == 0 or length > self.size - offset:
            raise DeltaError("a record of %d bytes at byte %d of a "
                             "%d-byte file" % (length, offset, self.size))
        self._next = offset + length
        if op == ZERO:
            return ("zero", offset, length)
        if op == DATA:
            if length > MAX_DATA_RUN:
                raise DeltaError("a data record of %d bytes (at most %d)"
                                 % (length, MAX_DATA_RUN))
            self._data_left = length
            return self._step()
        base_offset, = BASE_OFFSET.unpack(self._take(BASE_OFFSET.size))
        if base_offset > self.base_size or \
                length > self.base_size - base_offset:
            raise DeltaError("a copy of bytes %d-%d of a %d-byte base" % (
                base_offset, base_offset + length, self.base_size))
        return ("copy", offset, length, base_offset)
