# SPDX-License-Identifier: Apache-2.0
"""The roles' decisions, with a recording stand-in for the upstream pool.

The pool is the only stand-in: real forwarding is covered by the functional
tests against Ganesha; here we check what each role sends and answers.
"""

import asyncio

import pytest

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import MountProc
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import access
from gvfs_openstack.proxy import bulk_server
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy import exportguard
from gvfs_openstack.proxy import roles
from gvfs_openstack.proxy.upstream import UpstreamLost
from gvfs_openstack.proxy.upstream_calls import UpstreamCalls


class RecordingPool:
    def __init__(self, results=b"", fail=False):
        self.sent = []
        self.results = results
        self.fail = fail

    async def call(self, build_message, replayable, relay_to=None):
        message = b"".join(bytes(b) for b in build_message(777))
        self.sent.append((rpc.decode_message(message), replayable))
        await asyncio.sleep(0)
        if self.fail:
            raise UpstreamLost("gone")
        return bytearray(rpc.encode_message(rpc.Reply(777,
                                                      results=self.results)))


def call(proc, prog=const.NFS_PROGRAM, cred=None, args=b"", xid=5, vers=3):
    cred = cred or rpc.AuthSys(1000, 1000, (1000,)).to_opaque()
    message = rpc.encode_message(rpc.Call(xid, prog, vers, proc, cred,
                                          args=args))
    return rpc.decode_message(message), bytearray(message)


#: A handle the server role's guard already admits.
FH = b"handle-of-an-image"


def server_role(pool, mount_pool=None):
    exports = access.ExportAllowlist(["/srv/images"])
    guard = exportguard.ExportGuard(UpstreamCalls(pool),
                                    UpstreamCalls(mount_pool or pool),
                                    exports,
                                    rpc.AUTH_NONE, counters.GuardCounters())
    guard.handles.add(FH)
    bulk = bulk_server.BulkServer(UpstreamCalls(pool),
                                  counters.BulkServerCounters())
    return roles.ServerRole(
        pool, mount_pool or pool, access.IdentityMap(4242, 4242), exports,
        guard, bulk, counters.RoleCounters())


def client_role(pool):
    return roles.ClientRole(pool, counters.RoleCounters())


def getattr_args(fh=FH):
    return nfs3.encode_args(Nfs3Proc.GETATTR, nfs3.GetattrArgs(fh))


def run(coro):
    return asyncio.run(coro)


def test_server_role_rewrites_credentials_and_xid():
    pool = RecordingPool(b"\0\0\0\0")
    reply = run(server_role(pool).handle(*call(Nfs3Proc.GETATTR,
                                               args=getattr_args())))
    sent, replayable = pool.sent[0]
    assert rpc.AuthSys.from_opaque(sent.cred) == AuthSysFile
    assert sent.xid == 777 and replayable
    assert rpc.decode_message(reply).xid == 5


AuthSysFile = rpc.AuthSys(4242, 4242, ())


def test_server_role_refuses_auth_none_for_real_procedures():
    pool = RecordingPool()
    reply = rpc.decode_message(run(server_role(pool).handle(
        *call(Nfs3Proc.READ, cred=rpc.AUTH_NONE))))
    assert isinstance(reply, rpc.Denied)
    assert reply.auth_stat == const.AuthStat.AUTH_TOOWEAK
    assert pool.sent == []


def test_server_role_refuses_garbled_auth_sys():
    reply = rpc.decode_message(run(server_role(RecordingPool()).handle(
        *call(Nfs3Proc.READ, cred=rpc.OpaqueAuth(1, b"\0\0")))))
    assert reply.auth_stat == const.AuthStat.AUTH_BADCRED


def test_mount_of_a_path_outside_the_allowlist_is_refused_locally():
    pool = RecordingPool()
    args = mount3.encode_args(MountProc.MNT, mount3.MntArgs("/etc"))
    reply = rpc.decode_message(run(server_role(pool).handle(
        *call(MountProc.MNT, const.MOUNT_PROGRAM, args=args))))
    res = mount3.decode_res(MountProc.MNT, reply.results)
    assert res.status == const.MountStat.MNT3ERR_ACCES
    assert pool.sent == []


