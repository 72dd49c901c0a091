# SPDX-License-Identifier: Apache-2.0
"""The dirty extent map against a model: a byte array per write."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st

from gvfs_openstack.proxy.cache.dirty import DirtyFile
from gvfs_openstack.proxy.cache.dirty import DirtyMap
from gvfs_openstack.proxy.cache.dirty import Extent

SIZE = 256


def _extent(record, offset, length):
    # Position encodes the record and the offset, so a model can tell
    # which record's bytes an extent points at.
    return Extent(offset, length, 1, record * 10000 + offset, record)


def _model_of(dirty):
    """Byte -> record that holds its newest value, per the map."""
    owner = [None] * SIZE
    for extent in dirty.extents():
        record, first = divmod(extent.position, 10000)
        assert record == extent.record
        # The position moved with the offset when the extent was cut.
        assert first == extent.offset
        for byte in range(extent.offset, extent.end):
            assert owner[byte] is None, "extents overlap"
            owner[byte] = extent.record
    return owner


writes = st.lists(st.tuples(st.integers(0, SIZE - 1),
                            st.integers(1, 64)), max_size=30)


def _written(ops):
    """A dirty file after ``ops``, and the model: byte -> newest record."""
    dirty = DirtyFile(b"fh", (1, b""))
    expected = [None] * SIZE
    for record, (offset, length) in enumerate(ops, 1):
        length = min(length, SIZE - offset)
        dirty.add(_extent(record, offset, length))
        expected[offset:offset + length] = [record] * length
    return dirty, expected


@settings(max_examples=300, deadline=None)
@given(writes)
def test_newest_write_owns_every_byte(ops):
    dirty, expected = _written(ops)
    assert _model_of(dirty) == expected
    assert dirty.dirty_bytes == sum(x is not None for x in expected)
    dirty_end = max((i + 1 for i, x in enumerate(expected)
                     if x is not None), default=0)
    assert dirty.end == dirty_end


@settings(max_examples=300, deadline=None)
@given(writes, st.integers(0, SIZE), st.integers(0, SIZE))
def test_overlapping_and_covers_agree_with_the_model(ops, a, b):
    start, end = min(a, b), max(a, b)
    dirty, expected = _written(ops)
    seen = [None] * SIZE
    for piece in dirty.overlapping(start, end):
        assert start <= piece.offset < piece.end <= end
        seen[piece.offset:piece.end] = [piece.record] * piece.length
    assert seen[start:end] == expected[start:end]
    assert dirty.covers(start, end) == all(
        x is not None for x in expected[start:end])


@settings(max_examples=300, deadline=None)
@given(writes, writes)
def test_a_flush_removes_only_what_it_sent(before, during):
    """Writes that land while a flush is under way stay dirty."""
    dirty = DirtyFile(b"fh", (1, b""))
    expected = [None] * SIZE
    record = 0
    for offset, length in before:
        record += 1
        length = min(length, SIZE - offset)
        dirty.add(_extent(record, offset, length))
        expected[offset:offset + length] = [record] * length
    sent = {e.record for e in dirty.extents()}
    for offset, length in during:
        record += 1
        length = min(length, SIZE - offset)
        dirty.add(_extent(record, offset, length))
        expected[offset:offset + length] = [record] * length
    dirty.remove_records(sent)
    assert _model_of(dirty) == [x if x not in sent else None
                                for x in expected]


def test_forget_range_keeps_newer_records():
    dirty = DirtyFile(b"fh", (1, b""))
    dirty.add(_extent(1, 0, 100))
    dirty.add(_extent(3, 50, 10))
    # A write-through that started when record 2 was the newest.
    dirty.forget_range(40, 80, before_record=3)
    assert [(e.offset, e.length, e.record) for e in dirty.extents()] == [
        (0, 40, 1), (50, 10, 3), (80, 20, 1)]
    assert dirty.dirty_bytes == 70


def test_map_prunes_clean_files_and_lists_live_segments():
    dirty_map = DirtyMap()
    dirty_map.add(b"a", (1, b""), Extent(0, 10, 1, 0, 1), 5)
    dirty_map.add(b"b", (1, b""), Extent(0, 10, 2, 0, 2), 5)
    assert dirty_map.segments() == {1, 2}
    assert dirty_map.dirty_bytes == 20
    dirty_map.get(b"a").remove_records({1})
    dirty_map.prune(b"a")
    assert b"a" not in dirty_map and b"b" in dirty_map
    assert dirty_map.segments() == {2}
    assert dirty_map.discard(b"b") == 10
    assert not dirty_map


def test_write_time_never_goes_backwards():
    dirty_map = DirtyMap()
    first = dirty_map.add(b"a", (1, b""), Extent(0, 1, 1, 0, 1), 100)
    assert first.written_ns == 100
    # A clock step back still moves the mtime clients see forward.
    dirty_map.add(b"a", (1, b""), Extent(1, 1, 1, 1, 2), 50)
    assert first.written_ns == 101
