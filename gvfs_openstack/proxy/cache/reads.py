# SPDX-License-Identifier: Apache-2.0
"""READs served from the block cache.

A READ is split into blocks; hits come from the :class:`BlockStore`,
misses go to the :class:`fetch.Fetcher`, which coalesces them into as
few upstream calls as possible and shares a fetch among the readers of
its blocks, and a sequential reader gets the next blocks fetched ahead
of it.  Blocks all zeros by the file's sidecar (its zero map) are
answered without a fetch.

How often the proxy asks the server (GETATTR) is the consistency
policy: within a coherence window the last answer is trusted; an
``immutable`` export (golden images) is re-checked rarely.  There the
proxy also answers GETATTR of a file it checked within the coherence
window: a burst of clones runs ``qemu-img`` and ``stat`` on the golden
image many times, each otherwise a round trip to the DTN for attributes
the proxy trusts for its READs anyway.  Only briefly, so that a client
asking later still learns of an image changed in place, against the
policy.

A call the cache cannot serve (a directory, an error from the server, a
garbled call) is answered None here, and the role forwards it: the
server says what is wrong.
"""

import dataclasses
import time

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.nfs.xdr import Packer
from gvfs_openstack.proxy.cache.freshness import stream_for
from gvfs_openstack.proxy.cache.freshness import zeros_of


@dataclasses.dataclass(frozen=True)
class ReadSizes:
    """How much a READ may bring: bytes.

    ``readahead``: fetched ahead of a sequential reader (0: none);
    ``max_read``: the most one READ is answered with.
    """

    readahead: int = 4 * 1024 * 1024
    max_read: int = 1024 * 1024


