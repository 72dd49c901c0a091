# SPDX-License-Identifier: Apache-2.0
"""The proxy's own typed calls upstream, and the cache's use of them.

The upstream pool is a stand-in that decodes each call and answers it
with what the test says; everything above it is the real code: the
typed calls, the cached READ path (a call it cannot serve is answered
None, so the role forwards it) and write-back's flush of a journal.
"""

import asyncio

import pytest

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import MountProc
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.cache import dirty as dirty_mod
from gvfs_openstack.proxy.cache import exports
from gvfs_openstack.proxy.cache import fetch
from gvfs_openstack.proxy.cache import flush
from gvfs_openstack.proxy.cache import freshness
from gvfs_openstack.proxy.cache.journal import Journal
from gvfs_openstack.proxy.cache import reads
from gvfs_openstack.proxy.cache.store import BlockStore
from gvfs_openstack.proxy.cache.store import Geometry
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy.upstream import UpstreamLost
from gvfs_openstack.proxy import upstream_calls
from gvfs_openstack.proxy.upstream_calls import UpstreamCalls

CRED = rpc.AuthSys(1000, 1000, (), "client").to_opaque()


class StandInPool:
    """Decodes each call; ``answer(call)`` gives the reply message."""

    def __init__(self, answer):
        self.answer = answer
        self.calls = []

    async def call(self, build_message, replayable, relay_to=None):
        call = rpc.decode_message(b"".join(bytes(b) for b in
                                           build_message(4242)))
        self.calls.append((call, replayable))
        await asyncio.sleep(0)
        reply = self.answer(call)
        if isinstance(reply, BaseException):
            raise reply
        return bytearray(reply)


def success(call, proc, result, encode_res=nfs3.encode_res):
    return rpc.accepted(call.xid, results=encode_res(proc, result))


def run(coroutine):
    return asyncio.run(coroutine)


def test_a_call_goes_with_the_given_credential_and_comes_back_decoded():
    fattr = nfs3.Fattr(const.FileType.NF3REG, 0o644, 1, 1, 1, 10, 10,
                       nfs3.SpecData(), 1, 2, nfs3.NfsTime(1, 0),
                       nfs3.NfsTime(1, 0), nfs3.NfsTime(1, 0))
    pool = StandInPool(lambda call: success(call, Nfs3Proc.GETATTR,
                                            nfs3.Result(0, nfs3.GetattrOk(
                                                fattr))))
    verf = rpc.OpaqueAuth(const.AuthFlavor.AUTH_NONE, b"")
    res = run(UpstreamCalls(pool).nfs(Nfs3Proc.GETATTR,
                                      nfs3.GetattrArgs(b"fh"), CRED, verf))
    assert res.ok and res.body.obj_attributes == fattr
    (call, replayable), = pool.calls
    assert (call.prog, call.vers, call.proc) == (const.NFS_PROGRAM, 3,
                                                 Nfs3Proc.GETATTR)
    assert call.cred == CRED and replayable
    assert nfs3.decode_args(Nfs3Proc.GETATTR, call.args).object == b"fh"


def test_mount_and_bulk_calls_use_their_programs():
    def answer(call):
        if call.prog == const.MOUNT_PROGRAM:
            return success(call, MountProc.MNT, nfs3.Result(
                0, mount3.MntOk(b"root", (1,))), mount3.encode_res)
        return success(call, bulk.BulkProc.READ, nfs3.Result(
            0, bulk.ReadOk(None, True, 2, bulk.Codec.NONE, b"ab")),
            bulk.encode_res)

    pool = StandInPool(answer)
    calls = UpstreamCalls(pool)
    mounted = run(calls.mount(MountProc.MNT, mount3.MntArgs("/srv"), CRED))
    read = run(calls.bulk(bulk.BulkProc.READ, bulk.ReadArgs(
        b"fh", 0, 2, bulk.Codec.NONE), CRED))
    assert mounted.body.fhandle == b"root" and read.body.data == b"ab"
    assert [(c.prog, c.vers) for c, _ in pool.calls] == [
        (const.MOUNT_PROGRAM, 3), (bulk.BULK_PROGRAM, bulk.BULK_VERSION)]


