# SPDX-License-Identifier: Apache-2.0
"""The server proxy's side of the bulk channel: read or write, in zstd.

A bulk READ is served with pipelined NFS READs of the chunk from the NFS
server next door (with the caller's mapped credential, so the export's
permissions hold as for any READ), then compressed with zstd in a worker
thread: zstd releases the GIL, so chunks requested together compress on
several cores while the event loop keeps serving.  A bulk WRITE is the
reverse: decompressed in a worker thread (never past the size it says,
so a hostile frame cannot blow up in memory), then pipelined UNSTABLE
NFS WRITEs with the same credential.
"""

import asyncio

from oslo_log import log as logging
import zstandard

from gvfs_openstack.client import zstd_chunks
from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs.bulk import BulkProc
from gvfs_openstack.nfs.bulk import Codec
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import AcceptStat
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.upstream_calls import CallRefused

LOG = logging.getLogger(__name__)


def _failed(call, results):
    """The reply of the first READ that failed, as the bulk call's; None."""
    for res in results:
        if not res.ok:
            return rpc.accepted(call.xid, AcceptStat.SUCCESS,
                                bulk.encode_res(call.proc, nfs3.Result(
                                    res.status, res.body)))
    return None


class BulkServer:
    """Serves bulk READs and WRITEs with NFS calls next door.

    ``nfs`` is the :class:`UpstreamCalls` of the NFS server.
    """

    def __init__(self, nfs, counters, max_chunk=bulk.MAX_CHUNK,
                 read_size=1024 * 1024, level=1, write_size=1024 * 1024):
        self.nfs = nfs
        #: A reply must fit in one record of the tunnel.
        self.max_chunk = min(max_chunk, bulk.MAX_CHUNK)
        #: :class:`counters.BulkServerCounters`
        self.counters = counters
        self.read_size = read_size
        self.write_size = write_size
        self.level = level

    async def serve(self, call, cred):
        """The reply to a bulk call, its credential already mapped."""
        if call.proc == BulkProc.NULL:
            return rpc.accepted(call.xid, AcceptStat.SUCCESS)
        try:
            args = bulk.decode_args(call.proc, call.args)
        except ProtocolError:
            return rpc.accepted(call.xid, AcceptStat.GARBAGE_ARGS)
        if call.proc == BulkProc.WRITE:
            return await self._serve_write(call, cred, args)
        if call.proc == BulkProc.READV:
            return await self._serve_readv(call, cred, args)
        return await self._serve_read(call, cred, args)

    async def _serve_read(self, call, cred, args):
        count = min(args.count, self.max_chunk)
        end = args.offset + count
        reads = [self._read(cred, args.file, offset,
                            min(self.read_size, end - offset))
                 for offset in range(args.offset, end, self.read_size)]
        results = await asyncio.gather(*reads)
        failed = _failed(call, results)
        if failed is not None:
            return failed
        pieces, attrs, eof = [], None, False
        for res in results:
            pieces.append(res.body.data)
            attrs = res.body.file_attributes or attrs
            if res.body.eof:
                eof = True
                break
        raw = b"".join(pieces)
        codec, data = await self._compressed(args.codec, raw)
        return rpc.accepted(call.xid, AcceptStat.SUCCESS, bulk.encode_res(
            call.proc, nfs3.Result(0, bulk.ReadOk(attrs, eof, len(raw),
                                                  codec, data))))

    async def _serve_readv(self, call, cred, args):
        """The extents' bytes, up to ``max_chunk`` of them in all.

        The extents past that limit are left out of the reply (the
        caller asks again for them); those past the end of the file get
        no bytes.  Extents near each other are read in one READ
        (:func:`bulk.coalesce`): one call's extents cost the NFS server
        a READ per region, not one each, and at most
        :data:`bulk.MAX_READV_READS` READs: the extents past those are
        left out too.
        """
        planned = bulk.plan(args.extents, self.max_chunk)
        spans, reads, where = bulk.coalesce_within(
            planned, self.read_size, max_bytes=2 * self.max_chunk)
        # The NFS server may answer each READ shorter than asked (its
        # rtmax): the READs made again for the rest count too.  The
        # first extent is read whole whatever it costs (at most
        # max_chunk bytes, what one bulk READ may cost), so that a
        # caller asking again for what was left out makes progress.
        budget = [bulk.MAX_READV_READS]
        first = where[0] if where else None
        results = await asyncio.gather(*(
            self._read(cred, args.file, start, end - start, budget,
                       must=spans[0][1] - start if index == first else 0)
            for index, (start, end) in enumerate(reads)))
        failed = _failed(call, results)
        if failed is not None:
            return failed
        attrs = next((res.body.file_attributes for res in reversed(results)
                      if res.body.file_attributes is not None), None)
        pieces, counts = [], []
        for (start, end), index in zip(spans, where):
            data = b""
            if index is not None:
                at = start - reads[index][0]
                body = results[index].body
                data = body.data[at:at + end - start]
                if len(data) < end - start and not body.eof:
                    break   # Its READs ran out of budget: left out.
            pieces.append(data)
            counts.append(len(data))
        if len(counts) < len(planned):
            self.counters.bulk_readvs_cut_short += 1
        raw = b"".join(pieces)
        codec, data = await self._compressed(args.codec, raw)
        return rpc.accepted(call.xid, AcceptStat.SUCCESS, bulk.encode_res(
            call.proc, nfs3.Result(0, bulk.ReadvOk(
                attrs, tuple(counts), len(raw), codec, data))))

    async def _compressed(self, codec, raw):
        """``(codec, data)`` of a READ reply's ``raw`` bytes, counted."""
        data = raw
        if codec == Codec.ZSTD:
            data = await asyncio.get_running_loop().run_in_executor(
                None, zstd_chunks.compress, raw, self.level)
            if len(data) >= len(raw):
                # Incompressible: raw costs less, and nothing to undo.
                codec, data = Codec.NONE, raw
        self.counters.bulk_reads += 1
        self.counters.bulk_raw_bytes += len(raw)
        self.counters.bulk_wire_bytes += len(data)
        return codec, data

    async def _serve_write(self, call, cred, args):
        raw = args.data
        if args.raw_count > self.max_chunk:
            return self._write_failed(
                call, const.NfsStat.NFS3ERR_INVAL,
                "%d bytes in one chunk, more than the %d this proxy takes "
                "(half its max_record_size)" % (args.raw_count,
                                                self.max_chunk))
        if args.codec == Codec.ZSTD:
            try:
                raw = await asyncio.get_running_loop().run_in_executor(
                    None, zstd_chunks.decompress, args.data, args.raw_count)
            except zstandard.ZstdError as e:
                return self._write_failed(call, const.NfsStat.NFS3ERR_INVAL,
                                          "it does not decompress: %s" % e)
        if len(raw) != args.raw_count:
            return self._write_failed(call, const.NfsStat.NFS3ERR_INVAL,
                                      "%d bytes, not the %d it says" % (
                                          len(raw), args.raw_count))
        view = memoryview(raw)
        results = await asyncio.gather(*(
            self._write(cred, args.file, args.offset + start,
                        view[start:start + self.write_size])
            for start in range(0, len(view), self.write_size)))
        failed = next((res for res in results if not res.ok), None)
        if failed is not None:
            return rpc.accepted(call.xid, AcceptStat.SUCCESS,
                                bulk.encode_res(call.proc, failed))
        # A server restarted between the pieces gave them different
        # verifiers: answering the first makes the client's COMMIT see
        # a change and write the chunk again.
        first = results[0].body
        # The pieces went together: no "before" is the chunk's.
        after = max((res.body.file_wcc.after for res in results
                     if res.body.file_wcc.after is not None),
                    key=lambda a: (a.ctime.seconds, a.ctime.nseconds,
                                   a.size), default=None)
        self.counters.bulk_writes += 1
        self.counters.bulk_write_raw_bytes += len(raw)
        self.counters.bulk_write_wire_bytes += len(args.data)
        return rpc.accepted(call.xid, AcceptStat.SUCCESS, bulk.encode_res(
            call.proc, nfs3.Result(0, nfs3.WriteOk(
                nfs3.WccData(None, after),
                len(raw), const.StableHow.UNSTABLE, first.verf))))

    def _write_failed(self, call, status, why):
        LOG.warning("refusing a bulk WRITE: %s", why)
        return rpc.accepted(call.xid, AcceptStat.SUCCESS, bulk.encode_res(
            call.proc, nfs3.Result(status, nfs3.WccBody(nfs3.WccData()))))

    async def _write(self, cred, fh, offset, data):
        """One UNSTABLE NFS WRITE, sent on if the server takes part."""
        while True:
            try:
                done = await self.nfs.nfs(Nfs3Proc.WRITE, nfs3.WriteArgs(
                    fh, offset, len(data), const.StableHow.UNSTABLE, data),
                    cred)
            except CallRefused:
                return nfs3.Result(const.NfsStat.NFS3ERR_IO,
                                   nfs3.WccBody(nfs3.WccData()))
            if not done.ok:
                return done
            if done.body.count == 0:
                return nfs3.Result(const.NfsStat.NFS3ERR_IO,
                                   nfs3.WccBody(done.body.file_wcc))
            if done.body.count >= len(data):
                return done
            offset += done.body.count
            data = data[done.body.count:]

    async def _read(self, cred, fh, offset, count, budget=None, must=0):
        """One NFS READ, completed if the server answers short.

        ``budget``: ``[READs left]`` shared by a call's reads; each READ
        takes one, and a read stops short (not at the end of the file),
        or does not start, once none is left, unless it holds fewer than
        ``must`` bytes.
        """
        data, res = bytearray(), None
        while len(data) < count:
            if budget is not None:
                if budget[0] <= 0 and len(data) >= must:
                    break
                budget[0] -= 1
            try:
                res = await self.nfs.nfs(Nfs3Proc.READ, nfs3.ReadArgs(
                    fh, offset + len(data), count - len(data)), cred)
            except CallRefused:
                return nfs3.Result(const.NfsStat.NFS3ERR_IO,
                                   nfs3.AttrBody(None))
            if not res.ok:
                return res
            data += res.body.data
            if res.body.eof or not res.body.data:
                break
        if res is None:     # No READ left for it.
            return nfs3.Result(0, nfs3.ReadOk(None, 0, False, b""))
        return nfs3.Result(0, nfs3.ReadOk(res.body.file_attributes,
                                          len(data), res.body.eof,
                                          bytes(data)))
