# SPDX-License-Identifier: Apache-2.0
"""UNSTABLE WRITEs answered ahead of the server (client role).

A gated stand-in for the upstream pool holds each call until the test
lets it go, so that what is answered before the server is seen; real
forwarding, and a WRITE lost on a cut link, are covered against Ganesha
in tests/functional/test_proxy_chain.py.
"""

import asyncio

import pytest

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.const import NfsStat
from gvfs_openstack.nfs.const import StableHow
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy import roles
from gvfs_openstack.proxy import write_behind

FH = b"handle-of-a-new-image"
OTHER = b"handle-of-another-file"
SERVER_VERF = b"srvverf1"


class GatedPool:
    """Answers each call as the server would, once the test says so."""

    def __init__(self):
        self.sent = []
        #: Bytes of early WRITEs still unanswered when each call was sent.
        self.behind_then = []
        self.behind = None
        self.gate = asyncio.Event()
        self.gate.set()
        self.write_status = {}      # offset -> NFS status of its WRITE
        self.short = set()          # offsets of WRITEs taken only in part
        self.server_verf = SERVER_VERF

    async def call(self, build_message, replayable, relay_to=None):
        message = b"".join(bytes(b) for b in build_message(777))
        call = rpc.decode_message(message)
        self.sent.append(call)
        if self.behind is not None:
            self.behind_then.append(self.behind.bytes_in_flight)
        await self.gate.wait()
        if call.prog == bulk.BULK_PROGRAM:     # A READ: no such file.
            return bytearray(rpc.accepted(777, results=bulk.encode_res(
                call.proc, nfs3.Result(NfsStat.NFS3ERR_STALE,
                                       nfs3.AttrBody(None)))))
        args = nfs3.decode_args(call.proc, call.args)
        if call.proc == Nfs3Proc.WRITE:
            status = self.write_status.get(args.offset, 0)
            taken = args.count // 2 if args.offset in self.short \
                else args.count
            res = nfs3.Result(status, nfs3.WriteOk(
                nfs3.WccData(), taken, StableHow.FILE_SYNC,
                self.server_verf) if status == 0 else
                nfs3.WccBody(nfs3.WccData()))
        elif call.proc == Nfs3Proc.COMMIT:
            res = nfs3.Result(0, nfs3.CommitOk(nfs3.WccData(),
                                               self.server_verf))
        else:   # GETATTR: the answer does not matter here.
            res = nfs3.Result(NfsStat.NFS3ERR_STALE, None)
        return bytearray(rpc.accepted(777, results=nfs3.encode_res(
            call.proc, res)))

    def procs(self):
        return [c.proc for c in self.sent]


def _call(proc, args, xid=5):
    cred = rpc.AuthSys(1000, 1000, (1000,)).to_opaque()
    message = rpc.encode_message(rpc.Call(
        xid, const.NFS_PROGRAM, 3, proc, cred,
        args=nfs3.encode_args(proc, args)))
    return rpc.decode_message(message), bytearray(message)


def _write(offset, size=4096, stable=StableHow.UNSTABLE, fh=FH, xid=5):
    return _call(Nfs3Proc.WRITE, nfs3.WriteArgs(
        fh, offset, size, stable, b"x" * size), xid)


def _commit(fh=FH):
    return _call(Nfs3Proc.COMMIT, nfs3.CommitArgs(fh, 0, 0))


def _result(proc, reply):
    return nfs3.decode_res(proc, rpc.results_of(reply))


def _role(pool, window=1 << 20, epoch=b"epoch--1"):
    behind = write_behind.WriteBehind(window, counters.WriteBehindCounters(),
                                      epoch=epoch)
    pool.behind = behind
    return roles.ClientRole(pool, counters.RoleCounters(),
                            write_behind=behind), behind


async def _writing(window=1 << 20):
    """A role that learnt the server's verifier; the upstream held."""
    pool = GatedPool()
    role, behind = _role(pool, window)
    await role.handle(*_write(0))
    pool.gate.clear()
    return pool, role, behind


async def _settled():
    for _ in range(20):
        await asyncio.sleep(0)


def test_write_head_reads_the_arguments_before_the_data():
    args = nfs3.encode_args(Nfs3Proc.WRITE, nfs3.WriteArgs(
        FH, 1 << 40, 3, StableHow.DATA_SYNC, b"abc"))
    assert write_behind.write_head(args) == (FH, 1 << 40, 3,
                                             StableHow.DATA_SYNC, 3)