def test_export_list_is_filtered_to_the_allowlist():
    listing = mount3.encode_res(MountProc.EXPORT, mount3.ExportList((
        mount3.ExportNode("/srv/images", ()),
        mount3.ExportNode("/secret", ()))))
    reply = rpc.decode_message(run(server_role(RecordingPool(listing)).handle(
        *call(MountProc.EXPORT, const.MOUNT_PROGRAM))))
    exports = mount3.decode_res(MountProc.EXPORT, reply.results).exports
    assert [e.directory for e in exports] == ["/srv/images"]


def test_the_mount_list_is_nobodys_business():
    """DUMP is answered empty, without asking the NFS server."""
    pool = RecordingPool(mount3.encode_res(MountProc.DUMP, mount3.MountList(
        (mount3.MountEntry("127.0.0.1", "/srv/images/other"),))))
    reply = rpc.decode_message(run(server_role(pool).handle(
        *call(MountProc.DUMP, const.MOUNT_PROGRAM))))
    assert mount3.decode_res(MountProc.DUMP, reply.results).entries == ()
    assert pool.sent == []


@pytest.mark.parametrize("prog,vers,expected", [
    (100099, 1, const.AcceptStat.PROG_UNAVAIL),
    (const.NFS_PROGRAM, 4, const.AcceptStat.PROG_MISMATCH),
])
def test_unknown_programs_and_versions_are_answered_locally(prog, vers,
                                                            expected):
    pool = RecordingPool()
    reply = rpc.decode_message(run(client_role(pool).handle(
        *call(0, prog, vers=vers))))
    assert reply.accept_stat == expected and pool.sent == []


def test_non_idempotent_calls_are_not_replayed_by_the_server_role():
    pool = RecordingPool(nfs3.encode_res(Nfs3Proc.REMOVE, nfs3.Result(
        0, nfs3.WccBody(nfs3.WccData()))))
    args = nfs3.encode_args(Nfs3Proc.REMOVE, nfs3.RemoveArgs(
        nfs3.DirOpArgs(FH, "old.img")))
    run(server_role(pool).handle(*call(Nfs3Proc.REMOVE, args=args)))
    assert pool.sent[0][1] is False


@pytest.mark.asyncio
async def test_repeated_non_idempotent_call_is_answered_from_the_cache():
    pool = RecordingPool(b"\0\0\0\0")
    role = client_role(pool)
    first = await role.handle(*call(Nfs3Proc.CREATE, xid=9))
    second = await role.handle(*call(Nfs3Proc.CREATE, xid=9))
    assert bytes(first) == bytes(second)
    assert len(pool.sent) == 1
    assert role.counters.drc_hits == 1


def test_upstream_failure_becomes_system_err():
    reply = rpc.decode_message(run(client_role(
        RecordingPool(fail=True)).handle(*call(Nfs3Proc.CREATE))))
    assert reply.accept_stat == const.AcceptStat.SYSTEM_ERR


def test_wrong_rpc_version_gets_rpc_mismatch():
    c, record = call(0)
    c = rpc.Call(c.xid, c.prog, c.vers, c.proc, rpc.AUTH_NONE, rpcvers=3)
    reply = rpc.decode_message(run(client_role(RecordingPool()).handle(
        c, record)))
    assert reply.reject_stat == const.RejectStat.RPC_MISMATCH


def test_an_unexpected_failure_still_gets_a_reply():
    class BrokenPool(RecordingPool):
        async def call(self, build_message, replayable, relay_to=None):
            raise RuntimeError("bug")

    reply = rpc.decode_message(run(client_role(BrokenPool()).handle(
        *call(Nfs3Proc.GETATTR))))
    assert reply.accept_stat == const.AcceptStat.SYSTEM_ERR
