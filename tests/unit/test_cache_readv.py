# SPDX-License-Identifier: Apache-2.0
"""A proxy's cache answering READV, and fetching with it.

Against the in-memory directory of :mod:`tests.unit.test_boot_profiles`,
which answers READV as a server proxy does (or, told so, not at all, as
an NFS server); the real chain is in
``tests/functional/test_bulk_readv.py``.
"""

import hashlib
import types

import pytest

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import bulk_server
from gvfs_openstack.proxy.cache import readv
from gvfs_openstack.proxy.cache.store import BlockStore
from gvfs_openstack.proxy.cache.store import Geometry
from gvfs_openstack.proxy import counters
from gvfs_openstack.sidecar import format as meta_format
from tests.unit.test_boot_profiles import assemble
from tests.unit.test_boot_profiles import BS
from tests.unit.test_boot_profiles import CALL
from tests.unit.test_boot_profiles import Directory
from tests.unit.test_boot_profiles import image
from tests.unit.test_boot_profiles import make
from tests.unit.test_boot_profiles import open_file
from tests.unit.test_boot_profiles import read_call


def readv_call(extents, name="golden"):
    return rpc.Call(3, bulk.BULK_PROGRAM, bulk.BULK_VERSION,
                    bulk.BulkProc.READV, CALL.cred,
                    args=bulk.encode_args(bulk.BulkProc.READV,
                                          bulk.ReadvArgs(
                                              b"fh:" + name.encode(),
                                              tuple(bulk.Extent(o, c)
                                                    for o, c in extents))))


def answer(reply):
    """The decoded READV result of a reply given as buffers."""
    message = rpc.decode_message(b"".join(bytes(part) for part in reply))
    return bulk.decode_res(bulk.BulkProc.READV, message.results)


class ServerProxy:
    """``directory`` behind a server proxy's own bulk channel.

    READVs go through :class:`bulk_server.BulkServer`, in bytes both
    ways, and its READs to ``directory``; the rest straight there.
    """

    def __init__(self, directory):
        self.directory = directory
        self.server = bulk_server.BulkServer(
            directory, counters.BulkServerCounters())
        #: The NFS READs each READV cost, in order.
        self.reads_per_readv = []

    async def nfs(self, proc, args, cred, verf=rpc.AUTH_NONE):
        return await self.directory.nfs(proc, args, cred, verf)

    async def bulk(self, proc, args, cred, verf=rpc.AUTH_NONE):
        calls = self.directory.calls
        calls.append(("readv", args))
        before = len(calls)
        reply = rpc.decode_message(await self.server.serve(rpc.Call(
            9, bulk.BULK_PROGRAM, bulk.BULK_VERSION, proc, cred,
            args=bulk.encode_args(proc, args)), cred))
        self.reads_per_readv.append(
            sum(1 for p, _ in calls[before:] if p == Nfs3Proc.READ))
        return bulk.decode_res(proc, reply.results)


def golden(blocks=64, tail=100):
    d = Directory()
    d.add("golden", image(blocks) + b"t" * tail)
    return d


