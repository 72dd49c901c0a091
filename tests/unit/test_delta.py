# SPDX-License-Identifier: Apache-2.0
"""Delta transfer: block signatures, the delta format, making and applying.

A delta is what crosses the DTN link instead of a whole new image, and
what the destination rebuilds the image from: so a round trip must end
byte-identical for every shape of change (rewritten, moved, appended,
cut, zeroed blocks), a delta must stay as small as the change, and
anything that is not a well-formed delta for this very base -- damaged,
cut short, made for another base, hostile with a valid digest -- must be
refused without leaving a file behind.  Also the image-name families
that pick a base, and the ``gvfs-meta`` subcommands the conductor runs.
"""

import hashlib
import json
import os
import random
import struct

import pytest

from gvfs_openstack.cmd import meta
from gvfs_openstack.delta import apply
from gvfs_openstack.delta import blocks
from gvfs_openstack.delta import codec
from gvfs_openstack.delta import make
from gvfs_openstack.delta import statuses
from gvfs_openstack.migration import delta as migration_delta

BLOCK = blocks.BLOCK_SIZE
KIB = 1024
MIB = 1024 * KIB
HASH = "sha512"
HEADER_BYTES = codec.HEADER.size          # 96
RECORD_BYTES = codec.RECORD.size          # 17 (ZERO, DATA)
COPY_BYTES = RECORD_BYTES + 8             # 25
END_BYTES = 1 + codec.TRAILER_DIGEST      # 33
NAMES = {codec.ZERO: "zero", codec.COPY: "copy", codec.DATA: "data"}


def _rng(seed):
    return random.Random(seed)


