# SPDX-License-Identifier: Apache-2.0
"""The server proxy's file-handle check, with a stand-in NFS server.

The stand-in answers MNT, LOOKUP and READDIRPLUS from a small tree, so
the walk and the decisions are checked without a network; the same check
against Ganesha, with real handles of a directory outside the allowed
one, is in tests/functional/test_proxy_chain.py.
"""

import asyncio

import pytest

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import MountProc
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import access
from gvfs_openstack.proxy import bulk_server
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy import exportguard
from gvfs_openstack.proxy import handles
from gvfs_openstack.proxy import roles
from gvfs_openstack.proxy.upstream import UpstreamLost
from gvfs_openstack.proxy.upstream_calls import UpstreamCalls

ROOT, GOLDEN, SUB, DEEP = b"root", b"golden", b"sub", b"deep"
#: The allowed root's parent, and a file of another export.
PARENT, SECRET = b"parent", b"secret"


def _attrs(ftype):
    t = nfs3.NfsTime(0, 0)
    return nfs3.Fattr(ftype, 0o755, 1, 0, 0, 0, 0, nfs3.SpecData(0, 0), 1,
                      1, t, t, t)


DIR, REG = const.FileType.NF3DIR, const.FileType.NF3REG
#: directory handle -> [(name, handle, type)]; "." and ".." as a server
#: lists them.
TREE = {
    ROOT: [(".", ROOT, DIR), ("..", PARENT, DIR), ("golden.img", GOLDEN, REG),
           ("sub", SUB, DIR)],
    SUB: [(".", SUB, DIR), ("..", ROOT, DIR), ("deep.img", DEEP, REG)],
    PARENT: [("secret.img", SECRET, REG)],
}
MOUNTS = {"/srv/images": ROOT, "/srv": PARENT}


class StandInServer:
    """An upstream pool that is a tiny NFS server, recording every call."""

    def __init__(self, fail=False, page=2):
        self.calls = []
        self.fail = fail
        self.page = page

    async def call(self, build_message, replayable, relay_to=None):
        message = rpc.decode_message(
            b"".join(bytes(b) for b in build_message(99)))
        self.calls.append((message.prog, message.proc))
        await asyncio.sleep(0)
        if self.fail:
            raise UpstreamLost("NFS server gone")
        return bytearray(rpc.encode_message(rpc.Reply(
            99, results=self._answer(message))))

    def start_relay(self, build_prefix, buffer, source_start, filled,
                    relay_to):
        self.calls.append("relay")
        return "relay"

    def _answer(self, message):
        if message.prog == const.MOUNT_PROGRAM:
            path = mount3.decode_args(MountProc.MNT, message.args).dirpath
            fh = MOUNTS.get(path)
            return mount3.encode_res(MountProc.MNT, nfs3.Result(
                0, mount3.MntOk(fh, (1,))) if fh else nfs3.Result(
                    const.MountStat.MNT3ERR_NOENT))
        proc = message.proc
        args = nfs3.decode_args(proc, message.args)
        if proc == Nfs3Proc.READDIRPLUS:
            listing = TREE[args.dir]
            start = args.cookie
            entries = tuple(
                nfs3.DirEntryPlus(i + 1, name, i + 1, _attrs(ftype), fh)
                for i, (name, fh, ftype) in enumerate(listing)
                if start <= i < start + self.page)
            return nfs3.encode_res(proc, nfs3.Result(0, nfs3.ReaddirplusOk(
                None, b"v" * 8, entries, start + self.page >= len(listing))))
        if proc == Nfs3Proc.LOOKUP:
            for name, fh, ftype in TREE.get(args.what.dir, ()):
                if name == args.what.name:
                    return nfs3.encode_res(proc, nfs3.Result(
                        0, nfs3.LookupOk(fh, _attrs(ftype), None)))
            return nfs3.encode_res(proc, nfs3.Result(
                const.NfsStat.NFS3ERR_NOENT, nfs3.AttrBody(None)))
        return nfs3.encode_res(proc, nfs3.Result(0, nfs3.GetattrOk(
            _attrs(REG)))) if proc == Nfs3Proc.GETATTR else b""


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def make_role(server=None, clock=None, limit=1024):
    server = server or StandInServer()
    exports = access.ExportAllowlist(["/srv/images"])
    calls = UpstreamCalls(server)
    guard = exportguard.ExportGuard(calls, calls, exports, rpc.AUTH_NONE,
                                    counters.GuardCounters(), limit=limit,
                                    rescan_interval=10,
                                    clock=clock or Clock())
    bulk = bulk_server.BulkServer(calls, counters.BulkServerCounters())
    role = roles.ServerRole(server, server, access.IdentityMap(42, 42),
                            exports, guard, bulk, counters.RoleCounters())
    return role, server