@pytest.mark.parametrize("reply,unavailable", [
    (rpc.Denied(1, const.RejectStat.AUTH_ERROR,
                const.AuthStat.AUTH_TOOWEAK), False),
    (rpc.Reply(1, const.AcceptStat.GARBAGE_ARGS), False),
    (rpc.Reply(1, const.AcceptStat.PROG_UNAVAIL), True),
    (rpc.Reply(1, const.AcceptStat.PROG_MISMATCH, mismatch=(1, 1)), True),
])
def test_a_refused_call_raises_call_refused(reply, unavailable):
    pool = StandInPool(lambda call: rpc.encode_message(reply))
    with pytest.raises(upstream_calls.CallRefused) as raised:
        run(UpstreamCalls(pool).bulk(bulk.BulkProc.READ, bulk.ReadArgs(
            b"fh", 0, 2, bulk.Codec.NONE), CRED))
    assert raised.value.reply == reply
    assert raised.value.program_unavailable == unavailable


@pytest.mark.parametrize("message", [
    b"\0\0\0\1",                                    # no message at all
    rpc.accepted(1, results=b"\0\0\0"),             # a truncated result
    rpc.encode_message(rpc.Call(1, 100003, 3, 0)),  # a call, not a reply
])
def test_a_garbled_reply_raises_garbled_reply(message):
    pool = StandInPool(lambda call: message)
    with pytest.raises(upstream_calls.GarbledReply):
        run(UpstreamCalls(pool).nfs(Nfs3Proc.GETATTR,
                                    nfs3.GetattrArgs(b"fh"), CRED))


def test_what_the_pool_raises_goes_through():
    pool = StandInPool(lambda call: UpstreamLost("gone"))
    with pytest.raises(UpstreamLost):
        run(UpstreamCalls(pool).nfs(Nfs3Proc.NULL, None, CRED))


# --- the cached READ path through the typed calls ---------------------------

SIZE = 10000
DATA = bytes(range(256)) * 40


def fattr(size=SIZE):
    t = nfs3.NfsTime(5, 0)
    return nfs3.Fattr(const.FileType.NF3REG, 0o644, 1, 1, 1, size, size,
                      nfs3.SpecData(), 1, 2, t, t, t)


class FileServer:
    """Answers GETATTR and READ of one file; READ with ``read_status``."""

    def __init__(self, read_status=0):
        self.read_status = read_status

    def __call__(self, call):
        args = nfs3.decode_args(call.proc, call.args)
        if call.proc == Nfs3Proc.GETATTR:
            return success(call, call.proc, nfs3.Result(0, nfs3.GetattrOk(
                fattr())))
        if self.read_status:
            return success(call, call.proc, nfs3.Result(
                self.read_status, nfs3.AttrBody(fattr())))
        data = DATA[args.offset:args.offset + args.count]
        return success(call, call.proc, nfs3.Result(0, nfs3.ReadOk(
            fattr(), len(data), args.offset + len(data) >= SIZE, data)))


def cache_over(tmp_path, answer):
    pool = StandInPool(answer)
    cache_counters = counters.CacheCounters()
    files = freshness.FileStates(cache_counters)
    policies = exports.ExportPolicies(3.0)
    cache = reads.CachedReads(
        fetch.Fetcher(BlockStore(str(tmp_path), Geometry(4096, 2, 16, 16)),
                      files, UpstreamCalls(pool), cache_counters, policies),
        files, cache_counters, policies,
        sizes=reads.ReadSizes(readahead=0))
    return cache, pool


def read_call(offset, count):
    return rpc.Call(9, const.NFS_PROGRAM, 3, Nfs3Proc.READ, CRED,
                    args=nfs3.encode_args(Nfs3Proc.READ, nfs3.ReadArgs(
                        b"fh", offset, count)))


def served(reply):
    message = b"".join(bytes(b) for b in reply)
    res = nfs3.decode_res(Nfs3Proc.READ, rpc.decode_message(message).results)
    return res.body.data


@pytest.mark.asyncio
async def test_a_read_is_fetched_with_the_client_credential_then_cached(
        tmp_path):
    cache, pool = cache_over(tmp_path, FileServer())
    first = served(await cache.read(read_call(100, 5000)))
    sent = len(pool.calls)
    again = served(await cache.read(read_call(100, 5000)))
    assert first == again == DATA[100:5100]
    assert len(pool.calls) == sent        # The second came from the cache.
    assert {call.cred for call, _ in pool.calls} == {CRED}