@pytest.mark.asyncio
async def test_after_the_first_write_unstable_writes_are_answered_first():
    pool = GatedPool()
    role, behind = _role(pool)
    first = _result(Nfs3Proc.WRITE, await role.handle(*_write(0)))
    # The server's verifier is not the client's to see.
    assert first.body.verf == behind.verifier(SERVER_VERF) != SERVER_VERF
    pool.gate.clear()
    early = await asyncio.wait_for(role.handle(*_write(4096, xid=9)), 1)
    assert rpc.read_xid(early) == 9
    res = _result(Nfs3Proc.WRITE, early)
    assert res.ok and res.body.count == 4096
    assert res.body.committed == StableHow.UNSTABLE
    assert res.body.verf == first.body.verf
    assert behind.bytes_in_flight == 4096
    pool.gate.set()
    await _settled()
    assert behind.bytes_in_flight == 0
    assert behind.counters.write_behind_answered == 1
    assert pool.procs() == [Nfs3Proc.WRITE, Nfs3Proc.WRITE]


@pytest.mark.parametrize("stable", [StableHow.DATA_SYNC,
                                    StableHow.FILE_SYNC])
@pytest.mark.asyncio
async def test_stable_writes_wait_for_the_server(stable):
    pool, role, behind = await _writing()
    pending = asyncio.ensure_future(
        role.handle(*_write(4096, stable=stable)))
    await _settled()
    assert not pending.done()
    pool.gate.set()
    assert _result(Nfs3Proc.WRITE, await pending).ok


@pytest.mark.asyncio
async def test_commit_and_other_calls_wait_for_the_files_writes():
    pool, role, behind = await _writing()
    await role.handle(*_write(4096))
    commit = asyncio.ensure_future(role.handle(*_commit()))
    getattr_ = asyncio.ensure_future(role.handle(*_call(
        Nfs3Proc.GETATTR, nfs3.GetattrArgs(FH))))
    other = asyncio.ensure_future(role.handle(*_call(
        Nfs3Proc.GETATTR, nfs3.GetattrArgs(OTHER))))
    await _settled()
    # Another file's call goes on; this file's wait for its WRITE.
    assert pool.procs() == [Nfs3Proc.WRITE, Nfs3Proc.WRITE,
                            Nfs3Proc.GETATTR]
    assert not commit.done() and not getattr_.done()
    pool.gate.set()
    res = _result(Nfs3Proc.COMMIT, await commit)
    assert res.ok and res.body.verf == behind.verifier(SERVER_VERF)
    await getattr_
    await other
    assert sorted(pool.procs()[3:]) == [Nfs3Proc.GETATTR,
                                        Nfs3Proc.COMMIT]
    # The early WRITE counts itself; the other file's GETATTR went
    # while it was in flight, this file's calls once it was not.
    assert pool.behind_then == [0, 4096, 4096, 0, 0]


@pytest.mark.asyncio
async def test_a_file_written_without_pause_does_not_hold_its_commit_forever():
    pool, role, behind = await _writing()
    await role.handle(*_write(4096))
    commit = asyncio.ensure_future(role.handle(*_commit()))
    await _settled()
    pool.gate.set()
    # More WRITEs keep coming while the COMMIT waits for the first.
    for n in range(2, 400):
        await role.handle(*_write(n * 4096))
        await asyncio.sleep(0)
        if commit.done():
            break
    assert commit.done(), "the COMMIT waits as long as WRITEs come"
    assert _result(Nfs3Proc.COMMIT, commit.result()).ok


@pytest.mark.asyncio
async def test_a_bulk_channel_read_of_the_file_waits_for_its_writes():
    pool, role, behind = await _writing()
    await role.handle(*_write(4096))
    message = rpc.encode_message(rpc.Call(
        6, bulk.BULK_PROGRAM, bulk.BULK_VERSION, bulk.BulkProc.READ,
        rpc.AuthSys(1000, 1000, (1000,)).to_opaque(),
        args=bulk.encode_args(bulk.BulkProc.READ, bulk.ReadArgs(
            FH, 0, 8192, bulk.Codec.ZSTD))))
    read = asyncio.ensure_future(role.handle(
        rpc.decode_message(message), bytearray(message)))
    await _settled()
    assert not read.done() and len(pool.sent) == 2
    pool.gate.set()
    await asyncio.wait_for(read, 1)
    assert pool.behind_then[-1] == 0


@pytest.mark.asyncio
async def test_an_overlapping_write_waits_for_the_one_in_flight():
    pool, role, behind = await _writing()
    await role.handle(*_write(4096))
    second = asyncio.ensure_future(role.handle(*_write(6000)))
    await _settled()
    assert not second.done() and len(pool.sent) == 2
    pool.gate.set()
    assert _result(Nfs3Proc.WRITE, await second).ok


@pytest.mark.asyncio
async def test_the_window_bounds_the_bytes_in_flight():
    pool, role, behind = await _writing(window=8192)
    await role.handle(*_write(4096))
    await role.handle(*_write(8192))
    third = asyncio.ensure_future(role.handle(*_write(12288)))
    await _settled()
    assert not third.done() and behind.bytes_in_flight == 8192
    pool.gate.set()
    await asyncio.wait_for(third, 1)
    await _settled()
    assert behind.bytes_in_flight == 0