def _put(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _sha(data):
    return hashlib.sha512(data).hexdigest()


def _events(delta, base_size, piece=None):
    """The parser's events, fed whole or ``piece`` bytes at a time.

    Fed whole, each DATA record's bytes come in one event; fed in pieces,
    the data events that follow each other are joined.
    """
    parser = codec.DeltaParser(base_size)
    if piece is None:
        events = parser.feed(delta)
        parser.close()
        return events
    raw = []
    for at in range(0, len(delta), piece):
        raw += parser.feed(delta[at:at + piece])
    parser.close()
    events = []
    for event in raw:
        if event[0] == "data" and events and events[-1][0] == "data" and \
                events[-1][1] + len(events[-1][2]) == event[1]:
            events[-1] = ("data", events[-1][1], events[-1][2] + event[2])
        else:
            events.append(event)
    return events


def _runs(delta, base_size):
    """The records of a delta as ``(kind, offset, length, base_offset)``."""
    runs = []
    for event in _events(delta, base_size):
        if event[0] == "data":
            runs.append(("data", event[1], len(event[2]), None))
        elif event[0] == "zero":
            runs.append(("zero", event[1], event[2], None))
        elif event[0] == "copy":
            runs.append(event)
    return runs


def _named(plan):
    return [(NAMES[op], offset, length, base_offset)
            for op, offset, length, base_offset in plan]


def _hand_made(size, base_size, *parts, end=True, identities=None):
    """A delta written by hand, its trailer digest valid for its bytes."""
    trailer = codec.Trailer()
    out = trailer(codec.header(size, base_size,
                               *(identities or (bytes(32), bytes(32)))))
    for part in parts:
        out += trailer(part)
    if end:
        out += trailer.end()
    return out


def _round_trip(tmp_path, base_data, new_data):
    """Delta of new against base, applied and checked.

    Returns the stats, the delta's bytes and the output's path.
    """
    base = _put(tmp_path / "base.img", base_data)
    new = _put(tmp_path / "new.img", new_data)
    delta = str(tmp_path / "new.delta")
    output = str(tmp_path / "out.img")
    stats = make.make(new, blocks.ensure(base), delta)
    assert apply.apply(base, delta, output, HASH, _sha(new_data),
                       base_signature=blocks.cached(base)) == len(new_data)
    assert _read(output) == new_data
    # Signed from the base's signature and the delta's own bytes alone.
    assert blocks.cached(output) == blocks.compute(output)
    # Checked by the signatures alone: the same file.
    by_signature = str(tmp_path / "by-signature.img")
    assert apply.apply(base, delta, by_signature,
                       base_signature=blocks.cached(base)) == len(new_data)
    assert _read(by_signature) == new_data
    assert blocks.cached(by_signature) == blocks.compute(by_signature)
    assert stats.size == len(new_data)
    assert stats.data_bytes + stats.copied_bytes + stats.zero_bytes == \
        len(new_data)
    assert stats.delta_bytes == os.path.getsize(delta)
    return stats, _read(delta), output


# -- make + apply ---------------------------------------------------------


def test_three_per_cent_rewritten_blocks_make_a_three_per_cent_delta(
        tmp_path):
    rng = _rng(3)
    size = 4 * MIB
    base = rng.randbytes(size)
    new = bytearray(base)
    changed = sorted(rng.sample(range(size // BLOCK), 31))  # 3.03%
    for number in changed:
        new[number * BLOCK:(number + 1) * BLOCK] = rng.randbytes(BLOCK)
    stats, delta, _ = _round_trip(tmp_path, base, bytes(new))
    assert stats.data_bytes == 31 * BLOCK
    assert stats.copied_bytes == size - 31 * BLOCK
    assert stats.zero_bytes == 0
    assert 0.025 * size <= stats.delta_bytes <= 0.04 * size
    data_runs = [r for r in _runs(delta, size) if r[0] == "data"]
    covered = sorted(offset // BLOCK + i for _, offset, length, _ in data_runs
                     for i in range(length // BLOCK))
    assert covered == changed
    # Everything else comes from the same offset of the base.
    assert all(r[1] == r[3] for r in _runs(delta, size) if r[0] == "copy")


def test_swapped_regions_are_copied_from_where_they_were(tmp_path):
    rng = _rng(4)
    size = MIB
    base = rng.randbytes(size)
    a, b, n = 0, 512 * KIB, 64 * KIB
    new = base[b:b + n] + base[a + n:b] + base[a:a + n] + base[b + n:]
    stats, delta, _ = _round_trip(tmp_path, base, new)
    assert _runs(delta, size) == [
        ("copy", 0, n, b),
        ("copy", n, b - n, n),
        ("copy", b, n, 0),
        ("copy", b + n, size - b - n, b + n),
    ]
    assert stats.data_bytes == 0
    assert stats.copied_bytes == size
    assert stats.delta_bytes == HEADER_BYTES + 4 * COPY_BYTES + END_BYTES


def test_identical_file_is_one_copy_record(tmp_path):
    base = _rng(5).randbytes(300 * KIB)
    stats, delta, _ = _round_trip(tmp_path, base, base)
    assert _runs(delta, len(base)) == [("copy", 0, len(base), 0)]
    assert stats.delta_bytes == HEADER_BYTES + COPY_BYTES + END_BYTES


def test_unchanged_partial_last_block_is_copied(tmp_path):
    rng = _rng(6)
    size = 10 * BLOCK + 1000
    base = rng.randbytes(size)
    new = base[:3 * BLOCK] + rng.randbytes(BLOCK) + base[4 * BLOCK:]
    stats, delta, _ = _round_trip(tmp_path, base, new)
    assert _runs(delta, size) == [
        ("copy", 0, 3 * BLOCK, 0),
        ("data", 3 * BLOCK, BLOCK, None),
        ("copy", 4 * BLOCK, 6 * BLOCK + 1000, 4 * BLOCK),
    ]
    assert stats.data_bytes == BLOCK


def test_changed_partial_last_block_is_data(tmp_path):
    rng = _rng(7)
    size = 10 * BLOCK + 1000
    base = rng.randbytes(size)
    new = base[:-1000] + rng.randbytes(1000)
    stats, delta, _ = _round_trip(tmp_path, base, new)
    assert _runs(delta, size) == [
        ("copy", 0, 10 * BLOCK, 0),
        ("data", 10 * BLOCK, 1000, None),
    ]
    assert stats.data_bytes == 1000
    assert stats.delta_bytes == (HEADER_BYTES + COPY_BYTES + RECORD_BYTES +
                                 1000 + END_BYTES)


def test_empty_new_file(tmp_path):
    base = _rng(8).randbytes(200 * KIB)
    stats, delta, output = _round_trip(tmp_path, base, b"")
    assert _runs(delta, len(base)) == []
    assert stats.as_dict() == {
        "size": 0, "data_bytes": 0, "copied_bytes": 0, "zero_bytes": 0,
        "delta_bytes": HEADER_BYTES + END_BYTES, "written": True,
        "base_identity": blocks.cached(str(tmp_path / "base.img"))
        .identity().hex()}
    assert os.path.getsize(output) == 0


def test_new_file_from_an_empty_base_is_all_data(tmp_path):
    new = _rng(9).randbytes(100 * KIB + 5)
    stats, delta, _ = _round_trip(tmp_path, b"", new)
    assert _runs(delta, 0) == [("data", 0, len(new), None)]
    assert stats.data_bytes == len(new)


def test_new_file_longer_than_the_base(tmp_path):
    rng = _rng(10)
    base = rng.randbytes(8 * BLOCK + 1000)
    new = base + rng.randbytes(5000)
    stats, delta, _ = _round_trip(tmp_path, base, new)
    # The base's partial block grew into a whole one: it is new data.
    assert _runs(delta, len(base)) == [
        ("copy", 0, 8 * BLOCK, 0),
        ("data", 8 * BLOCK, 6000, None),
    ]
    assert stats.data_bytes == 6000


def test_new_file_shorter_than_the_base(tmp_path):
    base = _rng(11).randbytes(300 * KIB)
    new = base[:5 * BLOCK + 123]
    stats, delta, _ = _round_trip(tmp_path, base, new)
    assert _runs(delta, len(base)) == [
        ("copy", 0, 5 * BLOCK, 0),
        ("data", 5 * BLOCK, 123, None),
    ]
    assert stats.data_bytes == 123


def test_zero_runs_are_zero_records_and_stay_holes(tmp_path):
    rng = _rng(12)
    base = rng.randbytes(2 * MIB)
    hole, tail = MIB, 256 * KIB + 100
    new = (base[:512 * KIB] + bytes(hole) + base[1536 * KIB:] + bytes(tail))
    stats, delta, output = _round_trip(tmp_path, base, new)
    assert _runs(delta, len(base)) == [
        ("copy", 0, 512 * KIB, 0),
        ("zero", 512 * KIB, hole, None),
        ("copy", 1536 * KIB, 512 * KIB, 1536 * KIB),
        ("zero", 2 * MIB, tail, None),
    ]
    assert stats.zero_bytes == hole + tail
    assert stats.delta_bytes == (HEADER_BYTES + 2 * COPY_BYTES +
                                 2 * RECORD_BYTES + END_BYTES)
    st = os.stat(output)
    assert st.st_size == len(new)
    # Only the 1 MiB of copied data is allocated (give or take metadata).
    assert st.st_blocks * 512 < st.st_size - hole
    assert st.st_blocks * 512 <= MIB + 64 * KIB


def test_zero_blocks_of_the_base_are_not_copied(tmp_path):
    base = bytes(4 * BLOCK) + _rng(13).randbytes(4 * BLOCK)
    stats, delta, _ = _round_trip(tmp_path, base, base)
    assert _runs(delta, len(base)) == [
        ("zero", 0, 4 * BLOCK, None),
        ("copy", 4 * BLOCK, 4 * BLOCK, 4 * BLOCK),
    ]
    assert stats.zero_bytes == 4 * BLOCK


def test_long_data_runs_are_split_end_to_end(tmp_path, monkeypatch):
    monkeypatch.setattr(codec, "MAX_DATA_RUN", 4 * BLOCK)
    rng = _rng(14)
    base = rng.randbytes(4 * BLOCK)
    new = base + rng.randbytes(10 * BLOCK + 7)
    stats, delta, _ = _round_trip(tmp_path, base, new)
    assert _runs(delta, len(base)) == [
        ("copy", 0, 4 * BLOCK, 0),
        ("data", 4 * BLOCK, 4 * BLOCK, None),
        ("data", 8 * BLOCK, 4 * BLOCK, None),
        ("data", 12 * BLOCK, 2 * BLOCK + 7, None),
    ]
    assert stats.data_bytes == 10 * BLOCK + 7


def test_make_leaves_only_the_delta_and_the_signatures(tmp_path):
    rng = _rng(15)
    base = _put(tmp_path / "base.img", rng.randbytes(64 * KIB))
    new = _put(tmp_path / "new.img", rng.randbytes(64 * KIB))
    make.make(new, blocks.ensure(base), str(tmp_path / "new.delta"))
    assert sorted(os.listdir(tmp_path)) == [
        ".gvfs-meta.base.img.blocks", ".gvfs-meta.new.img.blocks",
        "base.img", "new.delta", "new.img"]


# -- codec.plan -----------------------------------------------------------


def _signature(digests, size=None):
    """A Signature of the given block digests (no file needed)."""
    return blocks.Signature(len(digests) * BLOCK if size is None else size,
                            0, b"".join(digests))


def _d(n):
    """A made-up non-zero block digest."""
    return struct.pack(">QQ", 1, n)


Z = blocks.ZERO_DIGEST


def test_plan_joins_copies_of_consecutive_base_blocks():
    base = _signature([_d(i) for i in range(8)])
    new = _signature([_d(4), _d(5), _d(6), _d(0), _d(1), _d(7)])
    assert _named(codec.plan(new, base)) == [
        ("copy", 0, 3 * BLOCK, 4 * BLOCK),
        ("copy", 3 * BLOCK, 2 * BLOCK, 0),
        ("copy", 5 * BLOCK, BLOCK, 7 * BLOCK),
    ]


def test_plan_does_not_join_repeated_copies_of_one_block():
    base = _signature([_d(1), _d(2)])
    new = _signature([_d(1), _d(1), _d(1)])
    assert _named(codec.plan(new, base)) == [
        ("copy", 0, BLOCK, 0),
        ("copy", BLOCK, BLOCK, 0),
        ("copy", 2 * BLOCK, BLOCK, 0),
    ]


def test_plan_prefers_the_block_at_the_same_offset():
    base = _signature([_d(1), _d(2), _d(1)])
    new = _signature([_d(9), _d(9), _d(1)])
    assert _named(codec.plan(new, base)) == [
        ("data", 0, 2 * BLOCK, None),
        ("copy", 2 * BLOCK, BLOCK, 2 * BLOCK),
    ]


def test_plan_makes_one_zero_run_of_a_zero_region():
    base = _signature([_d(i) for i in range(4)])
    new = _signature([_d(0)] + [Z] * 100 + [_d(3), Z, Z])
    assert _named(codec.plan(new, base)) == [
        ("copy", 0, BLOCK, 0),
        ("zero", BLOCK, 100 * BLOCK, None),
        ("copy", 101 * BLOCK, BLOCK, 3 * BLOCK),
        ("zero", 102 * BLOCK, 2 * BLOCK, None),
    ]


def test_plan_splits_data_runs_at_max_data_run():
    per_run = codec.MAX_DATA_RUN // BLOCK
    new = _signature([_d(i) for i in range(2 * per_run + 100)])
    base = _signature([])
    assert _named(codec.plan(new, base)) == [
        ("data", 0, codec.MAX_DATA_RUN, None),
        ("data", codec.MAX_DATA_RUN, codec.MAX_DATA_RUN, None),
        ("data", 2 * codec.MAX_DATA_RUN, 100 * BLOCK, None),
    ]


def test_plan_of_a_partial_last_block():
    base = _signature([_d(1), _d(2)], size=BLOCK + 10)
    new = _signature([_d(1), _d(2)], size=BLOCK + 10)
    assert _named(codec.plan(new, base)) == [("copy", 0, BLOCK + 10, 0)]
    shorter = _signature([_d(1), _d(3)], size=BLOCK + 5)
    assert _named(codec.plan(shorter, base)) == [
        ("copy", 0, BLOCK, 0), ("data", BLOCK, 5, None)]


def test_plan_of_an_empty_file_is_empty():
    assert codec.plan(_signature([]), _signature([_d(1)])) == []


def _plan_block_by_block(new, base):
    """The plan as :func:`codec.plan`'s docstring says, block by block.

    The oracle for the planner that compares spans at once.
    """
    where = {}
    for number in range(base.count):
        found = base.block(number)
        if found != Z and found not in where:
            where[found] = number * BLOCK
    runs = []
    for number in range(new.count):
        offset = number * BLOCK
        length = min(BLOCK, new.size - offset)
        found, at = new.block(number), None
        if found == Z:
            op = codec.ZERO
        elif number < base.count and base.block(number) == found and \
                base.block_length(number) == length:
            op, at = codec.COPY, offset
        elif found in where and where[found] + length <= base.size:
            op, at = codec.COPY, where[found]
        else:
            op = codec.DATA
        last = runs[-1] if runs else None
        if last and last[0] == op and (
                op == codec.ZERO or
                (op == codec.COPY and last[3] + last[2] == at) or
                (op == codec.DATA and last[2] + length <=
                 codec.MAX_DATA_RUN)):
            runs[-1] = (op, last[1], last[2] + length, last[3])
        else:
            runs.append((op, offset, length, at))
    return runs


def _random_pair(rng):
    """Two signatures: a base and a version of it.

    With every kind of change: rewritten, zeroed, moved, repeated, cut
    and appended blocks, and partial last blocks.
    """
    count = rng.choice([0, 1, 2, 17, 33, 511, 512, 513, 1500, 3000])
    kinds = rng.randint(1, count + 3)
    if rng.random() < 0.5:
        base = [_d(rng.randrange(1, kinds + 1)) if rng.random() < 0.9
                else Z for _ in range(count)]
    else:
        base = [_d(n + 1) if rng.random() < 0.9 else Z
                for n in range(count)]
    new = list(base)
    for _ in range(rng.randint(0, 40)):
        if new:
            new[rng.randrange(len(new))] = rng.choice(
                [Z, _d(rng.randrange(1, kinds + 6))])
    if rng.random() < 0.3:
        new = new[:rng.randint(0, len(new))]
    if rng.random() < 0.3:
        new += [_d(rng.randrange(1, kinds + 1)) for _ in range(30)]

    def size(digests):
        cut = rng.randrange(1, BLOCK) if digests and rng.random() < 0.4 \
            else 0
        return len(digests) * BLOCK - cut

    return _signature(new, size(new)), _signature(base, size(base))


@pytest.mark.parametrize("seed", range(6))
def test_plan_by_spans_is_the_plan_block_by_block(seed):
    rng = _rng(seed)
    for _ in range(100):
        new, base = _random_pair(rng)
        assert codec.plan(new, base) == _plan_block_by_block(new, base)


def test_plan_of_an_unchanged_image_compares_spans_not_blocks(monkeypatch):
    base = _signature([_d(n + 1) for n in range(10 * codec.SPAN)])
    looked_up = []
    monkeypatch.setattr(blocks.Signature, "block",
                        lambda self, n: looked_up.append(n))
    assert _named(codec.plan(base, base)) == [
        ("copy", 0, 10 * codec.SPAN * BLOCK, 0)]
    assert looked_up == []


# -- DeltaParser ----------------------------------------------------------


@pytest.fixture
def sample(tmp_path):
    """A real delta with every kind of record: (delta, base, new)."""
    rng = _rng(20)
    base = rng.randbytes(16 * BLOCK)
    new = (base[2 * BLOCK:4 * BLOCK] + rng.randbytes(2 * BLOCK) +
           bytes(2 * BLOCK) + base[:BLOCK] + rng.randbytes(100))
    base_path = _put(tmp_path / "base.img", base)
    new_path = _put(tmp_path / "new.img", new)
    make.make(new_path, blocks.ensure(base_path), str(tmp_path / "d"))
    return _read(tmp_path / "d"), base, new


def test_sample_delta_is_what_the_format_says(sample):
    delta, base, new = sample
    assert _events(delta, len(base)) == [
        ("header", len(new), len(base)),
        ("copy", 0, 2 * BLOCK, 2 * BLOCK),
        ("data", 2 * BLOCK, new[2 * BLOCK:4 * BLOCK]),
        ("zero", 4 * BLOCK, 2 * BLOCK),
        ("copy", 6 * BLOCK, BLOCK, 0),
        ("data", 7 * BLOCK, new[7 * BLOCK:]),
        ("end",),
    ]
    assert len(delta) == (HEADER_BYTES + 2 * COPY_BYTES + 3 * RECORD_BYTES +
                          2 * BLOCK + 100 + END_BYTES)


@pytest.mark.parametrize("piece", [1, 7, 4096, 1 << 20])
def test_parser_events_do_not_depend_on_how_it_is_fed(sample, piece):
    delta, base, _ = sample
    assert _events(delta, len(base), piece) == _events(delta, len(base))


def test_parser_data_events_of_one_byte_feeds_are_in_order(sample):
    delta, base, new = sample
    parser = codec.DeltaParser(len(base))
    rebuilt = bytearray(len(new))
    for at in range(len(delta)):
        for event in parser.feed(delta[at:at + 1]):
            if event[0] == "data":
                assert len(event[2]) == 1
                rebuilt[event[1]] = event[2][0]
    parser.close()
    assert parser.finished
    assert rebuilt[2 * BLOCK:4 * BLOCK] == new[2 * BLOCK:4 * BLOCK]
    assert rebuilt[7 * BLOCK:] == new[7 * BLOCK:]


def _refuse(delta, base_size, match=None):
    parser = codec.DeltaParser(base_size)
    with pytest.raises(codec.DeltaError, match=match):
        events = parser.feed(delta)
        assert ("end",) not in events
        parser.close()


def test_every_flipped_byte_is_refused(sample):
    delta, base, _ = sample
    for mask in (0x01, 0x80, 0xff):
        for at in range(len(delta)):
            damaged = bytearray(delta)
            damaged[at] ^= mask
            parser = codec.DeltaParser(len(base))
            try:
                events = parser.feed(bytes(damaged))
                parser.close()
            except codec.DeltaError:
                continue
            pytest.fail("byte %d ^ %#x accepted: %r" % (
                at, mask, events[-1:]))


@pytest.mark.parametrize("where", ["magic", "header size", "record op",
                                   "record length", "copy base offset",
                                   "data", "end op", "digest"])
def test_flipped_bytes_are_refused_by_feed_or_close(sample, where):
    delta, base, _ = sample
    at = {"magic": 0, "header size": 20, "record op": HEADER_BYTES,
          "record length": HEADER_BYTES + 16,
          "copy base offset": HEADER_BYTES + 24,
          "data": HEADER_BYTES + COPY_BYTES + RECORD_BYTES + 1000,
          "end op": len(delta) - END_BYTES,
          "digest": len(delta) - 1}[where]
    damaged = bytearray(delta)
    damaged[at] ^= 0x04
    _refuse(bytes(damaged), len(base))


def test_bad_magic_is_refused():
    bad = codec.HEADER.pack(b"GVFSBLK1", BLOCK, 0, 0, 0, bytes(32),
                            bytes(32))
    trailer = codec.Trailer()
    _refuse(trailer(bad) + trailer.end(), 0, match="not a delta")


def test_a_delta_of_the_first_format_is_refused_by_name():
    old = struct.pack(">8sIIQQ", b"GVFSDLT1", BLOCK, 0, 0, 0) + bytes(64)
    trailer = codec.Trailer()
    _refuse(trailer(old) + trailer.end(), 0,
            match="another version of the format .GVFSDLT1")


@pytest.mark.parametrize("block_size,flags", [(8192, 0), (BLOCK, 1)])
def test_another_version_of_the_format_is_refused(block_size, flags):
    bad = codec.HEADER.pack(codec.MAGIC, block_size, flags, 0, 0, bytes(32),
                            bytes(32))
    trailer = codec.Trailer()
    _refuse(trailer(bad) + trailer.end(), 0, match="another version")


def test_a_delta_for_a_base_of_another_size_is_refused(sample):
    delta, base, _ = sample
    _refuse(delta, len(base) + 1, match="made for a base")
    _refuse(delta, len(base) - BLOCK, match="made for a base")


@pytest.mark.parametrize("cut", [1, END_BYTES - 1, END_BYTES, END_BYTES + 1,
                                 500, 4000])
def test_a_delta_cut_short_is_refused_at_close(sample, cut):
    delta, base, _ = sample
    parser = codec.DeltaParser(len(base))
    events = parser.feed(delta[:-cut])
    assert events[0] == ("header", 7 * BLOCK + 100, len(base))
    with pytest.raises(codec.DeltaError, match="cut short"):
        parser.close()


def test_no_bytes_at_all_is_refused_at_close():
    parser = codec.DeltaParser(0)
    assert parser.feed(b"") == []
    with pytest.raises(codec.DeltaError, match="cut short"):
        parser.close()


def test_bytes_after_the_end_are_refused(sample):
    delta, base, _ = sample
    _refuse(delta + b"\0", len(base), match="after the end")
    parser = codec.DeltaParser(len(base))
    assert parser.feed(delta)[-1] == ("end",)
    with pytest.raises(codec.DeltaError, match="after the end"):
        parser.feed(b"x")
    assert parser.feed(b"") == []


def test_a_copy_beyond_the_base_is_refused_with_a_valid_digest():
    base_size = 2 * BLOCK
    # The last byte that may be copied: accepted.
    fits = _hand_made(BLOCK, base_size,
                      codec.record(codec.COPY, 0, BLOCK, BLOCK))
    assert _events(fits, base_size) == [
        ("header", BLOCK, base_size), ("copy", 0, BLOCK, BLOCK), ("end",)]
    for base_offset in (BLOCK + 1, base_size, base_size + 1, 2 ** 64 - 1):
        bad = _hand_made(BLOCK, base_size,
                         codec.record(codec.COPY, 0, BLOCK, base_offset))
        _refuse(bad, base_size, match="copy of bytes")


def test_a_record_for_the_wrong_offset_is_refused_with_a_valid_digest():
    size = 2 * BLOCK
    ok = codec.record(codec.ZERO, 0, BLOCK)
    for offset in (0, BLOCK - 1, BLOCK + 1, size):
        bad = _hand_made(size, 0, ok, codec.record(codec.ZERO, offset, BLOCK))
        _refuse(bad, 0, match="where byte %d comes next" % BLOCK)
    _refuse(_hand_made(size, 0, codec.record(codec.ZERO, 1, BLOCK)), 0,
            match="a record for byte 1 where byte 0")


@pytest.mark.parametrize("length", [0, 2 * BLOCK + 1, 2 ** 64 - 1])
def test_a_record_of_a_bad_length_is_refused_with_a_valid_digest(length):
    bad = _hand_made(2 * BLOCK, 0, codec.record(codec.ZERO, 0, length))
    _refuse(bad, 0, match="a record of %d bytes" % length)


def test_an_unknown_record_is_refused_with_a_valid_digest():
    bad = _hand_made(BLOCK, 0, struct.pack(">BQQ", 4, 0, BLOCK))
    _refuse(bad, 0, match="unknown record 4")


def test_a_too_long_data_record_is_refused_before_its_data():
    size = 2 * codec.MAX_DATA_RUN
    bad = _hand_made(size, 0, codec.record(codec.DATA, 0,
                                           codec.MAX_DATA_RUN + BLOCK),
                     end=False)
    _refuse(bad, 0, match="a data record of")


def test_an_end_before_the_end_of_the_file_is_refused():
    bad = _hand_made(2 * BLOCK, 0, codec.record(codec.ZERO, 0, BLOCK))
    _refuse(bad, 0, match="ends at byte 4096 of a 8192-byte file")


def test_a_wrong_digest_is_refused():
    good = _hand_made(BLOCK, 0, codec.record(codec.ZERO, 0, BLOCK))
    assert _events(good, 0)[-1] == ("end",)
    bad = good[:-1] + bytes([good[-1] ^ 1])
    _refuse(bad, 0, match="damaged")
    # A valid digest over other bytes is no better.
    other = _hand_made(BLOCK, 0, codec.record(codec.ZERO, 0, BLOCK - 1),
                       codec.record(codec.ZERO, BLOCK - 1, 1))
    _refuse(good[:-codec.TRAILER_DIGEST] + other[-codec.TRAILER_DIGEST:], 0,
            match="damaged")


# -- apply ----------------------------------------------------------------


@pytest.fixture
def files(tmp_path):
    """base, new, a delta of one against the other, and their bytes."""
    rng = _rng(30)
    base_data = rng.randbytes(512 * KIB + 300)
    new_data = bytearray(base_data)
    new_data[100 * KIB:108 * KIB] = rng.randbytes(8 * KIB)
    new_data[300 * KIB:400 * KIB] = bytes(100 * KIB)
    new_data = bytes(new_data)
    base = _put(tmp_path / "base.img", base_data)
    new = _put(tmp_path / "new.img", new_data)
    delta = str(tmp_path / "new.delta")
    make.make(new, blocks.ensure(base), delta)
    return {"base": base, "new": new, "delta": delta,
            "output": str(tmp_path / "out.img"), "new_data": new_data,
            "base_data": base_data}


def test_apply_replaces_an_existing_output(files):
    _put(files["output"], b"\x55" * (3 * MIB))
    assert apply.apply(files["base"], files["delta"], files["output"], HASH,
                       _sha(files["new_data"])) == len(files["new_data"])
    assert _read(files["output"]) == files["new_data"]


def test_apply_checks_other_hash_algorithms(files):
    expected = hashlib.sha256(files["new_data"]).hexdigest()
    apply.apply(files["base"], files["delta"], files["output"], "sha256",
                expected)
    assert _read(files["output"]) == files["new_data"]


@pytest.mark.parametrize("at", [0, 40, 60, 1000, -1])
def test_apply_of_a_damaged_delta_is_rejected_and_leaves_no_output(
        files, at):
    damaged = bytearray(_read(files["delta"]))
    damaged[at] ^= 0x10
    _put(files["delta"], bytes(damaged))
    with pytest.raises(apply.Rejected):
        apply.apply(files["base"], files["delta"], files["output"], HASH,
                    _sha(files["new_data"]))
    assert not os.path.exists(files["output"])


def test_apply_of_a_truncated_delta_is_rejected(files):
    _put(files["delta"], _read(files["delta"])[:-10])
    with pytest.raises(apply.Rejected, match="cut short"):
        apply.apply(files["base"], files["delta"], files["output"], HASH,
                    _sha(files["new_data"]))
    assert not os.path.exists(files["output"])


def test_apply_with_another_expected_hash_is_rejected(files):
    with pytest.raises(apply.Rejected, match="sha512"):
        apply.apply(files["base"], files["delta"], files["output"], HASH,
                    _sha(files["new_data"] + b"x"))
    assert not os.path.exists(files["output"])


def test_apply_rejection_removes_an_existing_output(files):
    _put(files["output"], b"old")
    with pytest.raises(apply.Rejected):
        apply.apply(files["base"], files["delta"], files["output"], HASH,
                    "0" * 128)
    assert not os.path.exists(files["output"])


def test_apply_with_an_unknown_hash_algorithm_is_rejected(files):
    with pytest.raises(apply.Rejected, match="unknown hash algorithm"):
        apply.apply(files["base"], files["delta"], files["output"],
                    "no-such-hash", _sha(files["new_data"]))
    assert not os.path.exists(files["output"])


def test_apply_against_a_changed_base_is_rejected(files):
    changed = bytearray(files["base_data"])
    changed[0] ^= 1          # Same size, other bytes: the hash says no.
    _put(files["base"], bytes(changed))
    with pytest.raises(apply.Rejected, match="rebuilt file's sha512"):
        apply.apply(files["base"], files["delta"], files["output"], HASH,
                    _sha(files["new_data"]))
    assert not os.path.exists(files["output"])
    _put(files["base"], files["base_data"][:-1])   # Another size.
    with pytest.raises(apply.Rejected, match="made for a base"):
        apply.apply(files["base"], files["delta"], files["output"], HASH,
                    _sha(files["new_data"]))
    assert not os.path.exists(files["output"])


def test_apply_of_a_hostile_delta_with_a_valid_digest_is_rejected(files):
    size = len(files["base_data"])
    _put(files["delta"], _hand_made(
        BLOCK, size, codec.record(codec.COPY, 0, BLOCK, size - BLOCK + 1)))
    with pytest.raises(apply.Rejected, match="copy of bytes"):
        apply.apply(files["base"], files["delta"], files["output"], HASH,
                    _sha(files["base_data"][-BLOCK:]))
    assert not os.path.exists(files["output"])


def _by_signature(files):
    return apply.apply(files["base"], files["delta"], files["output"],
                       base_signature=blocks.cached(files["base"]))


def test_apply_by_signature_reads_no_byte_of_the_base(files, monkeypatch):
    preads = []
    real = os.pread
    monkeypatch.setattr(os, "pread", lambda fd, n, at: preads.append(n) or
                        real(fd, n, at))
    assert _by_signature(files) == len(files["new_data"])
    assert _read(files["output"]) == files["new_data"]
    assert preads == []      # Copies in the kernel, no hashing pass.


def test_apply_by_signature_needs_a_fresh_signature_of_the_base(files):
    os.unlink(blocks.signature_path(files["base"]))
    with pytest.raises(apply.Rejected, match="no block signature"):
        _by_signature(files)
    blocks.ensure(files["base"])
    os.utime(files["base"], ns=(1, 1))      # Stale now.
    with pytest.raises(apply.Rejected, match="no block signature"):
        _by_signature(files)
    assert not os.path.exists(files["output"])


def test_apply_by_signature_refuses_a_base_changed_and_signed_again(files):
    changed = bytearray(files["base_data"])
    changed[200 * KIB] ^= 1
    _put(files["base"], bytes(changed))
    blocks.ensure(files["base"])
    with pytest.raises(apply.Rejected, match="another version of the base"):
        _by_signature(files)
    assert not os.path.exists(files["output"])


def _refused_by_signature(files, identity, *records, match):
    """A hand-made delta of ``records`` is refused, leaving no output.

    Made against the base's signature, for a file said to have
    ``identity``.
    """
    size = len(files["base_data"])
    base = blocks.cached(files["base"]).identity()
    _put(files["delta"], _hand_made(size, size, *records,
                                    identities=(base, identity)))
    with pytest.raises(apply.Rejected, match=match):
        _by_signature(files)
    assert not os.path.exists(files["output"])


def test_apply_by_signature_refuses_what_the_delta_was_not_made_for(files):
    """A well-formed delta naming another result: its runs are checked."""
    size = len(files["base_data"])
    _refused_by_signature(
        files, blocks.compute(files["new"]).identity(),
        codec.record(codec.COPY, 0, size, 0), match="not the one the delta")


def test_apply_by_signature_of_runs_off_block_boundaries_is_refused(files):
    size = len(files["base_data"])
    _refused_by_signature(
        files, blocks.cached(files["base"]).identity(),
        codec.record(codec.COPY, 0, 100, 0),
        codec.record(codec.COPY, 100, size - 100, 100),
        match="not whole blocks")


def test_identity_is_of_the_bytes_not_the_copy():
    signature = blocks.Signature(BLOCK, 5, b"\x01" * 16)
    assert signature.identity() == blocks.Signature(
        BLOCK, 6, b"\x01" * 16).identity()
    assert signature.identity() != blocks.Signature(
        BLOCK - 1, 5, b"\x01" * 16).identity()
    assert signature.identity() != blocks.Signature(
        BLOCK, 5, b"\x02" * 16).identity()
    assert len(signature.identity()) == 32


# -- blocks ---------------------------------------------------------------


def test_block_digests():
    rng = _rng(40)
    block = rng.randbytes(BLOCK)
    assert blocks.digest(block) == hashlib.blake2b(
        block, digest_size=16).digest()
    assert blocks.digest(bytes(BLOCK)) == blocks.ZERO_DIGEST == bytes(16)
    assert blocks.digest(bytes(100)) == blocks.ZERO_DIGEST
    tail = rng.randbytes(100)
    data = block + bytes(BLOCK) + block + tail
    assert blocks.digests(data) == (
        blocks.digest(block) + blocks.ZERO_DIGEST + blocks.digest(block) +
        hashlib.blake2b(tail, digest_size=16).digest())
    assert blocks.digests(bytes(3 * BLOCK + 1)) == blocks.ZERO_DIGEST * 4
    assert blocks.digests(b"") == b""


def test_compute_describes_the_file(tmp_path):
    rng = _rng(41)
    data = rng.randbytes(3 * BLOCK) + bytes(2 * BLOCK) + rng.randbytes(10)
    path = _put(tmp_path / "f.img", data)
    signature = blocks.compute(path)
    st = os.stat(path)
    assert (signature.size, signature.mtime_ns) == (len(data),
                                                    st.st_mtime_ns)
    assert signature.count == 6
    assert signature.digests == blocks.digests(data)
    assert signature.block(3) == signature.block(4) == blocks.ZERO_DIGEST
    assert signature.block_length(5) == 10
    assert signature.block_length(0) == BLOCK


def test_compute_of_a_file_larger_than_one_read(tmp_path, monkeypatch):
    monkeypatch.setattr(blocks, "READ_SIZE", 2 * BLOCK)
    rng = _rng(42)
    data = rng.randbytes(5 * BLOCK + 3)
    path = _put(tmp_path / "f.img", data)
    assert blocks.compute(path).digests == blocks.digests(data)


def test_index_gives_the_first_offset_of_each_non_zero_block():
    block_a, block_b = _d(1), _d(2)
    signature = _signature([Z, block_a, block_b, block_a, Z])
    assert signature.index() == {block_a: BLOCK, block_b: 2 * BLOCK}


def test_signature_bytes_round_trip():
    signature = blocks.Signature(2 * BLOCK + 1, 123456789,
                                 _d(1) + Z + _d(3))
    data = signature.to_bytes()
    assert data[:8] == b"GVFSBLK1"
    assert len(data) == 32 + 3 * 16
    assert blocks.parse(data) == signature
    assert blocks.parse(memoryview(data)) == signature


def _signature_bytes(magic=blocks.MAGIC, block_size=BLOCK, digest_size=16,
                     size=BLOCK, body=None):
    head = struct.pack(">8sIIQQ", magic, block_size, digest_size, size, 7)
    return head + (_d(1) if body is None else body)


@pytest.mark.parametrize("data,match", [
    (b"", "shorter than its header"),
    (_signature_bytes()[:31], "shorter than its header"),
    (_signature_bytes(magic=b"GVFSBLK2"), "not a block signature"),
    (_signature_bytes(magic=b"GVFSDLT1"), "not a block signature"),
    (_signature_bytes(block_size=8192), "blocks of 8192 bytes"),
    (_signature_bytes(digest_size=32), "32-byte digests"),
    (_signature_bytes(body=b""), "0 digest bytes"),
    (_signature_bytes(body=_d(1)[:15]), "15 digest bytes"),
    (_signature_bytes(body=_d(1) + b"x"), "17 digest bytes"),
    (_signature_bytes(size=BLOCK + 1), "16 digest bytes for a file of 4097"),
    (_signature_bytes(size=0), "16 digest bytes for a file of 0"),
])
def test_parse_refuses_unusable_signatures(data, match):
    with pytest.raises(blocks.SignatureError, match=match):
        blocks.parse(data)
    assert issubclass(blocks.SignatureError, ValueError)


def test_signature_path_is_a_dot_file_next_to_the_file():
    assert blocks.signature_path("/srv/images/golden.img") == \
        "/srv/images/.gvfs-meta.golden.img.blocks"
    assert blocks.signature_path("golden.img") == \
        ".gvfs-meta.golden.img.blocks"


def test_ensure_writes_the_cache_next_to_the_file(tmp_path):
    data = _rng(43).randbytes(20 * BLOCK)
    path = _put(tmp_path / "g.img", data)
    signature = blocks.ensure(path)
    target = tmp_path / ".gvfs-meta.g.img.blocks"
    assert blocks.signature_path(path) == str(target)
    assert blocks.parse(_read(target)) == signature
    assert signature.digests == blocks.digests(data)
    assert blocks.cached(path) == signature
    assert sorted(os.listdir(tmp_path)) == [".gvfs-meta.g.img.blocks",
                                            "g.img"]


def test_ensure_reuses_a_fresh_cache(tmp_path):
    path = _put(tmp_path / "g.img", _rng(44).randbytes(2 * BLOCK))
    st = os.stat(path)
    # A cache for this size and mtime, whatever it says, is believed.
    planted = blocks.Signature(st.st_size, st.st_mtime_ns, _d(7) + _d(8))
    blocks.write(path, planted)
    inode = os.stat(blocks.signature_path(path)).st_ino
    assert blocks.ensure(path) == planted
    assert os.stat(blocks.signature_path(path)).st_ino == inode


def test_cached_is_none_when_the_file_changed(tmp_path):
    data = _rng(45).randbytes(4 * BLOCK)
    path = _put(tmp_path / "g.img", data)
    signature = blocks.ensure(path)
    st = os.stat(path)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert blocks.cached(path) is None
    # ensure() then makes it again, for the new mtime.
    again = blocks.ensure(path)
    assert again.mtime_ns == st.st_mtime_ns + 1
    assert again.digests == signature.digests
    assert blocks.cached(path) == again
    # Another size, same mtime: stale too.
    with open(path, "ab") as f:
        f.write(b"x")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    assert blocks.cached(path) is None


def test_cached_is_none_without_a_usable_cache(tmp_path):
    path = _put(tmp_path / "g.img", _rng(46).randbytes(BLOCK))
    assert blocks.cached(path) is None
    _put(blocks.signature_path(path), b"GVFSBLK1 but not really")
    assert blocks.cached(path) is None
    assert blocks.ensure(path).digests == blocks.digests(_read(path))


# -- gvfs-meta blocks / delta / patch -------------------------------------


def test_meta_blocks_prints_the_signature_paths(tmp_path, capsys):
    one = _put(tmp_path / "one.img", _rng(50).randbytes(3 * BLOCK))
    two = _put(tmp_path / "two.img", b"")
    assert meta.main(["blocks", one, two]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [blocks.signature_path(one),
                                blocks.signature_path(two)]
    assert blocks.parse(_read(blocks.signature_path(one))).digests == \
        blocks.digests(_read(one))
    assert blocks.parse(_read(blocks.signature_path(two))).size == 0
    inode = os.stat(blocks.signature_path(one)).st_ino
    assert meta.main(["blocks", one]) == 0
    assert os.stat(blocks.signature_path(one)).st_ino == inode


def test_meta_blocks_of_a_missing_file_fails_but_does_the_others(
        tmp_path, capsys):
    good = _put(tmp_path / "good.img", b"\1" * BLOCK)
    missing = str(tmp_path / "missing.img")
    assert meta.main(["blocks", missing, good]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [blocks.signature_path(good)]
    assert "gvfs-meta: %s:" % missing in captured.err


def test_meta_blocks_delta_patch_rebuild_the_file(tmp_path, capsys):
    rng = _rng(51)
    base_data = rng.randbytes(MIB)
    new_data = bytearray(base_data)
    new_data[200 * KIB:216 * KIB] = rng.randbytes(16 * KIB)
    new_data = bytes(new_data)
    there = tmp_path / "there"
    here = tmp_path / "here"
    there.mkdir()
    here.mkdir()
    base = _put(there / "base.img", base_data)
    new = _put(here / "new.img", new_data)

    assert meta.main(["blocks", base]) == 0
    signature = capsys.readouterr().out.splitlines()[-1]
    delta = str(here / "new.delta")
    assert meta.main(["delta", "--base-blocks", signature, "--output",
                      delta, "--", new]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats == {"size": MIB, "data_bytes": 16 * KIB,
                     "copied_bytes": MIB - 16 * KIB, "zero_bytes": 0,
                     "delta_bytes": os.path.getsize(delta), "written": True,
                     "base_identity": blocks.cached(base).identity().hex()}
    assert stats["delta_bytes"] == (HEADER_BYTES + 2 * COPY_BYTES +
                                    RECORD_BYTES + 16 * KIB + END_BYTES)
    # Larger than allowed: not written, and its size said all the same.
    os.unlink(delta)
    assert meta.main(["delta", "--base-blocks", signature, "--max-bytes",
                      str(stats["delta_bytes"] - 1), "--output", delta,
                      "--", new]) == 0
    assert json.loads(capsys.readouterr().out) == dict(stats, written=False)
    assert not os.path.exists(delta)
    assert meta.main(["delta", "--base-blocks", signature, "--max-bytes",
                      str(stats["delta_bytes"]), "--output", delta,
                      "--", new]) == 0
    assert json.loads(capsys.readouterr().out) == stats

    output = str(there / "staged.img")
    assert meta.main(["patch", "--base", base, "--delta", delta,
                      "--output", output, "--hash-algo", HASH,
                      "--hash", _sha(new_data)]) == 0
    assert _read(output) == new_data
    # The conductor's way: checked by the signatures the delta names.
    os.unlink(output)
    assert meta.main(["patch", "--base", base, "--delta", delta,
                      "--output", output]) == 0
    assert _read(output) == new_data


def _base_and_version(tmp_path):
    rng = _rng(53)
    base_data = rng.randbytes(64 * BLOCK)
    new_data = base_data[:10 * BLOCK] + rng.randbytes(BLOCK) + \
        base_data[11 * BLOCK:]
    return (_put(tmp_path / "base.img", base_data),
            _put(tmp_path / "new.img", new_data))


def test_meta_delta_against_a_copy_of_the_base_here(tmp_path, capsys):
    """The source's own copy of the base, by its cached signature.

    The JSON names the signature's identity, for the caller to compare
    with the one the other end has.
    """
    base, new = _base_and_version(tmp_path)
    identity = blocks.ensure(base).identity().hex()
    delta = str(tmp_path / "new.delta")
    assert meta.main(["delta", "--base", base, "--output", delta, "--",
                      new]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["data_bytes"], stats["base_identity"]) == (BLOCK,
                                                             identity)
    output = str(tmp_path / "out.img")
    assert meta.main(["patch", "--base", base, "--delta", delta,
                      "--output", output]) == 0
    assert _read(output) == _read(new)


@pytest.mark.parametrize("why", ["unsigned", "stale"])
def test_meta_delta_against_a_base_without_a_signature_here_says_so(
        tmp_path, capsys, why):
    base, new = _base_and_version(tmp_path)
    blocks.ensure(base)
    if why == "unsigned":
        os.unlink(blocks.signature_path(base))
    else:
        os.utime(base, ns=(1, 1))
    delta = str(tmp_path / "new.delta")
    assert meta.main(["delta", "--base", base, "--output", delta, "--",
                      new]) == statuses.BASE_UNKNOWN
    assert "%s has no block signature made since it last changed" % base \
        in capsys.readouterr().err
    assert not os.path.exists(delta)
    # It never reads the base to sign it.
    assert why != "unsigned" or \
        not os.path.exists(blocks.signature_path(base))


def test_meta_delta_with_a_bad_signature_fails(tmp_path, capsys):
    new = _put(tmp_path / "new.img", b"\1" * BLOCK)
    signature = _put(tmp_path / "base.blocks", b"not a signature at all")
    delta = str(tmp_path / "new.delta")
    assert meta.main(["delta", "--base-blocks", signature, "--output",
                      delta, new]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "gvfs-meta: delta of %s:" % new in captured.err
    assert not os.path.exists(delta)
    assert meta.main(["delta", "--base-blocks",
                      str(tmp_path / "missing"), "--output", delta,
                      new]) == 1
    assert not os.path.exists(delta)


def _patch(files, expected=None):
    return meta.main(["patch", "--base", files["base"], "--delta",
                      files["delta"], "--output", files["output"],
                      "--hash-algo", HASH, "--hash",
                      expected or _sha(files["new_data"])])


def test_meta_patch_succeeds(files, capsys):
    assert _patch(files) == 0
    assert _read(files["output"]) == files["new_data"]
    assert capsys.readouterr().err == ""


def test_meta_patch_with_another_hash_is_rejected(files, capsys):
    assert statuses.REJECTED == 3
    assert _patch(files, "ab" * 64) == statuses.REJECTED
    assert "gvfs-meta: delta rejected:" in capsys.readouterr().err
    assert not os.path.exists(files["output"])


def test_meta_patch_by_signature_of_a_stale_base_is_rejected(files, capsys):
    os.utime(files["base"], ns=(1, 1))
    assert meta.main(["patch", "--base", files["base"], "--delta",
                      files["delta"], "--output", files["output"]]) == \
        statuses.REJECTED
    assert "no block signature" in capsys.readouterr().err
    assert not os.path.exists(files["output"])


def test_meta_patch_hash_without_its_algorithm_is_a_usage_error(files,
                                                                capsys):
    assert meta.main(["patch", "--base", files["base"], "--delta",
                      files["delta"], "--output", files["output"],
                      "--hash", "ab"]) == 2
    assert "go together" in capsys.readouterr().err
    assert not os.path.exists(files["output"])


def test_meta_patch_of_a_damaged_delta_is_rejected(files, capsys):
    damaged = bytearray(_read(files["delta"]))
    damaged[len(damaged) // 2] ^= 1
    _put(files["delta"], bytes(damaged))
    assert _patch(files) == statuses.REJECTED
    assert "damaged" in capsys.readouterr().err
    assert not os.path.exists(files["output"])


def test_meta_patch_without_its_files_fails(files, capsys):
    os.unlink(files["base"])
    assert _patch(files) == 1
    assert "gvfs-meta: patch of %s:" % files["output"] in \
        capsys.readouterr().err
    assert not os.path.exists(files["output"])


def test_meta_patch_without_a_delta_fails_and_leaves_no_output(files,
                                                               capsys):
    os.unlink(files["delta"])
    assert _patch(files) == 1
    assert "No such file" in capsys.readouterr().err
    assert not os.path.exists(files["output"])


# -- migration.delta: which image is a base -------------------------------


@pytest.mark.parametrize("name,expected", [
    ("debian-12-genericcloud-20261101", "debian-genericcloud"),
    ("debian-12-genericcloud-20261015", "debian-genericcloud"),
    ("rhel-9.4-x86_64", "rhel"),
    ("cirros-0.6.2-x86_64-disk", "cirros"),
    ("image0.raw", ""),
    ("debian-12-nocloud.qcow2", "debian-nocloud"),
    ("Fedora-Cloud-Base-41.img", "fedora-cloud-base"),
    ("debian-12-20261125", "debian"),
    ("golden-v1", "golden"),
    ("golden-v2", "golden"),
    ("Golden_V3 ", "golden"),
    ("ubuntu-24.04-latest", "ubuntu"),
    ("centos current", "centos"),
    ("golden", "golden"),
    ("", ""),
    ("2026", ""),
    ("v2", ""),
    (None, ""),
])
def test_family(name, expected):
    assert migration_delta.family(name) == expected


def test_versions_of_a_name_share_a_family():
    family = migration_delta.family
    assert family("debian-12-genericcloud-20261101") == \
        family("debian-12-genericcloud-20261015")
    assert family("golden-v1") == family("golden-v2") == "golden"
    assert family("debian-12-genericcloud-20261101") != \
        family("ubuntu-24.04-genericcloud-20261101")


IMAGE = {"id": "new", "name": "golden-v2", "status": "active",
         "disk_format": "qcow2", "os_distro": "debian"}


def _candidate(**changes):
    candidate = dict(IMAGE, id="old", name="golden-v1")
    candidate.update(changes)
    return candidate


def test_related_earlier_version():
    assert migration_delta.related(IMAGE, _candidate()) is True
    assert migration_delta.related(IMAGE, _candidate(status=None)) is False


@pytest.mark.parametrize("changes", [
    {"id": "new"},
    {"status": "queued"},
    {"status": "deactivated"},
    {"disk_format": "raw"},
    {"os_distro": "ubuntu"},
    {"os_distro": None},
    {"name": "silver-v1"},
    {"name": None},
])
def test_related_refuses(changes):
    assert migration_delta.related(IMAGE, _candidate(**changes)) is False


@pytest.mark.parametrize("name", ["", "2026", None])
def test_related_needs_a_family(name):
    image = dict(IMAGE, name=name)
    assert migration_delta.related(image, _candidate(name=name)) is False
    assert migration_delta.related(image, _candidate()) is False


def test_related_with_missing_keys_on_both_sides():
    image = {"id": "a", "name": "golden-v2", "status": "active"}
    candidate = {"id": "b", "name": "golden-v1", "status": "active"}
    assert migration_delta.related(image, candidate) is True
    assert migration_delta.related(
        image, dict(candidate, disk_format="raw")) is False


def test_apply_without_a_signature_of_the_base_signs_nothing(files):
    # A signature left by an earlier file of the output's name goes too.
    _put(files["output"], files["base_data"])
    blocks.ensure(files["output"])
    apply.apply(files["base"], files["delta"], files["output"], HASH,
                _sha(files["new_data"]))
    assert not os.path.exists(blocks.signature_path(files["output"]))


def test_apply_with_a_stale_signature_of_the_base_signs_nothing(files):
    stale = blocks.cached(files["base"])
    os.utime(files["base"], ns=(1, 1))
    apply.apply(files["base"], files["delta"], files["output"], HASH,
                _sha(files["new_data"]), base_signature=stale)
    assert blocks.cached(files["output"]) is None


@pytest.mark.parametrize("size, runs", [
    # A copy of bytes that start mid-block of the base.
    (3 * BLOCK, [(codec.COPY, 0, 2 * BLOCK, 100),
                 (codec.DATA, 2 * BLOCK, BLOCK, None)]),
    # A short copy, then more: blocks no longer fall on boundaries.
    (3 * BLOCK, [(codec.COPY, 0, 100, 0),
                 (codec.DATA, 100, 3 * BLOCK - 100, None)]),
    # A short zero run, then a copy.
    (3 * BLOCK, [(codec.ZERO, 0, 10, None),
                 (codec.COPY, 10, 3 * BLOCK - 10, 0)]),
    # The file's short last block copied from a whole block of the base:
    # the base's digest is of 4096 bytes, not of these 100.
    (2 * BLOCK + 100, [(codec.DATA, 0, 2 * BLOCK, None),
                       (codec.COPY, 2 * BLOCK, 100, 0)]),
])
def test_a_delta_off_block_boundaries_rebuilds_right_but_unsigned(
        tmp_path, size, runs):
    """Not what make() writes, but valid: the file right, no signature."""
    rng = _rng(31)
    base_data = rng.randbytes(4 * BLOCK)
    new_data = bytearray(size)
    parts = []
    for op, offset, length, at in runs:
        if op == codec.COPY:
            new_data[offset:offset + length] = base_data[at:at + length]
            parts.append(codec.record(op, offset, length, at))
        elif op == codec.DATA:
            new_data[offset:offset + length] = rng.randbytes(length)
            parts += [codec.record(op, offset, length),
                      bytes(new_data[offset:offset + length])]
        else:
            parts.append(codec.record(op, offset, length))
    base = _put(tmp_path / "base.img", base_data)
    delta = _put(tmp_path / "hand.delta",
                 _hand_made(size, len(base_data), *parts))
    output = str(tmp_path / "out.img")
    apply.apply(base, delta, output, HASH, _sha(bytes(new_data)),
                base_signature=blocks.ensure(base))
    assert _read(output) == bytes(new_data)
    assert blocks.cached(output) is None
