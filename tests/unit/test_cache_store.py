# SPDX-License-Identifier: Apache-2.0
import os

import pytest

from gvfs_openstack.proxy.cache.store import Attrs
from gvfs_openstack.proxy.cache.store import BlockStore
from gvfs_openstack.proxy.cache.store import fh_digest
from gvfs_openstack.proxy.cache.store import Geometry

A1 = Attrs(100, 1, 1)
BS = 4096


@pytest.fixture
def geometry():
    # 4 sets of 2 ways, two sets per bank: two bank files.
    return Geometry(block_size=BS, ways=2, sets=4, sets_per_bank=2)


def test_put_and_get(tmp_path, geometry):
    store = BlockStore(str(tmp_path), geometry)
    d = fh_digest(b"fh1")
    store.put(d, 7, b"x" * BS, A1)
    store.put(d, 8, b"tail", A1)
    assert store.get(d, 7) == (b"x" * BS, A1)
    assert store.get(d, 8) == (b"tail", A1)
    assert store.get(d, 9) is None
    assert store.get(fh_digest(b"fh2"), 7) is None


def test_consecutive_blocks_land_in_consecutive_sets(geometry):
    store_sets = []
    digest = fh_digest(b"f")
    base = int.from_bytes(digest[:8], "little")
    for block in range(6):
        store_sets.append((base + block) % geometry.sets)
    assert [(b - store_sets[0]) % 4 for b in store_sets] == [0, 1, 2, 3,
                                                             0, 1]


def test_least_recently_used_way_is_replaced(tmp_path, geometry):
    store = BlockStore(str(tmp_path), geometry)
    d = fh_digest(b"f")
    # Blocks 0, 4 and 8 share a set (4 sets); the set has 2 ways.
    store.put(d, 0, b"a", A1)
    store.put(d, 4, b"b", A1)
    # A frame refreshed in place or a free one replaces nothing.
    store.put(d, 0, b"a", A1)
    assert store.evictions == 0
    assert store.get(d, 0)  # 0 is now more recent than 4
    store.put(d, 8, b"c", A1)
    assert store.get(d, 4) is None
    assert store.get(d, 0)[0] == b"a" and store.get(d, 8)[0] == b"c"
    # The full set gave up a block: counted, so a cache too small for
    # what it serves shows in the proxy's counters.
    assert store.evictions == 1


def test_a_speculative_block_takes_only_a_free_frame(tmp_path, geometry):
    store = BlockStore(str(tmp_path), geometry)
    d = fh_digest(b"f")
    # Blocks 0, 4 and 8 share a set of 2 ways.
    assert store.has_room(d, 4)
    assert store.put(d, 4, b"s", A1, speculative=True)
    assert store.put(d, 0, b"a", A1)
    assert not store.has_room(d, 8)
    assert not store.put(d, 8, b"c", A1, speculative=True)
    assert store.get(d, 8) is None
    assert store.get(d, 0)[0] == b"a" and store.get(d, 4)[0] == b"s"
    # Its own frame it may refresh.
    assert store.has_room(d, 4)
    assert store.put(d, 4, b"t", A1, speculative=True)
    assert store.get(d, 4)[0] == b"t"


def test_speculative_blocks_leave_half_of_each_set_to_readers(tmp_path):
    store = BlockStore(str(tmp_path), Geometry(block_size=BS, ways=4,
                                               sets=1, sets_per_bank=1))
    d = fh_digest(b"f")
    assert store.put(d, 0, b"s", A1, speculative=True)
    assert store.put(d, 1, b"s", A1, speculative=True)
    # Two of four ways hold blocks: the rest is for readers' misses.
    assert not store.has_room(d, 2)
    assert not store.put(d, 2, b"s", A1, speculative=True)
    assert store.put(d, 2, b"r", A1) and store.put(d, 3, b"r", A1)
    held = [store.get(d, b)[0] for b in range(4)]
    assert held == [b"s", b"s", b"r", b"r"]
    # A set half full of readers' blocks takes no speculative one either.
    store.drop_all()
    store.put(d, 0, b"r", A1)
    store.put(d, 1, b"r", A1)
    assert not store.has_room(d, 2)


def test_a_speculative_block_goes_first_until_a_reader_uses_it(
        tmp_path, geometry):
    store = BlockStore(str(tmp_path), geometry)
    d = fh_digest(b"f")
    store.put(d, 4, b"s", A1, speculative=True)
    # Put after the speculative block, used before it: still younger.
    store.put(d, 0, b"a", A1)
    store.put(d, 8, b"c", A1)
    assert store.get(d, 4) is None
    assert store.get(d, 0)[0] == b"a" and store.get(d, 8)[0] == b"c"
    # A speculative block a reader got ages like any other.
    store.drop_all()
    store.put(d, 4, b"s", A1, speculative=True)
    store.put(d, 0, b"a", A1)
    assert store.get(d, 4)[0] == b"s"
    store.put(d, 8, b"c", A1)
    assert store.get(d, 0) is None
    assert store.get(d, 4)[0] == b"s"


def test_a_warm_cache_survives_reopening(tmp_path, geometry):
    store = BlockStore(str(tmp_path), geometry)
    d = fh_digest(b"f")
    store.put(d, 3, b"persist", A1)
    store.close()
    again = BlockStore(str(tmp_path), geometry)
    assert again.get(d, 3) == (b"persist", A1)


def test_another_layout_discards_the_cache(tmp_path, geometry):
    store = BlockStore(str(tmp_path), geometry)
    d = fh_digest(b"f")
    store.put(d, 3, b"old", A1)
    store.close()
    other = Geometry(block_size=BS * 2, ways=2, sets=4, sets_per_bank=2)
    assert BlockStore(str(tmp_path), other).get(d, 3) is None


def test_corrupted_bank_is_detected_and_discarded(tmp_path, geometry):
    store = BlockStore(str(tmp_path), geometry)
    d = fh_digest(b"f")
    for block in range(4):
        store.put(d, block, bytes([block]) * BS, A1)
    store.close()
    for name in os.listdir(tmp_path):
        if name.endswith(".data"):
            with open(tmp_path / name, "r+b") as f:
                data = bytearray(f.read())
                data[10] ^= 0xFF
                data[BS + 10] ^= 0xFF
                data[2 * BS + 10] ^= 0xFF
                f.seek(0)
                f.write(data)
    again = BlockStore(str(tmp_path), geometry)
    results = [again.get(d, block) for block in range(4)]
    for block, found in enumerate(results):
        assert found is None or found[0] == bytes([block]) * BS
    assert again.corrupt_blocks >= 3
    # Once discarded, they stay misses.
    assert sum(again.get(d, b) is None for b in range(4)) == \
        again.corrupt_blocks


def test_oversized_block_is_refused(tmp_path, geometry):
    store = BlockStore(str(tmp_path), geometry)
    with pytest.raises(ValueError):
        store.put(fh_digest(b"f"), 0, b"x" * (BS + 1), A1)


def test_drop_all(tmp_path, geometry):
    store = BlockStore(str(tmp_path), geometry)
    d = fh_digest(b"f")
    store.put(d, 1, b"gone", A1)
    store.drop_all()
    assert store.get(d, 1) is None


def test_geometry_for_capacity():
    g = Geometry.for_capacity(1 << 30, 65536, 8, 256 << 20)
    assert g.capacity == 1 << 30
    assert g.banks == 4
