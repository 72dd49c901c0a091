# SPDX-License-Identifier: Apache-2.0
"""Write-back answers as the server would once its dirty bytes are there.

The client role with a real cache, journal and write-back in front of a
small NFSv3 server kept in memory: the only stand-in, in the place of the
upstream pool (as in test_roles).  Each test is a sequence the
differential test (gvfs_lab/differential.py) found answered otherwise
than by Ganesha: a WRITE of no bytes, attributes of a dirty file after a
LINK or a REMOVE of another link, replies other than GETATTR carrying
them, COMMIT of a directory, a dirty file removed.
"""

import asyncio
import dataclasses
import itertools

import pytest

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import FileType
from gvfs_openstack.nfs.const import Nfs3Proc as P
from gvfs_openstack.nfs.const import NfsStat
from gvfs_openstack.nfs.const import StableHow
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.cache.dirty import DirtyMap
from gvfs_openstack.proxy.cache.dirty import Extent
from gvfs_openstack.proxy.cache import exports
from gvfs_openstack.proxy.cache import fetch
from gvfs_openstack.proxy.cache import freshness
from gvfs_openstack.proxy.cache import journal
from gvfs_openstack.proxy.cache import reads
from gvfs_openstack.proxy.cache.store import BlockStore
from gvfs_openstack.proxy.cache.store import Geometry
from gvfs_openstack.proxy.cache import updates
from gvfs_openstack.proxy.cache import writeback
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy import roles
from gvfs_openstack.proxy.upstream_calls import UpstreamCalls

MIB = 1024 * 1024


# --- the server ---------------------------------------------------------

@dataclasses.dataclass
class Inode:
    fileid: int
    type: FileType
    mode: int
    ctime: int
    mtime: int
    nlink: int = 1
    data: bytearray = dataclasses.field(default_factory=bytearray)
    entries: dict = dataclasses.field(default_factory=dict)