def nfs_call(proc, args, xid=7, prog=const.NFS_PROGRAM):
    message = rpc.encode_message(rpc.Call(
        xid, prog, 3 if prog != bulk.BULK_PROGRAM else bulk.BULK_VERSION,
        proc, rpc.AuthSys(1000, 1000).to_opaque(), args=args))
    return rpc.decode_message(message), bytearray(message)


def getattr_of(role, fh):
    reply = rpc.decode_message(asyncio.run(role.handle(*nfs_call(
        Nfs3Proc.GETATTR, nfs3.encode_args(Nfs3Proc.GETATTR,
                                           nfs3.GetattrArgs(fh))))))
    return nfs3.decode_res(Nfs3Proc.GETATTR, reply.results).status


def lookup(role, directory, name):
    reply = rpc.decode_message(asyncio.run(role.handle(*nfs_call(
        Nfs3Proc.LOOKUP, nfs3.encode_args(Nfs3Proc.LOOKUP, nfs3.LookupArgs(
            nfs3.DirOpArgs(directory, name)))))))
    return nfs3.decode_res(Nfs3Proc.LOOKUP, reply.results)


def nfs_calls(server):
    return [c for c in server.calls if c != "relay"
            and c[0] == const.NFS_PROGRAM and c[1] != Nfs3Proc.READDIRPLUS]


# --- the bookkeeping ---------------------------------------------------------

def test_named_handles_of_every_shape():
    assert handles.named_handles(Nfs3Proc.NULL, b"") == ()
    assert handles.named_handles(Nfs3Proc.READ, nfs3.encode_args(
        Nfs3Proc.READ, nfs3.ReadArgs(GOLDEN, 0, 10))) == (GOLDEN,)
    assert handles.named_handles(Nfs3Proc.RENAME, nfs3.encode_args(
        Nfs3Proc.RENAME, nfs3.RenameArgs(nfs3.DirOpArgs(ROOT, "a"),
                                         nfs3.DirOpArgs(SUB, "b")))) == \
        (ROOT, SUB)
    assert handles.named_handles(Nfs3Proc.LINK, nfs3.encode_args(
        Nfs3Proc.LINK, nfs3.LinkArgs(GOLDEN, nfs3.DirOpArgs(SUB, "b")))) \
        == (GOLDEN, SUB)
    with pytest.raises(ProtocolError):
        handles.named_handles(Nfs3Proc.GETATTR, b"\0\0\1\0")


def _lookup_reply(fh):
    return nfs3.encode_res(Nfs3Proc.LOOKUP, nfs3.Result(
        0, nfs3.LookupOk(fh, None, None)))


