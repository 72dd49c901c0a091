# SPDX-License-Identifier: Apache-2.0
"""What one READV costs the NFS server behind a server proxy.

A READV names up to 256 extents.  Served a READ each, 256 extents of a
byte were 256 READs upstream for one small call; extents near each
other are now read together, and one call costs at most
:data:`bulk.MAX_READV_READS` READs (the extents past them are left out,
and a caller asks again).  The upstream here serves a real file and
counts the READs it is sent.
"""

import os

import pytest

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs.bulk import BulkProc
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import bulk_server
from gvfs_openstack.proxy import counters

KIB = 1024
MIB = 1024 * KIB
T = nfs3.NfsTime(100, 0)


class _FileServer:
    """An NFS server's READs of one real file, counted."""

    def __init__(self, path, rtmax=MIB):
        self.fd = os.open(path, os.O_RDONLY)
        self.size = os.fstat(self.fd).st_size
        #: The most one READ answers (an NFS server's rtmax).
        self.rtmax = rtmax
        self.reads = []

    def bytes_read(self):
        return sum(min(count, self.rtmax) for _, count in self.reads)

    async def nfs(self, proc, args, cred, verf=rpc.AUTH_NONE):
        assert proc == Nfs3Proc.READ
        self.reads.append((args.offset, args.count))
        data = os.pread(self.fd, min(args.count, self.rtmax), args.offset)
        fattr = nfs3.Fattr(const.FileType.NF3REG, 0o644, 1, 0, 0,
                           self.size, self.size, nfs3.SpecData(), 1, 2,
                           T, T, T)
        return nfs3.Result(0, nfs3.ReadOk(
            fattr, len(data), args.offset + len(data) >= self.size, data))


def _image(tmp_path, size):
    data = os.urandom(size)
    path = tmp_path / "image"
    path.write_bytes(data)
    upstream = _FileServer(str(path))
    yield data, upstream
    os.close(upstream.fd)


@pytest.fixture
def image(tmp_path):
    yield from _image(tmp_path, 8 * MIB)


@pytest.fixture
def wide_image(tmp_path):
    """Room for 256 extents 80 KiB apart: no two are read together."""
    yield from _image(tmp_path, 24 * MIB)


async def _readv(upstream, extents, server=None):
    """The pieces a server proxy answers for ``extents``."""
    server = server or bulk_server.BulkServer(
        upstream, counters.BulkServerCounters())
    args = bulk.ReadvArgs(b"fh", tuple(bulk.Extent(offset, count)
                                       for offset, count in extents),
                          bulk.Codec.NONE)
    call = rpc.Call(7, bulk.BULK_PROGRAM, bulk.BULK_VERSION,
                    BulkProc.READV, rpc.AUTH_NONE,
                    args=bulk.encode_args(BulkProc.READV, args))
    reply = rpc.decode_message(await server.serve(call, rpc.AUTH_NONE))
    res = bulk.decode_res(BulkProc.READV, reply.results)
    assert res.ok
    return bulk.split([count for _, count in extents], res.body.counts,
                      res.body.data)


@pytest.mark.asyncio
async def test_256_scattered_bytes_cost_a_few_reads_upstream(image):
    """The attack: a byte every 4 KiB, in a shuffled order."""
    data, upstream = image
    offsets = [i * 4 * KIB + i for i in range(bulk.MAX_EXTENTS)][::-1]
    pieces = await _readv(upstream, [(offset, 1) for offset in offsets])
    assert [bytes(p) for p in pieces] == \
        [data[offset:offset + 1] for offset in offsets]
    assert len(upstream.reads) == 1


@pytest.mark.asyncio
async def test_adjacent_and_overlapping_extents_are_one_read(image):
    data, upstream = image
    extents = [(64 * KIB, 64 * KIB), (0, 64 * KIB), (100 * KIB, 50 * KIB),
               (128 * KIB, 10)]
    pieces = await _readv(upstream, extents)
    assert [bytes(p) for p in pieces] == \
        [data[offset:offset + count] for offset, count in extents]
    assert upstream.reads == [(0, 150 * KIB)]


