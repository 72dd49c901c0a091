# SPDX-License-Identifier: Apache-2.0
"""READs served from the block cache, and what keeps it from going stale.

A READ is split into blocks; hits come from the :class:`BlockStore`,
misses are coalesced into as few upstream READs as possible, concurrent
misses of one block share one fetch (collapsed forwarding), and a
sequential reader gets the next blocks fetched ahead of it.

Freshness (never serve stale bytes silently): every block carries the
file's (size, mtime, ctime) from when it was fetched.  The proxy keeps,
per file, the set of attributes that are "current" -- the last ones the
server reported, plus those produced by writes that went through this very
proxy.  An unexplained change empties that set, so every older block is a
miss.  Replies to calls in flight together come back in any order, so
attributes older than the newest the proxy has (by ctime, then size: a
WRITE only grows a file) are past news and change nothing, unless
nothing at all was heard of the file while that call was out; and the
bytes of a READ that raced a WRITE of them are not kept.

How often the proxy asks the server (GETATTR) is the consistency
policy: within a coherence window the last answer is trusted; an
``immutable`` export (golden images) is re-checked rarely.  There the
proxy also answers GETATTR of a file it checked within the coherence
window: a burst of clones runs ``qemu-img`` and ``stat`` on the golden
image many times, each otherwise a round trip to the DTN for attributes
the proxy trusts for its READs anyway.  Only briefly, so that a client
asking later still learns of an image changed in place, against the
policy.
"""

import asyncio
import collections
import dataclasses
import time

from oslo_log import log as logging

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.nfs.xdr import Packer
from gvfs_openstack.proxy.cache import exports
from gvfs_openstack.proxy.cache.store import Attrs
from gvfs_openstack.proxy.cache.store import fh_digest

LOG = logging.getLogger(__name__)

#: Files whose state is kept in memory (least recently used dropped).
MAX_FILES = 65536
#: Attribute versions remembered as current per file.
MAX_CURRENT = 64


def attrs_of(attrs):
    """Change attributes of a fattr3 or a wcc_attr (both have them)."""
    return Attrs(attrs.size,
                 attrs.mtime.seconds << 32 | attrs.mtime.nseconds,
                 attrs.ctime.seconds << 32 | attrs.ctime.nseconds)


@dataclasses.dataclass
class _File:
    fh: bytes
    fattr: nfs3.Fattr
    checked: float
    current: list
    digest: bytes
    next_offset: int = -1
    #: READs in a row that each started where the one before ended.
    streak: int = 0
    #: Read-ahead has looked at the blocks before this one.
    ahead: int = 0
    #: Where a read-ahead guided by the zero map last looked from.
    ahead_from: int = 0
    #: The file's sidecar, its zero map, and the (size, mtime) they are
    #: valid for.
    sidecar: object = None
    zeros: object = None
    zeros_for: tuple = None
    #: Counts the attribute reports taken: one that is unchanged since a
    #: call went out means the call's reply is the newest word.
    reports: int = 0


class Fallback(Exception):
    """This READ cannot be served through the cache: forward it as is."""