def test_handed_out_never_goes_up_or_stays_put():
    def args(name):
        return nfs3.encode_args(Nfs3Proc.LOOKUP, nfs3.LookupArgs(
            nfs3.DirOpArgs(ROOT, name)))

    assert handles.handed_out(Nfs3Proc.LOOKUP, args("golden.img"),
                              _lookup_reply(GOLDEN)) == (GOLDEN,)
    assert handles.handed_out(Nfs3Proc.LOOKUP, args(".."),
                              _lookup_reply(PARENT)) == ()
    assert handles.handed_out(Nfs3Proc.LOOKUP, args("."),
                              _lookup_reply(ROOT)) == ()
    listing = nfs3.encode_res(Nfs3Proc.READDIRPLUS, nfs3.Result(
        0, nfs3.ReaddirplusOk(None, b"v" * 8, (
            nfs3.DirEntryPlus(1, ".", 1, None, ROOT),
            nfs3.DirEntryPlus(2, "..", 2, None, PARENT),
            nfs3.DirEntryPlus(3, "golden.img", 3, None, GOLDEN),
            nfs3.DirEntryPlus(4, "nohandle", 4, None, None)), True)))
    listed = nfs3.encode_args(Nfs3Proc.READDIRPLUS, nfs3.ReaddirplusArgs(
        ROOT, 0, b"\0" * 8, 4096, 65536))
    assert handles.handed_out(Nfs3Proc.READDIRPLUS, listed, listing) == \
        (GOLDEN,)
    created = nfs3.encode_res(Nfs3Proc.CREATE, nfs3.Result(
        0, nfs3.NewObjOk(None, None, nfs3.WccData())))
    create = nfs3.encode_args(Nfs3Proc.CREATE, nfs3.CreateArgs(
        nfs3.DirOpArgs(ROOT, "new.img"), nfs3.CreateHow(
            const.CreateMode.UNCHECKED, nfs3.Sattr())))
    assert handles.handed_out(Nfs3Proc.CREATE, create, created) == ()
    failed = nfs3.encode_res(Nfs3Proc.LOOKUP, nfs3.Result(
        const.NfsStat.NFS3ERR_NOENT, nfs3.AttrBody(None)))
    assert handles.handed_out(Nfs3Proc.LOOKUP, args("x"), failed) == ()
    assert handles.handed_out(Nfs3Proc.LOOKUP, args("x"), b"\0\0") == ()


@pytest.mark.parametrize("proc", [p for p in Nfs3Proc
                                  if p != Nfs3Proc.NULL])
def test_every_refusal_decodes_as_stale(proc):
    res = nfs3.decode_res(proc, handles.refusal(proc))
    assert res.status == const.NfsStat.NFS3ERR_STALE


def test_least_recently_used_handles_go_first_and_roots_stay():
    admitted = handles.AdmittedHandles(limit=2)
    admitted.add(ROOT, root=True)
    admitted.add(GOLDEN)
    admitted.add(SUB)
    assert admitted.admits(GOLDEN)      # Now the most recently used.
    admitted.add(DEEP)
    assert not admitted.admits(SUB)
    assert admitted.admits(GOLDEN) and admitted.admits(DEEP)
    assert admitted.admits(ROOT) and len(admitted) == 3


# --- the server role ---------------------------------------------------------

def test_an_unknown_handle_is_found_by_walking_the_allowed_export():
    role, server = make_role()
    assert getattr_of(role, DEEP) == 0
    assert role.guard.counters.handle_walks == 1
    assert (const.MOUNT_PROGRAM, MountProc.MNT) in server.calls
    # The walk paged through READDIRPLUS and went down "sub".
    assert role.guard.counters.handles_found_by_walk == 4
    assert nfs_calls(server) == [(const.NFS_PROGRAM, Nfs3Proc.GETATTR)]
    assert getattr_of(role, GOLDEN) == 0
    assert role.guard.counters.handle_walks == 1


def test_a_handle_of_another_export_is_refused_and_never_forwarded():
    clock = Clock()
    role, server = make_role(clock=clock)
    assert getattr_of(role, SECRET) == const.NfsStat.NFS3ERR_STALE
    assert getattr_of(role, SECRET) == const.NfsStat.NFS3ERR_STALE
    assert nfs_calls(server) == []
    assert role.guard.counters.handles_refused == 2
    # The second was refused without a second walk ...
    assert role.guard.counters.handle_walks == 1
    clock.now += 11
    # ... and once the interval is over an unknown handle walks again.
    assert getattr_of(role, SECRET) == const.NfsStat.NFS3ERR_STALE
    assert role.guard.counters.handle_walks == 2


def test_the_parent_of_an_allowed_root_stays_out():
    role, server = make_role()
    assert getattr_of(role, GOLDEN) == 0
    res = lookup(role, ROOT, "..")
    assert res.ok and res.body.object == PARENT
    assert getattr_of(role, PARENT) == const.NfsStat.NFS3ERR_STALE


