# SPDX-License-Identifier: Apache-2.0
"""Planning a boot profile's fetch, shared by the proxy and the mount."""

from gvfs_openstack.nfs import bulk
from gvfs_openstack.sidecar import profile as profile_format
from gvfs_openstack.sidecar import profile_plan

KIB = 1024
BLOCK = 64 * KIB


def _profile(blocks, size=64 * BLOCK, block_size=BLOCK):
    return profile_format.Profile(size, 7, block_size, 1,
                                  tuple((b, 0) for b in blocks))


def _one_block_each(run):
    return run[1] * BLOCK


# --- blocks ---------------------------------------------------------------


def test_blocks_keep_the_profiles_order_each_block_once():
    # Profile blocks of two cache blocks each: 3 is cache blocks 6 and 7.
    found = _profile([3, 1, 2], size=8 * BLOCK, block_size=2 * BLOCK)
    assert profile_plan.blocks(found, BLOCK) == [6, 7, 2, 3, 4, 5]
    # Cache blocks of two profile blocks each: 3 and 2 share block 1.
    assert profile_plan.blocks(_profile([3, 2, 0, 5]), 2 * BLOCK) == [
        1, 0, 2]


def test_blocks_stop_at_the_end_of_the_file():
    found = _profile([1], size=3 * BLOCK + 100, block_size=2 * BLOCK)
    assert profile_plan.blocks(found, BLOCK) == [2, 3]


# --- runs: next in the order and next on disk -----------------------------


def test_runs_are_contiguous_in_order_and_bounded():
    assert list(profile_plan.runs([1, 2, 3, 7, 8, 20], 2)) == [
        (1, 2), (3, 1), (7, 2), (20, 1)]
    assert list(profile_plan.runs([], 4)) == []


def test_a_run_follows_the_order_not_the_disk():
    # 10 is next to 9 on disk, not in the order: runs of their own.
    assert list(profile_plan.runs([9, 2, 3, 10, 40], 16)) == [
        (9, 1), (2, 2), (10, 1), (40, 1)]


def test_blocks_not_wanted_are_left_out_and_end_a_run():
    present = []
    plan = profile_plan.runs([4, 5, 6, 7, 1], 16,
                             wanted=lambda block: block not in (4, 6),
                             on_present=present.append)
    assert list(plan) == [(5, 1), (7, 1), (1, 1)]
    assert present == [4, 6]


def test_wanted_is_asked_as_the_plan_reaches_a_block():
    """A block fetched meanwhile (a reader's miss) is not planned."""
    fetched = set()
    plan = profile_plan.runs([1, 2, 8, 9], 16,
                             wanted=lambda block: block not in fetched)
    assert next(plan) == (1, 2)
    fetched.add(8)
    assert list(plan) == [(9, 1)]


def test_going_on_ends_the_plan_before_a_run():
    asked = []

    def going_on():
        asked.append(True)
        return len(asked) < 2

    assert list(profile_plan.runs([1, 5, 9], 16, going_on=going_on)) == [
        (1, 1)]
    # Never asked once the order is over.
    asked.clear()
    assert list(profile_plan.runs([1], 16, going_on=going_on)) == [(1, 1)]
    assert len(asked) == 1


# --- batches -------------------------------------------------------------


def test_a_batch_closes_once_it_holds_max_bytes():
    runs = [(9, 1), (3, 1), (20, 2), (40, 4), (50, 1), (64, 1)]
    assert list(profile_plan.batches(runs, _one_block_each,
                                     4 * BLOCK)) == [
        ([(9, 1), (3, 1), (20, 2)], 4 * BLOCK),
        ([(40, 4)], 4 * BLOCK),
        ([(50, 1), (64, 1)], 2 * BLOCK)]


def test_a_spilling_batch_may_pass_max_bytes_by_its_last_run():
    runs = [(1, 3), (10, 3), (20, 1)]
    assert list(profile_plan.batches(runs, _one_block_each,
                                     4 * BLOCK)) == [
        ([(1, 3), (10, 3)], 6 * BLOCK), ([(20, 1)], BLOCK)]


def test_a_capped_batch_never_passes_max_bytes():
    runs = [(1, 3), (10, 3), (20, 1)]
    assert list(profile_plan.batches(runs, _one_block_each, 4 * BLOCK,
                                     spill=False)) == [
        ([(1, 3)], 3 * BLOCK), ([(10, 3), (20, 1)], 4 * BLOCK)]


def test_a_batch_holds_at_most_max_extents_runs():
    runs = [(2 * i, 1) for i in range(bulk.MAX_EXTENTS + 1)]
    for spill in (True, False):
        plan = profile_plan.batches(runs, _one_block_each,
                                    1024 * BLOCK, spill=spill)
        assert [len(batch) for batch, _ in plan] == [bulk.MAX_EXTENTS, 1]


def test_batches_read_runs_a_batch_at_a_time():
    pulled = []

    def runs():
        for run in [(1, 4), (10, 4), (20, 4)]:
            pulled.append(run)
            yield run

    plan = profile_plan.batches(runs(), _one_block_each, 4 * BLOCK)
    assert next(plan) == ([(1, 4)], 4 * BLOCK)
    assert pulled == [(1, 4)]


# --- read_spans: the mount's runs, grown around a block --------------------


def test_read_spans_join_neighbours_in_first_touch_order():
    plan = profile_plan.read_spans(_profile([9, 2, 3, 10, 40]), BLOCK,
                                   1024 * KIB, budget=64 * BLOCK)
    assert plan == [(9 * BLOCK, 2 * BLOCK), (2 * BLOCK, 2 * BLOCK),
                    (40 * BLOCK, BLOCK)]


def test_a_read_span_is_at_most_one_read():
    plan = profile_plan.read_spans(_profile(range(40)), BLOCK, 16 * BLOCK,
                                   budget=64 * BLOCK)
    assert plan == [(0, 16 * BLOCK), (16 * BLOCK, 16 * BLOCK),
                    (32 * BLOCK, 8 * BLOCK)]


def test_the_budget_stops_the_read_spans():
    plan = profile_plan.read_spans(_profile([0, 10, 20, 30]), BLOCK,
                                   16 * BLOCK, budget=2 * BLOCK)
    assert plan == [(0, BLOCK), (10 * BLOCK, BLOCK)]


def test_read_spans_of_larger_profile_blocks_and_a_short_last_one():
    size = 3 * BLOCK + 100
    plan = profile_plan.read_spans(
        _profile([1], size=size, block_size=2 * BLOCK), BLOCK, 16 * BLOCK,
        budget=size)
    assert plan == [(2 * BLOCK, BLOCK + 100)]