@pytest.mark.asyncio
async def test_a_write_that_fails_upstream_is_reported_by_the_next_commit():
    pool = GatedPool()
    role, behind = _role(pool)
    await role.handle(*_write(0))
    pool.write_status[4096] = NfsStat.NFS3ERR_NOSPC
    early = _result(Nfs3Proc.WRITE, await role.handle(*_write(4096)))
    assert early.ok     # Answered before the server said no.
    await _settled()
    assert behind.counters.write_behind_failed == 1
    # A client that checks verifiers sends its WRITEs again ...
    assert behind.verifier(SERVER_VERF) != early.body.verf
    # ... one that does not learns it at its COMMIT.
    commit = _result(Nfs3Proc.COMMIT, await role.handle(*_commit()))
    assert commit.status == NfsStat.NFS3ERR_IO
    # WRITEs sent again go through, with their own errors ...
    again = _result(Nfs3Proc.WRITE, await role.handle(*_write(4096)))
    assert again.status == NfsStat.NFS3ERR_NOSPC
    del pool.write_status[4096]
    assert _result(Nfs3Proc.WRITE, await role.handle(*_write(4096))).ok
    # ... while other files' WRITEs are still answered first ...
    pool.gate.clear()
    await asyncio.wait_for(role.handle(*_write(0, fh=OTHER)), 1)
    pool.gate.set()
    await _settled()
    # ... until a COMMIT succeeds; then they are answered first again.
    assert _result(Nfs3Proc.COMMIT, await role.handle(*_commit())).ok
    pool.gate.clear()
    await asyncio.wait_for(role.handle(*_write(8192)), 1)
    pool.gate.set()
    await _settled()
    assert behind.counters.write_behind_commits_failed == 1


@pytest.mark.asyncio
async def test_a_write_the_server_took_only_in_part_fails_the_commit():
    pool = GatedPool()
    role, behind = _role(pool)
    await role.handle(*_write(0))
    pool.short.add(4096)
    assert _result(Nfs3Proc.WRITE, await role.handle(*_write(4096))) \
        .body.count == 4096
    await _settled()
    commit = _result(Nfs3Proc.COMMIT, await role.handle(*_commit()))
    assert commit.status == NfsStat.NFS3ERR_IO


@pytest.mark.asyncio
async def test_a_record_shorter_than_its_data_is_left_to_the_server():
    pool = GatedPool()
    role, behind = _role(pool)
    await role.handle(*_write(0))
    call, record = _write(4096)
    # Cut the data short: the server, not the proxy, answers that.
    call = call.__class__(**{**{f: getattr(call, f) for f in
                                call.__dataclass_fields__},
                             "args": call.args[:-100]})
    head = write_behind.write_head(call.args)
    assert head.data_length == -1 and not behind.eligible(head)
    await role.handle(call, record)
    assert behind.counters.write_behind_answered == 0


@pytest.mark.asyncio
async def test_a_lost_upstream_connection_counts_as_a_failed_write():
    class DyingPool(GatedPool):
        dead = False

        async def call(self, build_message, replayable, relay_to=None):
            if self.dead:
                raise ConnectionResetError("tunnel cut")
            return await super().call(build_message, replayable, relay_to)

    pool = DyingPool()
    role, behind = _role(pool)
    await role.handle(*_write(0))
    pool.dead = True
    assert _result(Nfs3Proc.WRITE, await role.handle(*_write(4096))).ok
    await _settled()
    pool.dead = False
    commit = _result(Nfs3Proc.COMMIT, await role.handle(*_commit()))
    assert commit.status == NfsStat.NFS3ERR_IO


def test_the_verifier_changes_with_the_server_and_with_a_restart():
    one = write_behind.WriteBehind(1, epoch=b"epoch--1")
    again = write_behind.WriteBehind(1, epoch=b"epoch--1")
    restarted = write_behind.WriteBehind(1, epoch=b"epoch--2")
    assert one.verifier(SERVER_VERF) == again.verifier(SERVER_VERF)
    assert one.verifier(SERVER_VERF) != one.verifier(b"srvverf2")
    assert one.verifier(SERVER_VERF) != restarted.verifier(SERVER_VERF)
    assert write_behind.WriteBehind(1).epoch != \
        write_behind.WriteBehind(1).epoch


@pytest.mark.asyncio
async def test_without_write_behind_every_write_waits_for_the_server():
    pool = GatedPool()
    role = roles.ClientRole(pool, counters.RoleCounters())
    await role.handle(*_write(0))
    pool.gate.clear()
    pending = asyncio.ensure_future(role.handle(*_write(4096)))
    await _settled()
    assert not pending.done()
    pool.gate.set()
    res = _result(Nfs3Proc.WRITE, await pending)
    assert res.body.verf == SERVER_VERF


@pytest.mark.asyncio
async def test_a_clean_stop_waits_for_the_writes_in_flight():
    pool, role, behind = await _writing()
    await role.handle(*_write(4096))
    assert not await behind.drain(0.05)
    asyncio.get_running_loop().call_later(0.05, pool.gate.set)
    assert await behind.drain(5)
    assert behind.idle and behind.bytes_in_flight == 0