def test_looked_up_handles_are_admitted_without_a_walk():
    role, server = make_role()
    role.guard.handles.add(ROOT, root=True)
    assert lookup(role, ROOT, "sub").body.object == SUB
    assert lookup(role, SUB, "deep.img").body.object == DEEP
    assert getattr_of(role, DEEP) == 0
    assert role.guard.counters.handle_walks == 0


def test_a_mount_of_an_allowed_path_admits_its_root():
    role, server = make_role()
    asyncio.run(role.handle(*nfs_call(
        MountProc.MNT, mount3.encode_args(MountProc.MNT, mount3.MntArgs(
            "/srv/images")), prog=const.MOUNT_PROGRAM)))
    assert role.guard.admits((ROOT,))
    assert role.guard.counters.handle_walks == 0


def test_rename_into_an_unknown_directory_is_refused():
    role, server = make_role()
    role.guard.handles.add(ROOT, root=True)
    args = nfs3.encode_args(Nfs3Proc.RENAME, nfs3.RenameArgs(
        nfs3.DirOpArgs(ROOT, "golden.img"),
        nfs3.DirOpArgs(PARENT, "stolen.img")))
    reply = rpc.decode_message(asyncio.run(role.handle(*nfs_call(
        Nfs3Proc.RENAME, args))))
    res = nfs3.decode_res(Nfs3Proc.RENAME, reply.results)
    assert res.status == const.NfsStat.NFS3ERR_STALE
    assert nfs_calls(server) == []


def test_a_bulk_read_of_an_unknown_handle_is_refused():
    role, server = make_role()
    reply = rpc.decode_message(asyncio.run(role.handle(*nfs_call(
        bulk.BulkProc.READ, bulk.encode_args(bulk.BulkProc.READ,
                                             bulk.ReadArgs(SECRET, 0, 1024)),
        prog=bulk.BULK_PROGRAM))))
    res = bulk.decode_res(bulk.BulkProc.READ, reply.results)
    assert res.status == const.NfsStat.NFS3ERR_STALE
    assert nfs_calls(server) == []


def test_a_garbled_handle_is_garbage_args():
    role, server = make_role()
    reply = rpc.decode_message(asyncio.run(role.handle(*nfs_call(
        Nfs3Proc.GETATTR, b"\0\0\1\0"))))
    assert reply.accept_stat == const.AcceptStat.GARBAGE_ARGS
    assert server.calls == []


#: Names the server's file system would read as another name.
TWO_FACED = ("images\0", "..\0", ".gvfs-meta.golden\0.profile", "a/b",
             "images/", "/")


def _naming_calls(name):
    """Every procedure that carries a file name, with ``name`` in it."""
    where = nfs3.DirOpArgs(ROOT, name)
    other = nfs3.DirOpArgs(SUB, "b")
    return {
        Nfs3Proc.LOOKUP: nfs3.LookupArgs(where),
        Nfs3Proc.CREATE: nfs3.CreateArgs(where, nfs3.CreateHow(
            const.CreateMode.UNCHECKED, nfs3.Sattr(mode=0o644))),
        Nfs3Proc.MKDIR: nfs3.MkdirArgs(where, nfs3.Sattr(mode=0o755)),
        Nfs3Proc.SYMLINK: nfs3.SymlinkArgs(where, nfs3.Sattr(), "target"),
        Nfs3Proc.REMOVE: nfs3.RemoveArgs(where),
        Nfs3Proc.RMDIR: nfs3.RemoveArgs(where),
        Nfs3Proc.MKNOD: nfs3.MknodArgs(where, nfs3.MknodData(
            const.FileType.NF3FIFO, nfs3.Sattr(mode=0o644))),
        Nfs3Proc.RENAME: nfs3.RenameArgs(where, other),
        Nfs3Proc.LINK: nfs3.LinkArgs(GOLDEN, where),
    }