@pytest.mark.parametrize("answer", [
    FileServer(read_status=const.NfsStat.NFS3ERR_ACCES),
    lambda call: (FileServer()(call) if call.proc == Nfs3Proc.GETATTR else
                  rpc.accepted(call.xid, const.AcceptStat.SYSTEM_ERR)),
    lambda call: rpc.accepted(call.xid, const.AcceptStat.GARBAGE_ARGS),
])
def test_a_read_the_cache_cannot_serve_is_answered_none(tmp_path, answer):
    """The role forwards it: the server says what is wrong."""
    cache, _ = cache_over(tmp_path, answer)
    assert run(cache.read(read_call(0, 100))) is None


def test_a_lost_connection_is_not_taken_for_a_refusal(tmp_path):
    def answer(call):
        if call.proc == Nfs3Proc.GETATTR:
            return FileServer()(call)
        return UpstreamLost("gone")

    cache, _ = cache_over(tmp_path, answer)
    with pytest.raises(UpstreamLost):   # The role answers SYSTEM_ERR.
        run(cache.read(read_call(0, 100)))


# --- write-back's flush through the typed calls -----------------------------

class CommittingServer:
    """WRITE and COMMIT of one file; restarts before COMMIT ``restart``."""

    def __init__(self, restart=None, status=0):
        self.restart = restart
        self.status = status
        self.boot = 1
        self.commits = 0
        self.written = []

    def __call__(self, call):
        args = nfs3.decode_args(call.proc, call.args)
        after = nfs3.WccData(None, fattr(4096))
        if self.status:
            return success(call, call.proc, nfs3.Result(
                self.status, nfs3.WccBody(nfs3.WccData())))
        verf = b"boot%04d" % self.boot
        if call.proc == Nfs3Proc.WRITE:
            assert args.stable == const.StableHow.UNSTABLE
            self.written.append((args.offset, bytes(args.data)))
            return success(call, call.proc, nfs3.Result(0, nfs3.WriteOk(
                after, args.count, args.stable, verf)))
        self.commits += 1
        if self.commits == self.restart:
            self.boot += 1
            verf = b"boot%04d" % self.boot
        return success(call, call.proc, nfs3.Result(0, nfs3.CommitOk(
            after, verf)))


def journalled(tmp_path, pieces):
    """A journal holding ``pieces`` (offset, data) of one file."""
    journal = Journal(str(tmp_path / "journal"))
    dirty = dirty_mod.DirtyMap()
    cred = (CRED.flavor, CRED.body)
    for offset, data in pieces:
        segment, position, record = journal.append(b"fh", cred, offset,
                                                   data)
        dirty.add(b"fh", cred, dirty_mod.Extent(
            offset, len(data), segment, position, record), 0)
    return journal, dirty.get(b"fh")


def test_a_flush_sends_everything_again_when_the_verifier_changes(tmp_path):
    journal, dirty = journalled(tmp_path, [(0, b"a" * 3000),
                                           (3000, b"b" * 3000),
                                           (9000, b"c" * 100)])
    server = CommittingServer(restart=1)
    pool = StandInPool(server)
    writer = flush.FileWriter(journal, UpstreamCalls(pool), wsize=4096,
                              window=2)
    commit = run(writer.send(dirty, dirty.extents()))
    journal.close()
    assert commit.verf == b"boot0002" and server.commits == 2
    # Contiguous extents go together up to wsize.
    once = [(0, b"a" * 3000), (3000, b"b" * 3000), (9000, b"c" * 100)]
    assert sorted(server.written) == sorted(once * 2)
    assert {call.cred for call, _ in pool.calls} == {CRED}


@pytest.mark.parametrize("status,error", [
    (const.NfsStat.NFS3ERR_STALE, flush.Gone),
    (const.NfsStat.NFS3ERR_NOSPC, flush.FlushError),
])
def test_a_flush_the_server_refuses_raises(tmp_path, status, error):
    journal, dirty = journalled(tmp_path, [(0, b"a" * 100)])
    writer = flush.FileWriter(journal, UpstreamCalls(StandInPool(
        CommittingServer(status=status))), wsize=4096, window=2)
    with pytest.raises(error):
        run(writer.send(dirty, dirty.extents()))
    journal.close()