@pytest.mark.asyncio
async def test_far_apart_extents_are_read_each_and_reads_stay_bounded(
        image):
    """Neighbours: no READ spans a large gap, nor grows past read_size."""
    data, upstream = image
    extents = [(0, 4 * KIB), (2 * MIB, 4 * KIB), (4 * MIB, 600 * KIB),
               (4 * MIB + 600 * KIB, 600 * KIB)]
    pieces = await _readv(upstream, extents)
    assert [bytes(p) for p in pieces] == \
        [data[offset:offset + count] for offset, count in extents]
    assert sorted(upstream.reads) == [
        (0, 4 * KIB), (2 * MIB, 4 * KIB), (4 * MIB, 600 * KIB),
        (4 * MIB + 600 * KIB, 600 * KIB)]


@pytest.mark.asyncio
async def test_extents_past_the_end_get_what_there_is(image):
    """The control of the old semantics: short at EOF, none past it."""
    data, upstream = image
    size = len(data)
    extents = [(size - 10, 100), (size + 5, 10), (0, 10)]
    pieces = await _readv(upstream, extents)
    assert [bytes(p) for p in pieces] == [data[-10:], b"", data[:10]]


@pytest.mark.asyncio
async def test_256_far_apart_bytes_cost_at_most_the_bound_per_call(
        wide_image):
    """The attack: a byte every 80 KiB, each its own READ upstream.

    Each call is answered as far as :data:`bulk.MAX_READV_READS` READs
    go; a client that asks again for the rest, as ours do, gets every
    byte, in a few calls of no more READs each.
    """
    data, upstream = wide_image
    server = bulk_server.BulkServer(upstream, counters.BulkServerCounters())
    extents = [(i * 80 * KIB, 1) for i in range(bulk.MAX_EXTENTS)][::-1]
    got, calls = [], 0
    while len(got) < len(extents):
        before = len(upstream.reads)
        pieces = await _readv(upstream, extents[len(got):], server)
        calls += 1
        assert len(upstream.reads) - before <= bulk.MAX_READV_READS
        assert len(pieces) == bulk.MAX_READV_READS
        got.extend(bytes(p) for p in pieces)
    assert got == [data[offset:offset + 1] for offset, _ in extents]
    assert calls == bulk.MAX_EXTENTS // bulk.MAX_READV_READS
    assert server.counters.bulk_readvs_cut_short == calls - 1


@pytest.mark.asyncio
async def test_a_scattered_boot_prefetch_readv_is_answered_whole(
        wide_image):
    """The control: a prefetch's READV of 1 MiB, block by block.

    16 cache blocks of 64 KiB far apart, and a run of 16 blocks beside
    them (a batch closes once it holds 1 MiB, past it by its last run):
    answered whole, a READ per region.
    """
    data, upstream = wide_image
    extents = [(i * MIB + 64 * KIB, 64 * KIB) for i in range(16)][::-1]
    extents.append((20 * MIB, 16 * 64 * KIB))
    pieces = await _readv(upstream, extents)
    assert [bytes(p) for p in pieces] == \
        [data[offset:offset + count] for offset, count in extents]
    assert len(upstream.reads) == 17


def test_the_bound_answers_as_many_first_spans_as_it_allows():
    """Exactly the bound is answered whole; one more is left out."""
    far = [(i * 1000, i * 1000 + 1) for i in range(bulk.MAX_READV_READS)]
    answered, reads, where = bulk.coalesce_within(far, 10, gap=100)
    assert answered == far and len(reads) == bulk.MAX_READV_READS
    more = far + [(10 ** 6, 10 ** 6 + 1), (5, 6)]
    answered, reads, where = bulk.coalesce_within(more, 10, gap=100)
    assert answered == far and len(reads) == bulk.MAX_READV_READS
    # Spans read together cost one READ: all of them fit.
    near = [(i, i + 1) for i in range(bulk.MAX_EXTENTS)]
    assert bulk.coalesce_within(near, 1024, gap=100)[0] == near
    # The first is answered even where it alone is past the bound.
    assert bulk.coalesce_within(far, 10, max_reads=1, gap=100)[0] == \
        far[:1]


