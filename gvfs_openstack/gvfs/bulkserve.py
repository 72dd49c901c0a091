"""The server proxy's side of the bulk channel: read, compress, send.

A bulk READ is served with pipelined NFS READs of the chunk from the NFS
server next door (with the caller's mapped credential, so the export's
permissions hold as for any READ), then compressed with zstd in a worker
thread: zstd releases the GIL, so chunks requested together compress on
several cores while the event loop keeps serving.
"""

import asyncio
import logging

import zstandard

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs.bulk import BulkProc
from gvfs_openstack.nfs.bulk import Codec
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import AcceptStat
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc

LOG = logging.getLogger(__name__)


def compress(data, level):
    return zstandard.ZstdCompressor(level=level,
                                    write_checksum=True).compress(data)


class BulkServer:
    def __init__(self, nfs_pool, stats, max_chunk=bulk.MAX_CHUNK,
                 read_size=1024 * 1024, level=1):
        self.nfs_pool = nfs_pool
        #: A reply must fit in one record of the tunnel.
        self.max_chunk = min(max_chunk, bulk.MAX_CHUNK)
        self.stats = stats
        self.read_size = read_size
        self.level = level
        for key in ("bulk_reads", "bulk_raw_bytes", "bulk_wire_bytes"):
            stats.setdefault(key, 0)

    async def serve(self, call, cred):
        """The reply to a bulk call, its credential already mapped."""
        if call.proc == BulkProc.NULL:
            return rpc.accepted(call.xid, AcceptStat.SUCCESS)
        try:
            args = bulk.decode_args(call.proc, call.args)
        except ProtocolError:
            return rpc.accepted(call.xid, AcceptStat.GARBAGE_ARGS)
        count = min(args.count, self.max_chunk)
        end = args.offset + count
        reads = [self._read(cred, args.file, offset,
                            min(self.read_size, end - offset))
                 for offset in range(args.offset, end, self.read_size)]
        results = await asyncio.gather(*reads)
        pieces, attrs, eof = [], None, False
        for res in results:
            if not res.ok:
                return rpc.accepted(call.xid, AcceptStat.SUCCESS,
                                    bulk.encode_res(call.proc, nfs3.Result(
                                        res.status, res.body)))
            pieces.append(res.body.data)
            attrs = res.body.file_attributes or attrs
            if res.body.eof:
                eof = True
                break
        raw = b"".join(pieces)
        codec = args.codec
        data = raw
        if codec == Codec.ZSTD:
            data = await asyncio.get_running_loop().run_in_executor(
                None, compress, raw, self.level)
            if len(data) >= len(raw):
                # Incompressible: raw costs less, and nothing to undo.
                codec, data = Codec.NONE, raw
        self.stats["bulk_reads"] += 1
        self.stats["bulk_raw_bytes"] += len(raw)
        self.stats["bulk_wire_bytes"] += len(data)
        return rpc.accepted(call.xid, AcceptStat.SUCCESS, bulk.encode_res(
            call.proc, nfs3.Result(0, bulk.ReadOk(attrs, eof, len(raw),
                                                  codec, data))))

    async def _read(self, cred, fh, offset, count):
        """One NFS READ, completed if the server answers short."""
        data, res = bytearray(), None
        while len(data) < count:
            body = nfs3.encode_args(Nfs3Proc.READ, nfs3.ReadArgs(
                fh, offset + len(data), count - len(data)))
            results = rpc.results_of(await self.nfs_pool.call(
                rpc.call_builder(const.NFS_PROGRAM, const.NFS_V3,
                                 Nfs3Proc.READ, cred, args=body), True))
            if results is None:
                return nfs3.Result(const.NfsStat.NFS3ERR_IO,
                                   nfs3.AttrBody(None))
            res = nfs3.decode_res(Nfs3Proc.READ, results)
            if not res.ok:
                return res
            data += res.body.data
            if res.body.eof or not res.body.data:
                break
        return nfs3.Result(0, nfs3.ReadOk(res.body.file_attributes,
                                          len(data), res.body.eof,
                                          bytes(data)))