class CachedReads:
    def __init__(self, store, pool, counters, policies=None,
                 readahead=4 * 1024 * 1024, max_fetch=1024 * 1024,
                 max_read=1024 * 1024, clock=time.monotonic):
        self.store = store
        self.pool = pool
        #: :class:`counters.CacheCounters`
        self.counters = counters
        self.policies = policies or exports.ExportPolicies(3.0)
        self.readahead_blocks = readahead // store.geometry.block_size
        self.max_fetch_blocks = max(1, max_fetch // store.geometry.block_size)
        self.max_read = max_read
        self.clock = clock
        self._files = collections.OrderedDict()
        self._inflight = {}
        #: (digest, block) of fetches in flight that a WRITE overtook.
        self._overtaken = set()
        #: Set to a :class:`Sidecars` to use the files' zero maps, and to
        #: a :class:`WholeFiles` to act on their ``whole_file`` action.
        self.sidecars = None
        self.whole_files = None
        #: Zeros to send: never written, so calloc's pages stay shared.
        self._zeros = memoryview(bytes(max(max_read,
                                           store.geometry.block_size)))
        self._zero_block = self._zeros[:store.geometry.block_size]

    # --- file state ---------------------------------------------------------

    def reports_of(self, fh):
        """A mark to give :meth:`observe` for a reply to a call sent now."""
        state = self._files.get(bytes(fh))
        return None if state is None else state.reports

    def observe(self, fh, fattr, reports=None):
        """The server reported ``fattr`` for ``fh``.

        ``reports`` is :meth:`reports_of` from when the call went out.
        Returns the file's state, unchanged if ``fattr`` is past news.
        """
        if fattr is None:
            return
        fh = bytes(fh)
        attrs = attrs_of(fattr)
        state = self._files.get(fh)
        if state is None:
            state = _File(fh, fattr, self.clock(), [attrs], fh_digest(fh))
            self._files[fh] = state
            if len(self._files) > MAX_FILES:
                self._files.popitem(last=False)
            return state
        if (reports is None or reports != state.reports) and \
                _is_older(attrs, attrs_of(state.fattr)):
            self.counters.cache_stale_replies += 1
            return state
        state.reports += 1
        if attrs not in state.current:
            # Changed behind our back: every older block is stale.
            self.counters.cache_invalidations += 1
            state.current = [attrs]
        state.fattr = fattr
        state.checked = self.clock()
        self._files.move_to_end(fh)
        return state

    def observe_own_change(self, fh, wcc, reset=False):
        """A WRITE or SETATTR that went through this proxy changed ``fh``.

        If the file was as we knew it just before (``wcc.before``), the
        new attributes join the current ones and blocks cached under the
        old ones stay valid (except those the caller discards); a size
        change by SETATTR (``reset``) keeps only the new attributes.
        """
        state = self._files.get(bytes(fh))
        if state is None or wcc is None or wcc.after is None:
            return
        after = attrs_of(wcc.after)
        if not reset and _is_older(after, attrs_of(state.fattr)):
            # A WRITE answered after a later one: its bytes were
            # discarded all the same; its attributes are past.
            self.counters.cache_stale_replies += 1
            return
        state.reports += 1
        ours = wcc.before is not None and \
            attrs_of(wcc.before) in state.current
        if reset or not ours:
            if not ours:
                self.counters.cache_invalidations += 1
            state.current = [after]
        elif after not in state.current:
            state.current.append(after)
            del state.current[:-MAX_CURRENT]
        state.fattr = wcc.after
        state.checked = self.clock()

    def discard_range(self, fh, offset, count):
        """Forget blocks a WRITE changed, and those being fetched."""
        state = self._files.get(bytes(fh))
        digest = state.digest if state else fh_digest(fh)
        bs = self.store.geometry.block_size
        for block in range(offset // bs, (offset + max(count, 1) - 1) // bs
                           + 1):
            self.store.discard(digest, block)
            if (digest, block) in self._inflight:
                # The server may have read them before the WRITE.
                self._overtaken.add((digest, block))

    async def state_of(self, call, fh):
        state = self._files.get(fh)
        if state is not None and self.clock() - state.checked < \
                self.policies.revalidate_after(fh):
            return state
        self.counters.cache_revalidations += 1
        reports = self.reports_of(fh)
        res = await self.upstream(call, Nfs3Proc.GETATTR,
                                  nfs3.GetattrArgs(fh))
        if not res.ok:
            raise Fallback()
        return self.observe(fh, res.body.obj_attributes, reports)

    def attributes(self, call):
        """The GETATTR reply for ``call`` from the proxy's own record.

        Only for a regular file checked within its export's
        ``answers_getattr_for`` seconds; raises Fallback otherwise
        (directories always go to the server: their entries are not
        cached here).
        """
        try:
            fh = bytes(nfs3.decode_args(Nfs3Proc.GETATTR, call.args).object)
        except ProtocolError:
            raise Fallback() from None
        state = self._files.get(fh)
        if state is None or state.fattr.type != const.FileType.NF3REG or \
                self.clock() - state.checked >= \
                self.policies.answers_getattr_for(fh):
            raise Fallback()
        self.counters.cache_getattrs_answered += 1
        return rpc.accepted(call.xid, results=nfs3.encode_res(
            Nfs3Proc.GETATTR, nfs3.Result(0, nfs3.GetattrOk(state.fattr))))

    # --- upstream calls ------------------------------------------------------

    async def upstream(self, call, proc, args):
        """Call ``proc`` upstream with the client's own credential."""
        body = nfs3.encode_args(proc, args)

        record = await self.pool.call(rpc.call_builder(
            const.NFS_PROGRAM, const.NFS_V3, proc, call.cred, call.verf,
            body), True)
        try:
            results = rpc.results_of(record)
            if results is None:
                raise Fallback()
            return nfs3.decode_res(proc, results)
        except ProtocolError as e:
            LOG.warning("garbled %s reply from upstream: %s", proc.name, e)
            raise Fallback() from e

    def fetch(self, call, state, first, count):
        """Start fetching ``count`` blocks from ``first`` upstream.

        One READ, or with a zero map one READ per non-zero part.
        """
        loop = asyncio.get_running_loop()
        futures = {}
        for block in range(first, first + count):
            futures[block] = self._inflight[(state.digest, block)] = \
                loop.create_future()
        loop.create_task(self._fill(call, state, first, count, futures))
        return futures

    async def _read_range(self, call, fh, start, end):
        """``(data, fattr, eof)`` of one upstream READ."""
        res = await self.upstream(call, Nfs3Proc.READ, nfs3.ReadArgs(
            fh, start, end - start))
        if not res.ok:
            raise Fallback()
        self.counters.cache_bytes_fetched += len(res.body.data)
        self._count(fh, "bytes_fetched", len(res.body.data))
        return res.body.data, res.body.file_attributes, res.body.eof

    async def _fetch_nonzero(self, call, state, zeros, start, end):
        """The bytes of [start, end) reading only the non-zero parts.

        None if the file changed meanwhile (the zero map no longer holds).
        """
        parts = zeros.nonzero(start, end)
        replies = await asyncio.gather(*(
            self._read_range(call, state.fh, s, e) for s, e in parts))
        data = bytearray(end - start)
        fattr = state.fattr
        for (s, e), (piece, fattr, _) in zip(parts, replies):
            if len(piece) != e - s or fattr is None or \
                    version_key(fattr) != state.zeros_for:
                return None, fattr
            data[s - start:e - start] = piece
        self.counters.cache_bytes_zero_map += (end - start) - sum(
            e - s for s, e in parts)
        return data, fattr

    async def _fill(self, call, state, first, count, futures):
        bs = self.store.geometry.block_size
        fh = state.fh
        reports = state.reports
        try:
            start = first * bs
            end = min((first + count) * bs, state.fattr.size)
            zeros = self.zeros_of(state)
            data = None
            if zeros is not None and end > start:
                data, fattr = await self._fetch_nonzero(call, state, zeros,
                                                        start, end)
                eof = True if data is None else end >= fattr.size
            if data is None:
                data, fattr, eof = await self._read_range(
                    call, fh, start, (first + count) * bs)
            data = memoryview(data)
            fresh = self.observe(fh, fattr, reports) or state
            attrs = attrs_of(fattr) if fattr is not None else \
                fresh.current[-1]
            keep = attrs in fresh.current
            for i, block in enumerate(range(first, first + count)):
                chunk = data[i * bs:(i + 1) * bs]
                if chunk and (len(chunk) == bs or eof) and keep and \
                        (fresh.digest, block) not in self._overtaken:
                    self.store.put(fresh.digest, block, chunk, attrs)
                futures[block].set_result((chunk, attrs))
        except BaseException as e:
            for future in futures.values():
                if not future.done():
                    future.set_exception(e if isinstance(e, Exception)
                                         else Fallback())
            if not isinstance(e, Exception):
                raise
        finally:
            for block in futures:
                self._inflight.pop((state.digest, block), None)
                self._overtaken.discard((state.digest, block))
            for future in futures.values():
                if future.done() and not future.cancelled():
                    future.exception()  # Retrieved: the reader may be gone.

    def zeros_of(self, state):
        """The file's zero map, if it holds for the file as it is now."""
        if state.zeros is not None and \
                state.zeros_for == version_key(state.fattr):
            return state.zeros
        return None

    async def load_zeros(self, call, state):
        """Look for the file's sidecar (once per file version)."""
        if self.sidecars is None:
            return
        key = version_key(state.fattr)
        if state.zeros_for != key:
            state.sidecar = await self.sidecars.sidecar_of(call, state)
            state.zeros = state.sidecar.zeros if state.sidecar else None
            state.zeros_for = key

    # --- the READ path -------------------------------------------------------

    def cached_block(self, state, block, expected_len):
        """A block's bytes if cached under the file's current attributes."""
        found = self.store.get(state.digest, block)
        if found is None:
            return None
        data, attrs = found
        if attrs not in state.current or len(data) != expected_len:
            return None
        return data

    async def read(self, call):
        """The READ reply for ``call`` as a tuple of buffers.

        Raises Fallback when the call cannot be served from the cache.
        """
        try:
            args = nfs3.decode_args(Nfs3Proc.READ, call.args)
        except ProtocolError:
            raise Fallback() from None
        fh = bytes(args.file)
        state = await self.state_of(call, fh)
        if state.fattr.type != const.FileType.NF3REG:
            raise Fallback()
        await self.load_zeros(call, state)
        size = state.fattr.size
        # A short read is always allowed (RFC 1813 section 3.3.6): a
        # hostile count cannot make the proxy fetch a whole file at once.
        end = min(args.offset + min(args.count, self.max_read), size)
        pieces = []
        self.counters.cache_reads += 1
        zeros = self.zeros_of(state)
        all_zero = zeros is not None and zeros.covers(args.offset, end)
        whole_file = self.whole_files is not None and \
            await self.whole_files.wait_for(call, state, args.offset, end)
        # Read ahead before waiting for this READ's own blocks: a client
        # keeps several READs in flight, and each must see the one before
        # it as its predecessor.
        if not whole_file and (args.offset == state.next_offset or
                               args.offset == 0):
            if args.offset == 0:
                state.ahead = state.streak = 0
            state.streak += 1
            self._read_ahead(call, state, end, size,
                             self._window(state, end - args.offset))
        else:
            state.streak = 0
        state.next_offset = end
        count = max(0, end - args.offset)
        if all_zero:
            # The whole READ is zeros by the sidecar: no blocks to look at.
            self.counters.cache_reads_zero_map += 1
            self.counters.cache_bytes_zero_map += count
            self._count(fh, "bytes_zero_map", count)
            pieces = [self._zeros[:count]]
        elif end > args.offset:
            pieces = await self.blocks(call, state, args.offset, end)
        return read_reply(call.xid, state.fattr, count,
                          args.offset + count >= size, pieces)

    async def blocks(self, call, state, start, end):
        bs = self.store.geometry.block_size
        size = state.fattr.size
        first, last = start // bs, (end - 1) // bs
        pieces = {}
        waiting = {}
        missing = []
        zeros = self.zeros_of(state)
        zero_blocks = zero_bytes = 0
        for block in range(first, last + 1):
            expected = min(bs, size - block * bs)
            if zeros is not None and zeros.covers(block * bs,
                                                  block * bs + expected):
                pieces[block] = self._zero_block[:expected]
                zero_blocks += 1
                zero_bytes += expected
                continue
            data = self.cached_block(state, block, expected)
            if data is not None:
                pieces[block] = data
                self.counters.cache_hits += 1
            elif (state.digest, block) in self._inflight:
                waiting[block] = self._inflight[(state.digest, block)]
                self.counters.cache_collapsed += 1
            else:
                missing.append(block)
                self.counters.cache_misses += 1
        for run_start, run_len in _runs(missing, self.max_fetch_blocks):
            waiting.update(self.fetch(call, state, run_start, run_len))
        for block, future in waiting.items():
            chunk, _ = await asyncio.shield(future)
            pieces[block] = chunk
        local = sum(len(pieces[b]) for b in pieces
                    if b not in waiting) - zero_bytes
        self.counters.cache_bytes_local += local
        self.counters.cache_bytes_zero_map += zero_bytes
        self._count(state.fh, "bytes_local", local)
        self._count(state.fh, "bytes_zero_map", zero_bytes)
        self._count(state.fh, "hits", len(pieces) - len(waiting) -
                    zero_blocks)
        self._count(state.fh, "misses", len(waiting))
        views = [memoryview(pieces[b]) for b in range(first, last + 1)]
        views[-1] = views[-1][:end - last * bs]
        views[0] = views[0][start - first * bs:]
        return views

    def _count(self, fh, key, amount):
        """Per-export counters (``?`` for handles of unknown export)."""
        self.counters.export(self.policies.export_of(fh) or "?")[key] += \
            amount

    def present(self, state, block, expected_len):
        """Whether the block needs no fetch.

        It is cached (by its tag), or all zeros by the zero map.
        """
        zeros = self.zeros_of(state)
        bs = self.store.geometry.block_size
        if zeros is not None and zeros.covers(block * bs,
                                              block * bs + expected_len):
            return True
        found = self.store.peek(state.digest, block)
        return found is not None and found[0] == expected_len and \
            found[1] in state.current

    def _window(self, state, count):
        """Bytes to read ahead of a reader ``state.streak`` READs in a row.

        Twice the READ for the first two, the whole ``readahead`` from
        the third: two scattered READs that happen to touch (a guest's
        boot) cost little, a stream gets everything at once.
        """
        full = self.readahead_blocks * self.store.geometry.block_size
        return full if state.streak >= 3 else min(full, 2 * count)

    def _read_ahead(self, call, state, end, size, window):
        bs = self.store.geometry.block_size
        # Blocks before state.ahead were looked at by an earlier call.
        first = max(-(-end // bs), state.ahead)
        horizon = -(-end // bs) * bs + window
        zeros = self.zeros_of(state)
        if zeros is not None:
            # Zero blocks cost no fetch: look as far ahead as it takes to
            # keep the same amount of data on its way (a sparse image
            # otherwise has little in flight and waits on the latency).
            # Worked out again after every quarter window of progress.
            if state.ahead and end < state.ahead_from + window // 4:
                return
            state.ahead_from = end
            horizon = zeros.data_horizon(
                -(-end // bs) * bs, window, horizon + 15 * window)
        last = min(-(-horizon // bs), -(-size // bs))
        if first >= last:
            return
        state.ahead = last
        missing = [b for b in range(first, last)
                   if (state.digest, b) not in self._inflight
                   and not self.present(state, b, min(bs, size - b * bs))]
        for run_start, run_len in _runs(missing, self.max_fetch_blocks):
            self.counters.cache_readahead_blocks += run_len
            self.fetch(call, state, run_start, run_len)

    def runs(self, blocks):
        """Contiguous runs of ``blocks``, each one upstream READ."""
        return _runs(blocks, self.max_fetch_blocks)

    def in_flight(self, state, block):
        return (state.digest, block) in self._inflight

    def forget(self, fh):
        """Ask the server about ``fh`` again before trusting it."""
        self._files.pop(bytes(fh), None)

    def drop(self):
        self.store.drop_all()
        self._files.clear()


def _is_older(attrs, than):
    """Whether ``attrs`` of a file are from before ``than``.

    The server's ctime orders changes; a WRITE never shrinks a file, so
    within one tick of its clock the larger size is the later.
    """
    return (attrs.ctime, attrs.size) < (than.ctime, than.size)


def version_key(fattr):
    """What a zero map is valid for: the file's size and mtime."""
    return fattr.size, fattr.mtime.seconds * 10 ** 9 + fattr.mtime.nseconds


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


def _runs(blocks, limit):
    """Contiguous runs of sorted block numbers, each at most limit long."""
    run_start, run_len = None, 0
    for block in blocks:
        if run_start is not None and block == run_start + run_len and \
                run_len < limit:
            run_len += 1
            continue
        if run_start is not None:
            yield run_start, run_len
        run_start, run_len = block, 1
    if run_start is not None:
        yield run_start, run_len