def upstream(d):
    """(READ offsets in blocks, READV extents in blocks) sent so far."""
    return ([a.offset // BS for p, a in d.calls if p == Nfs3Proc.READ],
            [[(e.offset // BS, e.count // BS) for e in a.extents]
             for p, a in d.calls if p == "readv"])


@pytest.mark.asyncio
async def test_a_readv_is_answered_from_the_cache_and_one_fetch(tmp_path):
    d = golden()
    data = bytes(d.files["golden"])
    cached = make(tmp_path, d)
    await cached.reads.read(read_call("golden", 9 * BS, BS))      # Cached now.
    extents = [(30 * BS, BS), (9 * BS, BS), (2 * BS, 2 * BS),
               (64 * BS, BS), (90 * BS, BS), (5 * BS + 7, 10)]
    res = answer(await cached.reads.bulk_readv(readv_call(extents)))
    assert res.ok
    assert res.body.counts == (BS, BS, 2 * BS, 100, 0, 10)
    assert res.body.codec == bulk.Codec.NONE
    assert res.body.data == b"".join(data[o:o + c] for o, c in extents)
    # Block 9 was here; the other four runs went in one READV.
    reads, readvs = upstream(d)
    assert reads == [9]
    assert readvs == [[(2, 2), (5, 1), (30, 1), (64, 1)]]
    # All of it is cached now: no call leaves again.
    calls = len(d.calls)
    again = answer(await cached.reads.bulk_readv(readv_call(extents)))
    assert again.body.data == res.body.data and len(d.calls) == calls


@pytest.mark.asyncio
async def test_a_readv_past_the_reply_limit_leaves_the_rest(tmp_path):
    d = golden()
    cached = make(tmp_path, d)      # Answers at most 64 blocks at once.
    res = answer(await cached.reads.bulk_readv(readv_call(
        [(0, 40 * BS), (40 * BS, 30 * BS), (0, BS)])))
    assert res.body.counts == (40 * BS,)


@pytest.mark.asyncio
async def test_without_readv_upstream_each_run_is_one_read(tmp_path):
    d = golden()
    d.readv = False
    data = bytes(d.files["golden"])
    cached = make(tmp_path, d)
    extents = [(30 * BS, BS), (2 * BS, 2 * BS)]
    res = answer(await cached.reads.bulk_readv(readv_call(extents)))
    assert res.body.data == data[30 * BS:31 * BS] + data[2 * BS:4 * BS]
    assert upstream(d) == ([2, 30], [])
    # Not asked again for a while: the next hop is an NFS server.
    await cached.reads.bulk_readv(readv_call([(40 * BS, BS), (50 * BS, BS)]))
    assert upstream(d) == ([2, 30, 40, 50], [])


@pytest.mark.asyncio
async def test_a_garbled_readv_reply_upstream_keeps_nothing(tmp_path):
    d = golden()
    told = d.bulk

    async def lying(proc, args, cred, verf=rpc.AUTH_NONE):
        res = await told(proc, args, cred, verf)
        # Counts that promise more bytes than the reply carries.
        return nfs3.Result(0, bulk.ReadvOk(
            res.body.file_attributes, tuple(c + 1 for c in res.body.counts),
            res.body.raw_count, res.body.codec, res.body.data))

    d.bulk = lying
    cached = make(tmp_path, d)
    reply = await cached.reads.bulk_readv(readv_call([(30 * BS, BS),
                                                      (2 * BS, BS)]))
    # Forwarded: the next hop answers the caller itself.
    assert reply is None
    state = cached.files.get(b"fh:golden")
    assert not cached.fetcher.present(state, 30, BS)
    assert not cached.fetcher.present(state, 2, BS)


@pytest.mark.asyncio
async def test_a_readv_refused_upstream_is_a_fetch_error(tmp_path):
    d = golden()

    async def refusing(proc, args, cred, verf=rpc.AUTH_NONE):
        return nfs3.Result(const.NfsStat.NFS3ERR_STALE, nfs3.AttrBody(None))

    d.bulk = refusing
    cached = make(tmp_path, d)
    assert await cached.reads.bulk_readv(readv_call([(30 * BS, BS),
                                                     (2 * BS, BS)])) is None
    with pytest.raises(readv.ReadvFailed, match="STALE"):
        await readv.read_extents(d, CALL, b"fh:golden", [(0, BS)])


@pytest.mark.asyncio
async def test_zeros_by_the_zero_map_never_go_in_a_readv(tmp_path):
    """As a READ's fetch: only the non-zero parts cross the link.

    Cache blocks of 16 KiB, the zero map's 4 KiB pages: a block can be
    part zero.
    """
    big = 4 * BS
    d = Directory()
    data = bytearray(image(64 * 4))
    hole = (20 * big + BS, 27 * big)        # Block 20 from its 2nd page.
    data[hole[0]:hole[1]] = bytes(hole[1] - hole[0])
    d.add("golden", data)
    d.add(meta_format.sidecar_name("golden"), meta_format.Sidecar(
        len(data), 100 * 10 ** 9, "sha256-nonzero",
        hashlib.sha256(data).hexdigest(),
        meta_format.ZeroMap.from_extents(
            [(hole[0], hole[1] - hole[0])])).to_bytes())
    cached = assemble(BlockStore(str(tmp_path), Geometry(big, 4, 64, 64)),
                      d, max_fetch=4 * big, max_read=64 * big)
    await open_file(cached, d, "golden")
    extents = [(19 * big, 3 * big), (40 * big, big)]
    res = answer(await cached.reads.bulk_readv(readv_call(extents)))
    assert res.body.data == bytes(data[19 * big:22 * big] +
                                  data[40 * big:41 * big])
    # Block 21 is zero by the map: not fetched at all; of 19-20, only
    # what precedes the hole.
    asked = [(e.offset, e.count) for p, a in d.calls if p == "readv"
             for e in a.extents]
    assert asked == [(19 * big, big + BS), (40 * big, big)]
    assert cached.counters.cache_bytes_fetched == 2 * big + BS


def test_runs_are_grouped_into_fetches_of_one_call_each(tmp_path):
    # max_fetch is 4 blocks; the file has 64 blocks and 100 bytes.
    cached = make(tmp_path, golden())
    state = types.SimpleNamespace(fattr=types.SimpleNamespace(
        size=64 * BS + 100))
    runs = [(9, 1), (3, 1), (20, 2), (40, 4), (50, 1), (64, 1)]
    assert list(cached.fetcher.batches(state, runs)) == [
        ([(9, 1), (3, 1), (20, 2)], 4 * BS),
        ([(40, 4)], 4 * BS),
        ([(50, 1), (64, 1)], BS + 100)]
    many = [(2 * i, 1) for i in range(bulk.MAX_EXTENTS + 1)]
    wide = make(tmp_path / "wide", golden(blocks=600),
                max_fetch=1024 * BS)
    state.fattr.size = 600 * BS
    assert [len(batch) for batch, _ in wide.fetcher.batches(state, many)] == \
        [bulk.MAX_EXTENTS, 1]


@pytest.mark.asyncio
async def test_extents_a_server_proxy_leaves_out_are_asked_again(tmp_path):
    """Blocks far apart: more than one READV may cost the server proxy.

    It answers the first :data:`bulk.MAX_READV_READS` and leaves the
    rest out; the cache asks again for those, and its caller gets every
    byte.
    """
    blocks = 100
    apart = 18 * BS                 # Never read together upstream.
    d = golden(blocks=blocks * 18)
    data = bytes(d.files["golden"])
    server = ServerProxy(d)
    cached = make(tmp_path, server)
    extents = [(i * apart + 5, 1) for i in range(blocks)]
    res = answer(await cached.reads.bulk_readv(readv_call(extents)))
    assert res.body.counts == (1,) * blocks
    assert res.body.data == b"".join(data[o:o + c] for o, c in extents)
    assert server.reads_per_readv == [bulk.MAX_READV_READS,
                                      blocks - bulk.MAX_READV_READS]
    assert server.server.counters.bulk_readvs_cut_short == 1


@pytest.mark.asyncio
async def test_a_run_cut_short_within_its_parts_is_read_alone(tmp_path):
    """A READV cut short within a run's parts: that run read alone.

    The next hop answers only the first part of a run the zero map
    splits: rather than fail the fetch, the cache reads that run as a
    READ would, then goes on with READVs.
    """
    big = 4 * BS
    d = Directory()
    data = bytearray(image(64 * 4))
    hole = (19 * big + BS, 19 * big + 2 * BS)    # Block 19's 2nd page.
    data[hole[0]:hole[1]] = bytes(hole[1] - hole[0])
    d.add("golden", data)
    d.add(meta_format.sidecar_name("golden"), meta_format.Sidecar(
        len(data), 100 * 10 ** 9, "sha256-nonzero",
        hashlib.sha256(data).hexdigest(),
        meta_format.ZeroMap.from_extents(
            [(hole[0], hole[1] - hole[0])])).to_bytes())
    told = d.bulk

    async def first_only(proc, args, cred, verf=rpc.AUTH_NONE):
        body = (await told(proc, args, cred, verf)).body
        return nfs3.Result(0, bulk.ReadvOk(
            body.file_attributes, body.counts[:1], body.counts[0],
            body.codec, body.data[:body.counts[0]]))

    d.bulk = first_only
    cached = assemble(BlockStore(str(tmp_path), Geometry(big, 4, 64, 64)),
                      d, max_fetch=4 * big, max_read=64 * big)
    await open_file(cached, d, "golden")
    extents = [(19 * big, big), (40 * big, big)]
    res = answer(await cached.reads.bulk_readv(readv_call(extents)))
    assert res.body.data == bytes(data[19 * big:20 * big] +
                                  data[40 * big:41 * big])
    # A READV of both runs, block 19's non-zero parts on their own, then
    # a READV of block 40.
    sent = [(p, a.offset) if p == Nfs3Proc.READ else
            (p, [e.offset for e in a.extents]) for p, a in d.calls
            if p in ("readv", Nfs3Proc.READ) and b"golden" == a.file[3:]]
    assert sent == [
        ("readv", [19 * big, 19 * big + 2 * BS, 40 * big]),
        (Nfs3Proc.READ, 19 * big), (Nfs3Proc.READ, 19 * big + 2 * BS),
        ("readv", [40 * big])]
