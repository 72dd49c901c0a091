# SPDX-License-Identifier: Apache-2.0
"""An asyncio NFSv3 client on the sans-IO core.

Calls on one connection are pipelined: each gets an XID and a future, and
replies are matched as they come back in any order.  ``read_file`` and
``write_file`` keep a window of READs or UNSTABLE WRITEs in flight and
finish writes with one COMMIT, re-sending everything uncommitted when the
server's write verifier changes (the server restarted and may have lost
unstable data: RFC 1813 section 3.3.7).
"""

import asyncio
import contextvars
import dataclasses
import posixpath
import random

import zstandard

from gvfs_openstack.client import tls as client_tls
from gvfs_openstack.client import transport as transport_io
from gvfs_openstack.client.write_batch import WriteBatch
from gvfs_openstack.client import zstd_chunks
from gvfs_openstack.deadline import within
from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc as P
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs.errors import RecordTooLarge
from gvfs_openstack.nfs.errors import RpcError
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc


#: The credential (opaque AUTH_SYS) calls made in this context carry
#: instead of their client's own: a FUSE mount sets it per request to
#: act as the process that made it.  Tasks started meanwhile (a file's
#: WRITEs) keep the value they were started with.
ACTING_AS = contextvars.ContextVar("nfs_acting_as", default=None)


class _RpcProtocol(asyncio.BufferedProtocol):
    """Drives a client-side :class:`connection.RpcConnection`.

    Its table of outstanding XIDs holds each call's future.
    """

    def __init__(self, max_record_size):
        self.rpc = connection.RpcConnection(connection.Role.CLIENT,
                                            max_record_size)
        self.transport = None
        self.lost = None

    def connection_made(self, transport):
        self.transport = transport
        transport_io.tune_socket(transport)

    def get_buffer(self, sizehint):
        return self.rpc.get_buffer()

    def buffer_updated(self, nbytes):
        self.rpc.buffer_updated(nbytes)
        try:
            while (event := self.rpc.next_event()) is not \
                    connection.NEED_DATA:
                if isinstance(event, connection.ReplyReceived) and \
                        not event.tag.done():
                    event.tag.set_result(event.decode())
                elif isinstance(event, connection.RecordRefused) and \
                        event.tag is not None and not event.tag.done():
                    # Too large a reply fails its own call at once; the
                    # connection and the other calls on it go on.
                    event.tag.set_exception(RecordTooLarge(
                        event.reason, event.xid, event.head))
        except ProtocolError as e:
            self._fail(e)
            self.transport.abort()

    def connection_lost(self, exc):
        self._fail(exc or ConnectionResetError("connection closed by server"))

    def _fail(self, exc):
        self.lost = exc
        for future in self.rpc.take_outstanding():
            if not future.done():
                future.set_exception(ConnectionError(
                    "NFS connection lost: %s" % exc))


class RpcClient:
    """One TCP connection carrying pipelined ONC-RPC calls."""

    def __init__(self, host, port, cred=rpc.AUTH_NONE, timeout=60.0,
                 max_record_size=connection.DEFAULT_MAX_RECORD, tls=None):
        self.host = host
        self.port = port
        self.cred = cred
        self.timeout = timeout
        self.max_record_size = max_record_size
        #: :class:`client_tls.ClientTls`, or None for plain TCP.
        self.tls = tls
        self._protocol = None
        self._xid = random.getrandbits(32)

    async def connect(self):
        extra = {}
        if self.tls is not None:
            extra = {"ssl": self.tls.context(),
                     "server_hostname": self.tls.server_name or self.host}
        transport, self._protocol = await asyncio.wait_for(
            asyncio.get_running_loop().create_connection(
                lambda: _RpcProtocol(self.max_record_size), self.host,
                self.port, **extra), self.timeout)
        if self.tls is not None:
            client_tls.check_server(transport, "tls://%s:%d" % (
                self.host, self.port))

    @property
    def connected(self):
        return self._protocol is not None and self._protocol.lost is None

    def close(self):
        if self._protocol is not None:
            self._protocol.transport.close()

    async def call(self, prog, vers, proc, args=b""):
        """Results of a successful call as bytes; RpcError otherwise."""
        protocol = self._protocol
        if protocol is None or protocol.lost is not None:
            raise ConnectionError("not connected to %s:%d"
                                  % (self.host, self.port))
        self._xid = (self._xid + 1) & 0xFFFFFFFF
        xid = self._xid
        future = asyncio.get_running_loop().create_future()
        protocol.rpc.expect_reply(xid, future)
        header = rpc.encode_message(rpc.Call(
            xid, prog, vers, proc, ACTING_AS.get() or self.cred))
        transport_io.write_record(protocol.transport, (header, args))
        try:
            reply = await within(self.timeout, future)
        except TimeoutError:
            protocol.rpc.forget(xid)
            raise TimeoutError("no reply from %s:%d within %.0fs" % (
                self.host, self.port, self.timeout)) from None
        if isinstance(reply, rpc.Denied):
            raise RpcError("call denied: reject_stat=%d auth_stat=%s"
                           % (reply.reject_stat, reply.auth_stat), reply)
        if reply.accept_stat != const.AcceptStat.SUCCESS:
            raise RpcError("call not accepted: %s" % const.AcceptStat(
                reply.accept_stat).name, reply)
        return reply.results