def test_coalesce_says_which_read_holds_each_span():
    reads, where = bulk.coalesce([(200, 300), (0, 10), (5, 5), (250, 260)],
                                 max_read=1000, gap=100)
    assert reads == [(0, 10), (200, 300)]
    assert where == [1, 0, None, 1]


# --- the bound against servers that answer short, and gaps -----------------

def _sparse(tmp_path, size, rtmax):
    """A sparse file of ``size`` behind a server answering ``rtmax``."""
    path = tmp_path / "sparse"
    with open(path, "wb") as f:
        f.truncate(size)
    return _FileServer(str(path), rtmax)


async def _ask_until_whole(upstream, extents, server):
    """READV again for what was left out until all came; calls made."""
    left, calls = list(extents), 0
    while left:
        pieces = await _readv(upstream, left, server)
        calls += 1
        assert pieces, "a call made no progress"
        left = left[len(pieces):]
    return calls


@pytest.mark.asyncio
@pytest.mark.parametrize("rtmax", [MIB, 64 * KIB])
async def test_a_server_answering_short_costs_no_more_reads(tmp_path, rtmax):
    """256 far bytes from a server whose READs answer 64 KiB at most.

    The server proxy READs again for the rest of a short answer: those
    count against the bound too.
    """
    upstream = _sparse(tmp_path, 40 * MIB, rtmax)
    server = bulk_server.BulkServer(upstream,
                                    counters.BulkServerCounters())
    extents = [(i * (64 * KIB + 1), 1) for i in range(bulk.MAX_EXTENTS)]
    pieces = await _readv(upstream, extents, server)
    assert pieces and len(upstream.reads) <= bulk.MAX_READV_READS
    upstream.reads.clear()
    calls = await _ask_until_whole(upstream, extents, server)
    assert len(upstream.reads) <= calls * bulk.MAX_READV_READS
    os.close(upstream.fd)


@pytest.mark.asyncio
async def test_gaps_read_over_count_against_the_calls_bytes(tmp_path):
    """256 bytes 64 KiB apart: coalesced, they would read 16 MiB."""
    upstream = _sparse(tmp_path, 40 * MIB, MIB)
    server = bulk_server.BulkServer(upstream,
                                    counters.BulkServerCounters(),
                                    max_chunk=2 * MIB)
    extents = [(i * (64 * KIB + 1), 1) for i in range(bulk.MAX_EXTENTS)]
    await _readv(upstream, extents, server)
    assert upstream.bytes_read() <= 2 * server.max_chunk
    upstream.reads.clear()
    await _ask_until_whole(upstream, extents, server)
    os.close(upstream.fd)


@pytest.mark.asyncio
@pytest.mark.parametrize("max_chunk", [2 * MIB, 16 * MIB])
async def test_a_big_first_extent_then_far_bytes(tmp_path, max_chunk):
    """A first extent of max_chunk counts as the READs it takes."""
    upstream = _sparse(tmp_path, 40 * MIB, MIB)
    server = bulk_server.BulkServer(upstream,
                                    counters.BulkServerCounters(),
                                    max_chunk=max_chunk)
    extents = [(0, max_chunk - 63)] + [
        (max_chunk + (i + 1) * 80 * KIB, 1) for i in range(63)]
    pieces = await _readv(upstream, extents, server)
    assert pieces and len(pieces[0]) == max_chunk - 63
    assert len(upstream.reads) <= bulk.MAX_READV_READS
    os.close(upstream.fd)


@pytest.mark.asyncio
async def test_the_first_extent_comes_whole_from_a_server_answering_short(
        tmp_path):
    """Whatever the budget, the caller always gets its first extent."""
    upstream = _sparse(tmp_path, 40 * MIB, 16 * KIB)
    server = bulk_server.BulkServer(upstream,
                                    counters.BulkServerCounters(),
                                    max_chunk=2 * MIB)
    extents = [(0, 2 * MIB)] + [(3 * MIB + i * 80 * KIB, 1)
                                for i in range(100)]
    calls = await _ask_until_whole(upstream, extents, server)
    assert calls >= 2