class CachedReads:
    """READ (and some GETATTR) answered from the block cache.

    ``fetcher`` (:class:`fetch.Fetcher`) has the files' states and
    fetches what the cache lacks; ``files`` is the
    :class:`freshness.FileStates` it shares with the other users of the
    cache, ``counters`` the :class:`counters.CacheCounters`, ``policies``
    the :class:`exports.ExportPolicies`.  With ``sidecars``
    (:class:`sidecars.Sidecars`) files' zero maps are used, with
    ``whole_files`` (:class:`bulk_fetch.WholeFiles`) their
    ``whole_file`` action; ``sizes`` is its :class:`ReadSizes`.  Each of
    ``on_read`` is called ``(call, state, start, end)`` at every READ
    and READV of a regular file, hit or miss (a boot profile records
    and replays from them).
    """

    def __init__(self, fetcher, files, counters, policies, sidecars=None,
                 whole_files=None, sizes=ReadSizes(), clock=time.monotonic,
                 on_read=()):
        self.fetcher = fetcher
        self.files = files
        self.counters = counters
        self.policies = policies
        self.sidecars = sidecars
        self.whole_files = whole_files
        self.block_size = fetcher.block_size
        self.readahead_blocks = sizes.readahead // self.block_size
        self.max_read = max_read = sizes.max_read
        self.clock = clock
        self.on_read = tuple(on_read)
        #: Zeros to send: never written, so calloc's pages stay shared.
        self._zeros = memoryview(bytes(max(max_read, self.block_size)))

    def attributes(self, call):
        """The GETATTR reply for ``call`` from the proxy's own record.

        Only for a regular file checked within its export's
        ``answers_getattr_for`` seconds; None otherwise (directories
        always go to the server: their entries are not cached here).
        """
        try:
            fh = bytes(nfs3.decode_args(Nfs3Proc.GETATTR, call.args).object)
        except ProtocolError:
            return None
        state = self.files.get(fh)
        if state is None or state.fattr.type != const.FileType.NF3REG or \
                self.clock() - state.checked >= \
                self.policies.answers_getattr_for(fh):
            return None
        self.counters.cache_getattrs_answered += 1
        return rpc.accepted(call.xid, results=nfs3.encode_res(
            Nfs3Proc.GETATTR, nfs3.Result(0, nfs3.GetattrOk(state.fattr))))

    async def _load_zeros(self, call, state):
        """Look for the file's sidecar (once per file version)."""
        if self.sidecars is not None:
            await self.sidecars.load_zeros(call, state)

    # --- the READ path -------------------------------------------------------

    async def read(self, call):
        """The READ reply for ``call`` as a tuple of buffers.

        None when the call cannot be served from the cache.
        """
        try:
            args = nfs3.decode_args(Nfs3Proc.READ, call.args)
        except ProtocolError:
            return None
        fh = bytes(args.file)
        state = await self.fetcher.state_of(call, fh)
        if state is None or state.fattr.type != const.FileType.NF3REG:
            return None
        await self._load_zeros(call, state)
        size = state.fattr.size
        for hook in self.on_read:
            hook(call, state, args.offset,
                 min(args.offset + args.count, size))
        # A short read is always allowed (RFC 1813 section 3.3.6): a
        # hostile count cannot make the proxy fetch a whole file at once.
        end = min(args.offset + min(args.count, self.max_read), size)
        pieces = []
        self.counters.cache_reads += 1
        zeros = zeros_of(state)
        all_zero = zeros is not None and zeros.covers(args.offset, end)
        whole_file = self.whole_files is not None and \
            await self.whole_files.wait_for(call, state, args.offset, end)
        # Read ahead before waiting for this READ's own blocks: a client
        # keeps several READs in flight, and each must see the one before
        # it as its predecessor.
        stream = None if whole_file else stream_for(state, args.offset, end)
        if stream is not None:
            self._read_ahead(call, state, stream, end, size,
                             self._window(stream, end - args.offset))
        count = max(0, end - args.offset)
        if all_zero:
            # The whole READ is zeros by the sidecar: no blocks to look at.
            self.counters.cache_reads_zero_map += 1
            self.counters.cache_bytes_zero_map += count
            self.fetcher.count(fh, "bytes_zero_map", count)
            pieces = [self._zeros[:count]]
        elif end > args.offset:
            pieces = await self.fetcher.blocks(call, state, args.offset, end)
            if pieces is None:
                return None
        return read_reply(call.xid, state.fattr, count,
                          args.offset + count >= size, pieces)

    async def bulk_read(self, call):
        """A bulk READ's reply from the cache, None to forward it.

        A LAN proxy answers what it holds whole (uncompressed: the LAN
        is not the bottleneck, the two cores are), so that a host behind
        it streams an image from the LAN, not across the WAN again.  A
        range with a block it lacks goes on to the next hop unchanged.
        """
        args, state = await self._bulk_file(call)
        if state is None:
            return None
        size = state.fattr.size
        end = min(args.offset + min(args.count, self.max_read), size)
        bs = self.block_size
        zeros = zeros_of(state)
        pieces = []
        for block in range(args.offset // bs, -(-end // bs)):
            expected = min(bs, size - block * bs)
            if zeros is not None and zeros.covers(block * bs,
                                                  block * bs + expected):
                data = self._zeros[:expected]
            else:
                data = self.fetcher.cached(state, block, expected)
                if data is None:
                    return None
            pieces.append(data)
        count = max(0, end - args.offset)
        skip = args.offset % bs
        data = b"".join(pieces)[skip:skip + count]
        self.counters.cache_bulk_reads_answered += 1
        self.counters.cache_bytes_local += count
        return rpc.accepted(call.xid, results=bulk.encode_res(
            bulk.BulkProc.READ, nfs3.Result(0, bulk.ReadOk(
                state.fattr, args.offset + count >= size, count,
                bulk.Codec.NONE, data))))

    async def bulk_readv(self, call):
        """A READV's reply from the cache, fetching what it lacks.

        None to forward it (not a regular file, a fetch failed).  At most
        ``max_read`` bytes in all, as a READ: the caller asks again for
        the extents left out.  Uncompressed, as :meth:`bulk_read`.
        """
        args, state = await self._bulk_file(call)
        if state is None:
            return None
        await self._load_zeros(call, state)
        size = state.fattr.size
        spans = bulk.plan(args.extents, self.max_read, size)
        if spans:
            for hook in self.on_read:
                hook(call, state, *spans[0])
        found = await self.fetcher.spans(call, state, spans)
        if found is None:
            return None
        self.counters.cache_bulk_reads_answered += 1
        return readv_reply(call.xid, state.fattr,
                           [end - start for start, end in spans],
                           [view for views in found for view in views])

    async def _bulk_file(self, call):
        """``(args, state)`` of a bulk call's regular file.

        ``state`` is None if the call does not decode or names no
        regular file.
        """
        try:
            args = bulk.decode_args(call.proc, call.args)
        except ProtocolError:
            return None, None
        state = await self.fetcher.state_of(call, bytes(args.file))
        if state is None or state.fattr.type != const.FileType.NF3REG:
            return args, None
        return args, state

    def _window(self, stream, count):
        """Bytes to read ahead of a reader ``stream.streak`` READs in a row.

        Twice the READ for the first two, the whole ``readahead`` from
        the third: two scattered READs that happen to touch (a guest's
        boot) cost little, a stream gets everything at once.
        """
        full = self.readahead_blocks * self.block_size
        return full if stream.streak >= 3 else min(full, 2 * count)

    def _read_ahead(self, call, state, stream, end, size, window):
        bs = self.block_size
        # Blocks before stream.ahead were looked at by an earlier call.
        first = max(-(-end // bs), stream.ahead)
        horizon = -(-end // bs) * bs + window
        zeros = zeros_of(state)
        if zeros is not None:
            # Zero blocks cost no fetch: look as far ahead as it takes to
            # keep the same amount of data on its way (a sparse image
            # otherwise has little in flight and waits on the latency).
            # Worked out again after every quarter window of progress.
            if stream.ahead and end < stream.ahead_from + window // 4:
                return
            stream.ahead_from = end
            horizon = zeros.data_horizon(
                -(-end // bs) * bs, window, horizon + 15 * window)
        last = min(-(-horizon // bs), -(-size // bs))
        if first >= last:
            return
        stream.ahead = last
        missing = [b for b in range(first, last)
                   if self.fetcher.wanted(state, b)]
        for run_start, run_len in self.fetcher.runs(missing):
            self.counters.cache_readahead_blocks += run_len
            self.fetcher.fetch(call, state, run_start, run_len)


def read_reply(xid, fattr, count, eof, pieces):
    """A READ reply as buffers: header, then the data pieces uncopied."""
    p = Packer()
    p.pack_int(0)
    nfs3.POST_OP_ATTR.pack(p, fattr)
    p.pack_uint(count)
    p.pack_bool(eof)
    p.pack_uint(count)
    header = rpc.encode_message(rpc.Reply(xid)) + p.get_buffer()
    return (header, *pieces, b"\0" * ((4 - count % 4) % 4))


def readv_reply(xid, fattr, counts, pieces):
    """A READV reply as buffers: header, then the data pieces uncopied."""
    count = sum(counts)
    p = Packer()
    p.pack_int(0)
    nfs3.POST_OP_ATTR.pack(p, fattr)
    p.pack_uint(len(counts))
    for one in counts:
        p.pack_uint(one)
    p.pack_uint(count)
    p.pack_uint(bulk.Codec.NONE)
    p.pack_uint(count)
    header = rpc.encode_message(rpc.Reply(xid)) + p.get_buffer()
    return (header, *pieces, b"\0" * ((4 - count % 4) % 4))