def _time(tick):
    return nfs3.NfsTime(1000 + tick // 10 ** 9, tick % 10 ** 9)


class MemoryServer:
    """An NFSv3 server in memory, answering as an upstream pool.

    Enough of it for these tests: a file's handle goes STALE with its
    last link, COMMIT of anything but a file is refused, every change
    moves the ctime on.
    """

    def __init__(self):
        self.ticks = itertools.count(1)
        self.inodes = {}
        self.root = self._new(FileType.NF3DIR, 0o755)
        self.root.nlink = 2
        #: Procedures received, in order.
        self.calls = []

    def _new(self, kind, mode):
        tick = next(self.ticks)
        inode = Inode(len(self.inodes) + 1, kind, mode, tick, tick)
        self.inodes[inode.fileid] = inode
        return inode

    def _touch(self, inode, data=False):
        inode.ctime = next(self.ticks)
        if data:
            inode.mtime = inode.ctime

    @staticmethod
    def fh(inode):
        return b"memory-fh-%d" % inode.fileid

    def _inode(self, fh):
        fh = bytes(fh)
        if not fh.startswith(b"memory-fh-"):
            return None
        return self.inodes.get(int(fh[len(b"memory-fh-"):]))

    def fattr(self, inode):
        size = len(inode.data)
        return nfs3.Fattr(inode.type, inode.mode, inode.nlink, 0, 0, size,
                          size, nfs3.SpecData(), 1, inode.fileid,
                          _time(inode.mtime), _time(inode.mtime),
                          _time(inode.ctime))

    def _wcc(self, inode, before=None):
        return nfs3.WccData(before, self.fattr(inode) if inode else None)

    @staticmethod
    def _pre(inode):
        return nfs3.WccAttr(len(inode.data), _time(inode.mtime),
                            _time(inode.ctime))

    def _unlink(self, inode):
        inode.nlink -= 1
        self._touch(inode)
        if not inode.nlink:
            del self.inodes[inode.fileid]

    async def call(self, build_message, replayable, relay_to=None):
        message = b"".join(bytes(b) for b in build_message(777))
        call = rpc.decode_message(message)
        proc = P(call.proc)
        self.calls.append(proc)
        res = getattr(self, "_" + proc.name.lower())(
            nfs3.decode_args(proc, call.args))
        await asyncio.sleep(0)
        return bytearray(rpc.accepted(777, results=nfs3.encode_res(proc,
                                                                   res)))

    # --- procedures: each returns an nfs3.Result --------------------------

    def _getattr(self, args):
        inode = self._inode(args.object)
        if inode is None:
            return nfs3.Result(NfsStat.NFS3ERR_STALE)
        return nfs3.Result(0, nfs3.GetattrOk(self.fattr(inode)))

    def _setattr(self, args):
        inode = self._inode(args.object)
        if inode is None:
            return nfs3.Result(NfsStat.NFS3ERR_STALE,
                               nfs3.WccBody(nfs3.WccData()))
        before = self._pre(inode)
        new = args.new_attributes
        if new.size is not None:
            del inode.data[new.size:]
            inode.data.extend(bytes(new.size - len(inode.data)))
        if new.mode is not None:
            inode.mode = new.mode
        self._touch(inode, data=new.size is not None)
        return nfs3.Result(0, nfs3.WccBody(self._wcc(inode, before)))

    def _lookup(self, args):
        parent = self._inode(args.what.dir)
        child = parent.entries.get(args.what.name)
        if child is None:
            return nfs3.Result(NfsStat.NFS3ERR_NOENT, nfs3.AttrBody(
                self.fattr(parent)))
        return nfs3.Result(0, nfs3.LookupOk(
            self.fh(child), self.fattr(child), self.fattr(parent)))

    def _access(self, args):
        inode = self._inode(args.object)
        if inode is None:
            return nfs3.Result(NfsStat.NFS3ERR_STALE, nfs3.AttrBody(None))
        return nfs3.Result(0, nfs3.AccessOk(self.fattr(inode), args.access))

    def _read(self, args):
        inode = self._inode(args.file)
        if inode is None:
            return nfs3.Result(NfsStat.NFS3ERR_STALE, nfs3.AttrBody(None))
        data = bytes(inode.data[args.offset:args.offset + args.count])
        return nfs3.Result(0, nfs3.ReadOk(
            self.fattr(inode), len(data),
            args.offset + len(data) >= len(inode.data), data))

    def _write(self, args):
        inode = self._inode(args.file)
        if inode is None:
            return nfs3.Result(NfsStat.NFS3ERR_STALE,
                               nfs3.WccBody(nfs3.WccData()))
        before = self._pre(inode)
        data = bytes(args.data[:args.count])
        end = args.offset + len(data)
        if end > len(inode.data):
            inode.data.extend(bytes(end - len(inode.data)))
        inode.data[args.offset:end] = data
        self._touch(inode, data=True)
        return nfs3.Result(0, nfs3.WriteOk(
            self._wcc(inode, before), len(data), StableHow.FILE_SYNC,
            b"memoryvf"))

    def _commit(self, args):
        inode = self._inode(args.file)
        if inode is None:
            return nfs3.Result(NfsStat.NFS3ERR_STALE,
                               nfs3.WccBody(nfs3.WccData()))
        if inode.type != FileType.NF3REG:
            return nfs3.Result(NfsStat.NFS3ERR_ISDIR if inode.type ==
                               FileType.NF3DIR else NfsStat.NFS3ERR_INVAL,
                               nfs3.WccBody(self._wcc(inode)))
        return nfs3.Result(0, nfs3.CommitOk(self._wcc(inode), b"memoryvf"))

    def _create(self, args):
        parent = self._inode(args.where.dir)
        name = args.where.name
        child = parent.entries.get(name)
        how = args.how
        if child is not None:
            if how.mode != const.CreateMode.UNCHECKED:
                return nfs3.Result(NfsStat.NFS3ERR_EXIST,
                                   nfs3.WccBody(self._wcc(parent)))
            if how.attributes is not None and \
                    how.attributes.size is not None:
                del child.data[how.attributes.size:]
                self._touch(child, data=True)
        else:
            child = self._new(FileType.NF3REG, 0o644)
            parent.entries[name] = child
            self._touch(parent, data=True)
        return nfs3.Result(0, nfs3.NewObjOk(
            self.fh(child), self.fattr(child), self._wcc(parent)))

    def _mkdir(self, args):
        parent = self._inode(args.where.dir)
        if args.where.name in parent.entries:
            return nfs3.Result(NfsStat.NFS3ERR_EXIST,
                               nfs3.WccBody(self._wcc(parent)))
        child = self._new(FileType.NF3DIR, 0o755)
        child.nlink = 2
        parent.entries[args.where.name] = child
        self._touch(parent, data=True)
        return nfs3.Result(0, nfs3.NewObjOk(
            self.fh(child), self.fattr(child), self._wcc(parent)))

    def _remove(self, args):
        parent = self._inode(args.object.dir)
        child = parent.entries.pop(args.object.name, None)
        if child is None:
            return nfs3.Result(NfsStat.NFS3ERR_NOENT,
                               nfs3.WccBody(self._wcc(parent)))
        self._unlink(child)
        self._touch(parent, data=True)
        return nfs3.Result(0, nfs3.WccBody(self._wcc(parent)))

    def _rename(self, args):
        source = self._inode(args.from_.dir)
        target = self._inode(args.to.dir)
        child = source.entries.pop(args.from_.name, None)
        if child is None:
            return nfs3.Result(NfsStat.NFS3ERR_NOENT, nfs3.RenameBody(
                nfs3.WccData(), nfs3.WccData()))
        replaced = target.entries.get(args.to.name)
        if replaced is not None and replaced is not child:
            self._unlink(replaced)
        target.entries[args.to.name] = child
        self._touch(child)
        return nfs3.Result(0, nfs3.RenameBody(self._wcc(source),
                                              self._wcc(target)))

    def _link(self, args):
        inode = self._inode(args.file)
        parent = self._inode(args.link.dir)
        if args.link.name in parent.entries:
            return nfs3.Result(NfsStat.NFS3ERR_EXIST, nfs3.LinkBody(
                self.fattr(inode), self._wcc(parent)))
        parent.entries[args.link.name] = inode
        inode.nlink += 1
        self._touch(inode)
        return nfs3.Result(0, nfs3.LinkBody(self.fattr(inode),
                                            self._wcc(parent)))

    def _fsstat(self, args):
        inode = self._inode(args.fsroot)
        return nfs3.Result(0, nfs3.FsstatOk(self.fattr(inode), 1 << 30,
                                            1 << 29, 1 << 29, 1000, 500,
                                            500, 0))

    def content(self, name):
        return bytes(self.root.entries[name].data)


# --- the proxy ----------------------------------------------------------

class Proxy:
    """The client role with cache and write-back before a MemoryServer."""

    def __init__(self, tmp_path, server):
        self.server = server
        upstream = UpstreamCalls(server)
        cache_counters = counters.CacheCounters()
        policies = exports.ExportPolicies(3.0, write_back=True)
        files = freshness.FileStates(cache_counters)
        fetcher = fetch.Fetcher(
            BlockStore(str(tmp_path / "blocks"), Geometry(4096, 2, 16, 16)),
            files, upstream, cache_counters, policies)
        self.reads = reads.CachedReads(fetcher, files, cache_counters,
                                       policies)
        observer = updates.ReplyObserver(fetcher, files, policies)
        self.counters = counters.WritebackCounters()
        self.journal = journal.Journal(str(tmp_path / "journal"))
        self.writeback = writeback.WriteBack(
            self.journal, fetcher, files, upstream, policies, observer,
            self.counters, writeback.WriteBackLimits(64 * MIB, 32 * MIB, 0))
        self.role = roles.ClientRole(server, counters.RoleCounters(),
                                     cache=self.reads,
                                     writeback=self.writeback,
                                     observer=observer)
        self.xids = itertools.count(1)

    async def nfs(self, proc, args):
        """The decoded result of ``proc`` through the proxy."""
        cred = rpc.AuthSys(1000, 1000, (1000,)).to_opaque()
        message = rpc.encode_message(rpc.Call(
            next(self.xids), const.NFS_PROGRAM, 3, proc, cred,
            args=nfs3.encode_args(proc, args)))
        reply = await self.role.handle(rpc.decode_message(message),
                                       bytearray(message))
        if isinstance(reply, tuple):
            reply = b"".join(bytes(b) for b in reply)
        return nfs3.decode_res(proc, rpc.results_of(reply))

    @property
    def root(self):
        return MemoryServer.fh(self.server.root)

    async def create(self, name, size=None):
        res = await self.nfs(P.CREATE, nfs3.CreateArgs(
            nfs3.DirOpArgs(self.root, name), nfs3.CreateHow(
                const.CreateMode.UNCHECKED, nfs3.Sattr(size=size))))
        assert res.ok, res
        return res

    async def write(self, fh, offset, data, stable=StableHow.UNSTABLE):
        return await self.nfs(P.WRITE, nfs3.WriteArgs(
            fh, offset, len(data), stable, data))

    async def getattr(self, fh):
        return await self.nfs(P.GETATTR, nfs3.GetattrArgs(fh))

    async def lookup(self, name):
        return await self.nfs(P.LOOKUP, nfs3.LookupArgs(
            nfs3.DirOpArgs(self.root, name)))

    async def access(self, fh):
        return await self.nfs(P.ACCESS, nfs3.AccessArgs(fh, 0x3f))

    async def read(self, fh, offset=0, count=MIB):
        return await self.nfs(P.READ, nfs3.ReadArgs(fh, offset, count))

    async def link(self, fh, name):
        return await self.nfs(P.LINK, nfs3.LinkArgs(
            fh, nfs3.DirOpArgs(self.root, name)))

    async def remove(self, name):
        return await self.nfs(P.REMOVE, nfs3.RemoveArgs(
            nfs3.DirOpArgs(self.root, name)))

    async def rename(self, old, new):
        return await self.nfs(P.RENAME, nfs3.RenameArgs(
            nfs3.DirOpArgs(self.root, old), nfs3.DirOpArgs(self.root, new)))

    async def commit(self, fh):
        return await self.nfs(P.COMMIT, nfs3.CommitArgs(fh, 0, 0))


async def scenario(tmp_path, steps):
    """Run ``steps(proxy, server)`` (a coroutine function)."""
    server = MemoryServer()
    proxy = Proxy(tmp_path, server)
    try:
        return await steps(proxy, server)
    finally:
        proxy.journal.close()


async def dirty_file(proxy, name, data=b"y"):
    """A new file with ``data`` written back (dirty here only)."""
    fh = (await proxy.create(name)).body.obj
    res = await proxy.write(fh, 0, data)
    assert res.ok and res.body.file_wcc.after.size == len(data)
    assert fh in proxy.writeback.dirty
    return fh


# --- a WRITE of no bytes ------------------------------------------------

@pytest.mark.asyncio
async def test_a_write_of_no_bytes_leaves_the_size_to_the_next_write(tmp_path):
    async def steps(proxy, server):
        fh = (await proxy.create("a")).body.obj
        empty = await proxy.write(fh, 0, b"")
        assert empty.ok and empty.body.count == 0
        assert empty.body.file_wcc.after.size == 0
        # Nothing to write back.
        assert fh not in proxy.writeback.dirty
        one = await proxy.write(fh, 0, b"x")
        assert one.body.file_wcc.after.size == 1
        assert (await proxy.getattr(fh)).body.obj_attributes.size == 1
        # And in the middle of dirty bytes: the end stays the end.
        await proxy.write(fh, 0, b"", StableHow.FILE_SYNC)
        assert (await proxy.getattr(fh)).body.obj_attributes.size == 1
        await proxy.writeback.flush()
        assert server.content("a") == b"x"
    await scenario(tmp_path, steps)


def test_an_empty_extent_is_no_dirty_byte():
    dirty = DirtyMap()
    assert dirty.add(b"fh", (1, b""), Extent(7, 0, 1, 0, 1), 5) is None
    assert b"fh" not in dirty
    dirty.add(b"fh", (1, b""), Extent(0, 1, 1, 0, 2), 6)
    dirty.add(b"fh", (1, b""), Extent(0, 0, 1, 0, 3), 7)
    assert dirty.get(b"fh").end == 1
    assert [e.record for e in dirty.get(b"fh").extents()] == [2]


# --- attributes of a dirty file -----------------------------------------

@pytest.mark.asyncio
async def test_a_link_to_a_dirty_file_shows_in_its_attributes(tmp_path):
    async def steps(proxy, server):
        fh = await dirty_file(proxy, "a")
        linked = await proxy.link(fh, "b")
        assert linked.ok
        assert (linked.body.file_attributes.nlink,
                linked.body.file_attributes.size) == (2, 1)
        found = await proxy.lookup("a")
        assert (found.body.obj_attributes.nlink,
                found.body.obj_attributes.size) == (2, 1)
        shown = (await proxy.getattr(fh)).body.obj_attributes
        assert (shown.nlink, shown.size) == (2, 1)
        written = await proxy.write(fh, 1, b"z")
        assert (written.body.file_wcc.after.nlink,
                written.body.file_wcc.after.size) == (2, 2)
    await scenario(tmp_path, steps)


@pytest.mark.asyncio
async def test_every_reply_with_a_dirty_files_attributes_shows_its_size(
        tmp_path):
    async def steps(proxy, server):
        fh = await dirty_file(proxy, "a")
        access = await proxy.access(fh)
        assert access.body.obj_attributes.size == 1
        again = await proxy.create("a")
        assert again.body.obj == fh
        assert again.body.obj_attributes.size == 1
        fsstat = await proxy.nfs(P.FSSTAT, nfs3.FsrootArgs(fh))
        assert fsstat.body.obj_attributes.size == 1
        # The times the proxy shows are its own, everywhere alike.
        shown = (await proxy.getattr(fh)).body.obj_attributes
        assert access.body.obj_attributes.mtime == shown.mtime
        assert server.content("a") == b""  # Still dirty here only.
    await scenario(tmp_path, steps)


@pytest.mark.asyncio
async def test_removing_another_link_of_a_dirty_file_shows(tmp_path):
    async def steps(proxy, server):
        fh = await dirty_file(proxy, "a")
        await proxy.link(fh, "b")
        assert (await proxy.getattr(fh)).body.obj_attributes.nlink == 2
        assert (await proxy.remove("b")).ok
        shown = (await proxy.getattr(fh)).body.obj_attributes
        assert (shown.nlink, shown.size) == (1, 1)
    await scenario(tmp_path, steps)


# --- COMMIT -------------------------------------------------------------

@pytest.mark.asyncio
async def test_commit_of_what_is_not_a_file_is_the_servers_to_answer(tmp_path):
    async def steps(proxy, server):
        made = await proxy.nfs(P.MKDIR, nfs3.MkdirArgs(
            nfs3.DirOpArgs(proxy.root, "d"), nfs3.Sattr(mode=0o755)))
        res = await proxy.commit(made.body.obj)
        assert res.status == NfsStat.NFS3ERR_ISDIR
        assert (await proxy.commit(proxy.root)).status == \
            NfsStat.NFS3ERR_ISDIR
        # A file's COMMIT is still answered here, with the proxy's verifier.
        fh = await dirty_file(proxy, "a")
        sent = len(server.calls)
        committed = await proxy.commit(fh)
        assert committed.ok and committed.body.file_wcc.after.size == 1
        assert committed.body.verf == proxy.writeback.verifier
        assert P.COMMIT not in server.calls[sent:]
    await scenario(tmp_path, steps)


# --- a removed dirty file -----------------------------------------------

@pytest.mark.asyncio
async def test_a_removed_dirty_file_is_stale_and_its_bytes_are_dropped(
        tmp_path):
    async def steps(proxy, server):
        fh = await dirty_file(proxy, "a", b"y" * 100000)
        assert (await proxy.remove("a")).ok
        for res in (await proxy.getattr(fh), await proxy.read(fh),
                    await proxy.write(fh, 0, b"again"),
                    await proxy.commit(fh)):
            assert res.status == NfsStat.NFS3ERR_STALE
        assert fh not in proxy.writeback.dirty
        assert proxy.counters.writeback_discarded_bytes == 100000
        # Nothing of it is left to send, nor kept on disk.
        assert proxy.journal.size == 0
        sent = len(server.calls)
        done = await proxy.writeback.flush()
        assert done["dirty_bytes"] == 0 and server.calls[sent:] == []
    await scenario(tmp_path, steps)


@pytest.mark.asyncio
async def test_a_dirty_file_renamed_over_is_stale(tmp_path):
    async def steps(proxy, server):
        fh = await dirty_file(proxy, "a")
        await proxy.create("b")
        assert (await proxy.rename("b", "a")).ok
        assert (await proxy.getattr(fh)).status == NfsStat.NFS3ERR_STALE
        assert fh not in proxy.writeback.dirty
    await scenario(tmp_path, steps)


@pytest.mark.asyncio
async def test_a_removed_file_is_not_sent_by_the_next_flush(tmp_path):
    async def steps(proxy, server):
        await dirty_file(proxy, "tmp", b"t" * 300000)
        kept = await dirty_file(proxy, "kept", b"k")
        assert (await proxy.remove("tmp")).ok
        sent = len(server.calls)
        await proxy.writeback.flush()
        # One WRITE and one COMMIT, of the file that still exists.
        flushed = server.calls[sent:]
        assert flushed.count(P.WRITE) == 1 and P.COMMIT in flushed
        assert server.content("kept") == b"k"
        assert proxy.counters.writeback_discarded_bytes == 300000
        assert kept not in proxy.writeback.dirty
        assert proxy.journal.size == 0
    await scenario(tmp_path, steps)


@pytest.mark.asyncio
async def test_a_dirty_file_keeps_its_bytes_while_another_link_remains(
        tmp_path):
    async def steps(proxy, server):
        fh = await dirty_file(proxy, "a", b"precious")
        await proxy.link(fh, "b")
        assert (await proxy.remove("a")).ok
        shown = (await proxy.getattr(fh)).body.obj_attributes
        assert (shown.nlink, shown.size) == (1, 8)
        assert (await proxy.read(fh)).body.data == b"precious"
        await proxy.writeback.flush()
        assert server.content("b") == b"precious"
        assert proxy.counters.writeback_discarded_bytes == 0
    await scenario(tmp_path, steps)


@pytest.mark.asyncio
async def test_a_clean_file_removed_takes_no_write(tmp_path):
    async def steps(proxy, server):
        fh = (await proxy.create("a")).body.obj
        assert (await proxy.lookup("a")).ok   # Its attributes are cached.
        assert (await proxy.remove("a")).ok
        res = await proxy.write(fh, 0, b"lost?")
        assert res.status == NfsStat.NFS3ERR_STALE
        assert fh not in proxy.writeback.dirty
    await scenario(tmp_path, steps)