class NfsClient:
    """MOUNTv3 + NFSv3 over two pipelined connections.

    ``rsize``/``wsize`` cap each READ/WRITE; ``window`` is how many of
    them ``read_file``/``write_file`` keep in flight.  With ``tls`` (a
    :class:`client_tls.ClientTls`) both connections are mutual TLS to a
    GVFS server proxy, as a client proxy's tunnel is.
    """

    def __init__(self, host, nfs_port, mount_port=None, uid=0, gid=0,
                 gids=(), rsize=1024 * 1024, wsize=1024 * 1024, window=8,
                 timeout=60.0, machinename="gvfs-openstack", tls=None):
        self.machinename = machinename
        self.nfs = RpcClient(host, nfs_port, timeout=timeout, tls=tls)
        self.mnt = RpcClient(host, mount_port or nfs_port, timeout=timeout,
                             tls=tls)
        self.act_as(uid, gid, gids)
        self.rsize = rsize
        self.wsize = wsize
        self.window = window
        #: Bytes :meth:`bulk_write` sent, compressed.
        self.bulk_wire_bytes = 0
        self.root = None
        self.export = None

    def act_as(self, uid, gid, gids=()):
        """Make the calls from now on as ``uid``/``gid``."""
        self.nfs.cred = self.mnt.cred = rpc.AuthSys(
            uid, gid, tuple(gids), self.machinename).to_opaque()

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc):
        self.close()

    def close(self):
        self.nfs.close()
        self.mnt.close()

    # --- MOUNT -----------------------------------------------------------

    async def mount(self, export):
        """MNT ``export``; returns its root file handle."""
        await self.mnt.connect()
        res = mount3.decode_res(const.MountProc.MNT, await self.mnt.call(
            const.MOUNT_PROGRAM, const.MOUNT_V3, const.MountProc.MNT,
            mount3.encode_args(const.MountProc.MNT, mount3.MntArgs(export))))
        if not res.ok:
            raise NfsError(res.status, "MNT", export)
        await self.nfs.connect()
        self.root = res.body.fhandle
        self.export = export
        fsinfo = await self.fsinfo(self.root)
        self.rsize = min(self.rsize, fsinfo.rtmax or self.rsize)
        self.wsize = min(self.wsize, fsinfo.wtmax or self.wsize)
        return self.root

    async def exports(self):
        if self.mnt._protocol is None:
            await self.mnt.connect()
        res = mount3.decode_res(const.MountProc.EXPORT, await self.mnt.call(
            const.MOUNT_PROGRAM, const.MOUNT_V3, const.MountProc.EXPORT))
        return [e.directory for e in res.exports]

    async def unmount(self):
        if self.export is not None:
            await self.mnt.call(
                const.MOUNT_PROGRAM, const.MOUNT_V3, const.MountProc.UMNT,
                mount3.encode_args(const.MountProc.UMNT,
                                   mount3.MntArgs(self.export)))
            self.export = None

    # --- NFS procedures ----------------------------------------------------

    async def _call(self, proc, args, allow=()):
        data = await self.nfs.call(const.NFS_PROGRAM, const.NFS_V3, proc,
                                   nfs3.encode_args(proc, args)
                                   if args is not None else b"")
        res = nfs3.decode_res(proc, data)
        if not res.ok and res.status not in allow:
            raise NfsError(res.status, P(proc).name)
        return res.body if res.ok else res

    async def null(self):
        await self.nfs.call(const.NFS_PROGRAM, const.NFS_V3, P.NULL)

    async def getattr(self, fh):
        return (await self._call(P.GETATTR,
                                 nfs3.GetattrArgs(fh))).obj_attributes

    async def setattr(self, fh, sattr, guard_ctime=None):
        return await self._call(P.SETATTR,
                                nfs3.SetattrArgs(fh, sattr, guard_ctime))

    async def lookup(self, dir_fh, name):
        return await self._call(P.LOOKUP,
                                nfs3.LookupArgs(nfs3.DirOpArgs(dir_fh, name)))

    async def lookup_path(self, path):
        """File handle of ``path``, relative to the mounted export."""
        fh = self.root
        for part in [p for p in posixpath.normpath(path).split("/")
                     if p not in ("", ".")]:
            fh = (await self.lookup(fh, part)).object
        return fh

    async def access(self, fh, mask):
        return (await self._call(P.ACCESS, nfs3.AccessArgs(fh, mask))).access

    async def read(self, fh, offset, count):
        """``ReadOk`` for up to ``count`` bytes at ``offset``."""
        return await self._call(P.READ, nfs3.ReadArgs(fh, offset, count))

    async def write(self, fh, offset, data,
                    stable=const.StableHow.UNSTABLE):
        return await self._call(P.WRITE, nfs3.WriteArgs(
            fh, offset, len(data), stable, data))

    async def write_all(self, fh, offset, data):
        """UNSTABLE WRITEs until the server took all of ``data``.

        Returns the first reply's ``WriteOk`` with ``count`` all of it: a
        later verifier that differs (a server restart in between) fails
        the COMMIT's check against this one, and the bytes go again.
        """
        first, at, rest = None, offset, memoryview(data)
        while True:
            ok = await self.write(fh, at, rest)
            if ok.count == 0 and rest:
                raise NfsError(const.NfsStat.NFS3ERR_IO, "WRITE",
                               "server accepted 0 bytes")
            first = first or ok
            at, rest = at + ok.count, rest[ok.count:]
            if not rest:
                return dataclasses.replace(first, count=len(data))

    async def bulk_write(self, fh, offset, data, level=1):
        """WRITE ``data`` at ``offset`` as one zstd chunk.

        Only a GVFS server proxy serves this (the bulk channel, see
        :mod:`gvfs_openstack.nfs.bulk`); elsewhere it raises RpcError
        (PROG_UNAVAIL).  UNSTABLE, like :meth:`write`; returns the same
        ``WriteOk``.  Data zstd does not shrink goes as plain WRITEs of
        ``wsize``: as one record it could exceed the proxy's record size.
        """
        if not data:
            return await self.write_all(fh, offset, data)
        wire = await asyncio.get_running_loop().run_in_executor(
            None, zstd_chunks.compress, data, level)
        if len(wire) >= len(data):
            self.bulk_wire_bytes += len(data)
            return await self._write_pieces(fh, offset, data)
        results = await self.nfs.call(
            bulk.BULK_PROGRAM, bulk.BULK_VERSION, bulk.BulkProc.WRITE,
            bulk.encode_args(bulk.BulkProc.WRITE, bulk.WriteArgs(
                fh, offset, len(data), bulk.Codec.ZSTD, wire)))
        res = bulk.decode_res(bulk.BulkProc.WRITE, results)
        if not res.ok:
            raise NfsError(res.status, "bulk WRITE")
        self.bulk_wire_bytes += len(wire)
        return res.body

    async def bulk_readv(self, fh, extents):
        """``(fattr, pieces)``: the bytes of ``(offset, count)`` extents.

        One READV of the bulk channel (a GVFS proxy serves it; elsewhere
        RpcError, PROC_UNAVAIL or PROG_UNAVAIL), uncompressed: it is for
        a mount and its own node's proxy.  ``pieces`` has the extents the
        proxy answered, in order, at least one; the caller asks again for
        the rest.
        """
        results = await self.nfs.call(
            bulk.BULK_PROGRAM, bulk.BULK_VERSION, bulk.BulkProc.READV,
            bulk.encode_args(bulk.BulkProc.READV, bulk.ReadvArgs(
                fh, tuple(bulk.Extent(offset, count)
                          for offset, count in extents), bulk.Codec.NONE)))
        res = bulk.decode_res(bulk.BulkProc.READV, results)
        if not res.ok:
            raise NfsError(res.status, "READV")
        body = res.body
        try:
            return body.file_attributes, bulk.split(
                [count for _, count in extents], body.counts,
                await zstd_chunks.reply_bytes(body))
        except (ValueError, zstandard.ZstdError) as e:
            raise NfsError(const.NfsStat.NFS3ERR_IO, "READV", str(e)) from e

    async def _write_pieces(self, fh, offset, data):
        """UNSTABLE WRITEs of ``data`` together; one ``WriteOk`` for all.

        It carries the first piece's verifier: a server restarted between
        the pieces then fails the COMMIT's check, and all go again.
        """
        view = memoryview(data)
        oks = await asyncio.gather(*(
            self.write_all(fh, offset + start, view[start:start + self.wsize])
            for start in range(0, len(view), self.wsize)))
        return nfs3.WriteOk(oks[-1].file_wcc, len(data),
                            const.StableHow.UNSTABLE, oks[0].verf)

    async def has_bulk_channel(self):
        """Whether the server answers the bulk channel's NULL."""
        try:
            await self.nfs.call(bulk.BULK_PROGRAM, bulk.BULK_VERSION,
                                bulk.BulkProc.NULL)
        except RpcError:
            return False
        return True

    async def commit(self, fh, offset=0, count=0):
        return (await self._call(P.COMMIT,
                                 nfs3.CommitArgs(fh, offset, count))).verf

    async def create(self, dir_fh, name, mode=0o644, exclusive=False,
                     attributes=False):
        """Create (or truncate-free open) ``name``; returns its handle.

        With ``attributes``, ``(handle, fattr or None)``: see ``_made``.
        """
        how = nfs3.CreateHow(const.CreateMode.GUARDED, nfs3.Sattr(mode=mode)) \
            if exclusive else nfs3.CreateHow(const.CreateMode.UNCHECKED,
                                             nfs3.Sattr(mode=mode))
        ok = await self._call(P.CREATE, nfs3.CreateArgs(
            nfs3.DirOpArgs(dir_fh, name), how))
        return await self._made(ok, dir_fh, name, attributes)

    async def mkdir(self, dir_fh, name, mode=0o755, attributes=False):
        ok = await self._call(P.MKDIR, nfs3.MkdirArgs(
            nfs3.DirOpArgs(dir_fh, name), nfs3.Sattr(mode=mode)))
        return await self._made(ok, dir_fh, name, attributes)

    async def symlink(self, dir_fh, name, target, mode=0o777,
                      attributes=False):
        ok = await self._call(P.SYMLINK, nfs3.SymlinkArgs(
            nfs3.DirOpArgs(dir_fh, name), nfs3.Sattr(mode=mode), target))
        return await self._made(ok, dir_fh, name, attributes)

    async def mknod(self, dir_fh, name, file_type, mode, rdev=(0, 0),
                    attributes=False):
        """A FIFO, socket or device ``name``; ``rdev`` is (major, minor).

        Only devices carry ``rdev`` in MKNOD (RFC 1813 section 3.3.11).
        """
        attrs = nfs3.Sattr(mode=mode)
        body = nfs3.DeviceData(attrs, nfs3.SpecData(*rdev)) \
            if file_type in (const.FileType.NF3CHR, const.FileType.NF3BLK) \
            else attrs
        ok = await self._call(P.MKNOD, nfs3.MknodArgs(
            nfs3.DirOpArgs(dir_fh, name), nfs3.MknodData(file_type, body)))
        return await self._made(ok, dir_fh, name, attributes)

    async def _made(self, ok, dir_fh, name, attributes):
        """The new object's handle (and attributes) from its reply.

        Both are optional in the reply (RFC 1813 section 3.3.8); a
        missing handle costs a LOOKUP, which brings the attributes too.
        The caller of a FUSE create needs them, and asking for them
        again would be one more round trip to the server.
        """
        fh, fattr = ok.obj, ok.obj_attributes
        if not fh:
            found = await self.lookup(dir_fh, name)
            fh, fattr = found.object, found.obj_attributes
        return (fh, fattr) if attributes else fh

    async def readlink(self, fh):
        return (await self._call(P.READLINK, nfs3.ReadlinkArgs(fh))).data

    async def link(self, fh, dir_fh, name):
        await self._call(P.LINK, nfs3.LinkArgs(fh, nfs3.DirOpArgs(dir_fh,
                                                                  name)))

    async def remove(self, dir_fh, name):
        await self._call(P.REMOVE, nfs3.RemoveArgs(
            nfs3.DirOpArgs(dir_fh, name)))

    async def rmdir(self, dir_fh, name):
        await self._call(P.RMDIR, nfs3.RemoveArgs(
            nfs3.DirOpArgs(dir_fh, name)))

    async def rename(self, from_dir, from_name, to_dir, to_name):
        await self._call(P.RENAME, nfs3.RenameArgs(
            nfs3.DirOpArgs(from_dir, from_name),
            nfs3.DirOpArgs(to_dir, to_name)))

    async def readdirplus(self, dir_fh, maxcount=64 * 1024):
        """Every entry of a directory (``.`` and ``..`` included)."""
        cookie, verf, entries = 0, b"\0" * 8, []
        while True:
            ok = await self._call(P.READDIRPLUS, nfs3.ReaddirplusArgs(
                dir_fh, cookie, verf, maxcount // 4, maxcount))
            entries.extend(ok.entries)
            if ok.eof or not ok.entries:
                return entries
            cookie, verf = ok.entries[-1].cookie, ok.cookieverf

    async def fsstat(self, fh=None):
        return await self._call(P.FSSTAT, nfs3.FsrootArgs(fh or self.root))

    async def fsinfo(self, fh=None):
        return await self._call(P.FSINFO, nfs3.FsrootArgs(fh or self.root))

    # --- bulk transfer -------------------------------------------------------

    async def read_file(self, fh, size=None):
        """Yield ``(offset, data)`` in order with ``window`` READs in flight.

        Stops at EOF (or ``size`` bytes).
        """
        if size is None:
            size = (await self.getattr(fh)).size
        offsets = iter(range(0, size, self.rsize))
        inflight = []
        for offset in offsets:
            inflight.append((offset, asyncio.ensure_future(self.read(
                fh, offset, min(self.rsize, size - offset)))))
            if len(inflight) >= self.window:
                break
        try:
            while inflight:
                offset, task = inflight.pop(0)
                ok = await task
                data = ok.data
                expected = min(self.rsize, size - offset)
                if len(data) < expected and not ok.eof:
                    # Short read: fetch the rest synchronously.
                    rest = await self.read(fh, offset + len(data),
                                           expected - len(data))
                    data = bytes(data) + bytes(rest.data)
                yield offset, data
                nxt = next(offsets, None)
                if nxt is not None:
                    inflight.append((nxt, asyncio.ensure_future(self.read(
                        fh, nxt, min(self.rsize, size - nxt)))))
        finally:
            for _, task in inflight:
                task.cancel()

    async def write_file(self, fh, chunks, offset=0,
                         commit_every=64 * 1024 * 1024):
        """Write an (async) iterable of byte chunks with UNSTABLE WRITEs.

        Returns the number of bytes written and committed.  Chunks larger
        than ``wsize`` are split.  Every ``commit_every`` bytes (and at the
        end) the writes in flight are drained and COMMITted; if the COMMIT
        verifier differs from one a WRITE returned, the server lost
        unstable data and everything since the last good COMMIT is sent
        again -- so at most ``commit_every`` bytes are held in memory.
        """
        batch = WriteBatch(self, fh)
        position = offset
        async for chunk in _aiter(chunks):
            view = memoryview(chunk)
            for start in range(0, len(view), self.wsize):
                data = bytes(view[start:start + self.wsize])
                await batch.add(position, data)
                position += len(data)
                if batch.size >= commit_every:
                    await batch.commit()
        await batch.commit()
        return position - offset


async def _aiter(chunks):
    if hasattr(chunks, "__aiter__"):
        async for chunk in chunks:
            yield chunk
    else:
        for chunk in chunks:
            yield chunk