@pytest.mark.parametrize("name", TWO_FACED)
def test_a_name_with_a_nul_or_a_slash_is_garbage_and_never_forwarded(name):
    """A name the DTN would read as another is refused whole.

    NFS-Ganesha cuts a name at its NUL: every check by name here would
    see another name than the DTN's file system.  Refused as Linux's
    nfsd refuses it, on every procedure that names one and on either
    side of a RENAME.
    """
    calls = dict(_naming_calls(name))
    calls["rename to"] = nfs3.RenameArgs(nfs3.DirOpArgs(SUB, "b"),
                                         nfs3.DirOpArgs(ROOT, name))
    for proc, args in calls.items():
        proc = Nfs3Proc.RENAME if proc == "rename to" else proc
        encoded = nfs3.encode_args(proc, args)
        with pytest.raises(ProtocolError):
            handles.named_handles(proc, encoded)
        role, server = make_role()
        reply = rpc.decode_message(asyncio.run(role.handle(*nfs_call(
            proc, encoded))))
        assert reply.accept_stat == const.AcceptStat.GARBAGE_ARGS, proc
        assert nfs_calls(server) == [], proc


def test_lawful_names_still_pass_on_every_naming_procedure():
    for proc, args in _naming_calls("golden.img").items():
        handles.named_handles(proc, nfs3.encode_args(proc, args))


def test_a_failed_walk_is_a_system_error_and_is_tried_again():
    server = StandInServer(fail=True)
    role, _ = make_role(server)
    reply = rpc.decode_message(asyncio.run(role.handle(*nfs_call(
        Nfs3Proc.GETATTR, nfs3.encode_args(Nfs3Proc.GETATTR,
                                           nfs3.GetattrArgs(DEEP))))))
    assert reply.accept_stat == const.AcceptStat.SYSTEM_ERR
    server.fail = False
    assert getattr_of(role, DEEP) == 0
    assert role.guard.counters.handle_walks == 2


@pytest.mark.asyncio
async def test_concurrent_unknown_handles_share_one_walk():
    role, server = make_role()
    await asyncio.gather(
        role.handle(*nfs_call(Nfs3Proc.GETATTR, nfs3.encode_args(
            Nfs3Proc.GETATTR, nfs3.GetattrArgs(DEEP)))),
        role.handle(*nfs_call(Nfs3Proc.GETATTR, nfs3.encode_args(
            Nfs3Proc.GETATTR, nfs3.GetattrArgs(GOLDEN)))))
    assert role.guard.counters.handle_walks == 1
    assert len(nfs_calls(server)) == 2


def test_a_write_is_relayed_only_with_a_known_handle():
    role, server = make_role()
    role.guard.handles.add(GOLDEN)
    for fh, relayed in ((GOLDEN, "relay"), (SECRET, None)):
        _, record = nfs_call(Nfs3Proc.WRITE, nfs3.encode_args(
            Nfs3Proc.WRITE, nfs3.WriteArgs(fh, 0, 4, 0, b"data")))
        assert role.relay_call(record, len(record), None) == relayed
    assert server.calls == ["relay"]


@pytest.mark.asyncio
async def test_a_walk_whose_callers_all_went_away_still_ends_cleanly():
    clock = Clock()
    role, server = make_role(clock=clock)

    def getattr_call(fh):
        return role.handle(*nfs_call(Nfs3Proc.GETATTR, nfs3.encode_args(
            Nfs3Proc.GETATTR, nfs3.GetattrArgs(fh))))

    first = asyncio.ensure_future(getattr_call(DEEP))
    for _ in range(3):
        await asyncio.sleep(0)   # The walk has begun.
    first.cancel()
    for _ in range(50):
        await asyncio.sleep(0)   # ... and ends with nobody waiting.
    assert role.guard.admits((DEEP, GOLDEN, SUB))
    clock.now += 11
    # The next unknown handle walks again, as for any other.
    reply = rpc.decode_message(await getattr_call(SECRET))
    status = nfs3.decode_res(Nfs3Proc.GETATTR, reply.results).status
    assert status == const.NfsStat.NFS3ERR_STALE
    assert role.guard.counters.handle_walks == 2
