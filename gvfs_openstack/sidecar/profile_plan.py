# SPDX-License-Identifier: Apache-2.0
"""Planning a boot profile's fetch: profile -> blocks -> runs -> batches.

Two readers fetch a profile's blocks ahead of a boot: the caching
proxy's prefetch (into its block cache, from the next hop) and the
mount's prefill (into its RAM cache, from the proxy).  Both take the
same steps, here, without I/O:

* :func:`blocks`: the cache blocks the profile names, in first-touch
  order, each once (a profile's blocks may be larger or smaller than a
  cache's);
* runs of consecutive blocks, each one upstream read: :func:`runs`
  (the proxy: blocks next in the order that are also next on disk;
  also any sorted list of missing blocks) or :func:`read_spans` (the
  mount: a run grows around its first block over any block the profile
  names, so a scattered boot still reads whole neighbourhoods);
* :func:`batches`: runs grouped into one READV each (a boot's blocks
  are scattered, and a call per run would cost every hop a call per
  block), at most :data:`bulk.MAX_EXTENTS` runs.

A ``wanted(block)`` predicate leaves out blocks that need no fetch
(cached, all zeros, on their way).  It is asked lazily, as the plan
reaches each block: a caller that fetches batch by batch sees blocks a
reader fetched meanwhile left out.
"""

from gvfs_openstack.nfs import bulk


def blocks(profile, block_size):
    """The ``block_size`` blocks the profile names: its order, each once."""
    order, seen = [], set()
    for start, end in profile.byte_ranges():
        if end <= start:
            continue
        for block in range(start // block_size, (end - 1) // block_size + 1):
            if block not in seen:
                seen.add(block)
                order.append(block)
    return order


def runs(order, max_blocks, wanted=None, on_present=None, going_on=None):
    """``(first, count)`` runs of blocks next in ``order`` and on disk.

    At most ``max_blocks`` each.  A block ``wanted`` declines ends the
    run before it; declined as a run's first block it is left out and
    ``on_present(block)`` told.  ``going_on()``, asked before each
    run's first block, ends the plan when false.  A generator: each
    block is looked at when the caller asks for the run it may be in.
    """
    blocks_left = iter(order)
    block = next(blocks_left, None)
    while block is not None:
        if going_on is not None and not going_on():
            return
        first, count = block, 1
        block = next(blocks_left, None)
        if wanted is not None and not wanted(first):
            if on_present is not None:
                on_present(first)
            continue
        while block is not None and block == first + count and \
                count < max_blocks and (wanted is None or wanted(block)):
            count += 1
            block = next(blocks_left, None)
        yield first, count


def read_spans(profile, block_size, max_read, budget):
    """``(offset, length)`` reads that bring the profile's blocks in.

    In first-touch order of each run's first block; a run is
    consecutive ``block_size`` blocks the profile names, grown around
    the first one not yet read, at most ``max_read`` bytes, within the
    file.  At most ``budget`` bytes in all: the cache keeps its other
    files too.
    """
    order = blocks(profile, block_size)
    named = set(order)
    per_read = max(1, max_read // block_size)
    planned, done, spent = [], set(), 0
    for index in order:
        if index in done:
            continue
        first = index
        while first - 1 in named and first - 1 not in done and \
                index - first + 1 < per_read:
            first -= 1
        last = index
        while last + 1 in named and last + 1 not in done and \
                last - first + 1 < per_read:
            last += 1
        offset = first * block_size
        length = min((last + 1) * block_size, profile.size) - offset
        if spent + length > budget:
            break
        planned.append((offset, length))
        done.update(range(first, last + 1))
        spent += length
    return planned


def batches(runs, size_of, max_bytes, spill=True):
    """``runs`` in groups that one READV each brings: ``(runs, bytes)``.

    In order; ``size_of(run)`` is a run's bytes.  A group closes once it
    holds :data:`bulk.MAX_EXTENTS` runs, and once it holds ``max_bytes``
    (``spill``: its last run may take it past them, as a fetch upstream
    may) or before a run would take it past them (not ``spill``: the
    proxy answers a READV with at most its ``max_read`` bytes).  A
    generator: ``runs`` is read lazily, a group at a time.
    """
    batch, size = [], 0
    for run in runs:
        length = size_of(run)
        if not spill and batch and size + length > max_bytes:
            yield batch, size
            batch, size = [], 0
        batch.append(run)
        size += length
        if (spill and size >= max_bytes) or len(batch) >= bulk.MAX_EXTENTS:
            yield batch, size
            batch, size = [], 0
    if batch:
        yield batch, size
