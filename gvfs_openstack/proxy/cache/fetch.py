# SPDX-License-Identifier: Apache-2.0
"""The fetch engine of the block cache: what to fetch, and fetching it.

Everything that brings bytes into the cache goes through one
:class:`Fetcher`: a reader's misses (:mod:`reads`), read-ahead, a boot
profile's prefetch (:mod:`profiles`), an image stream (:mod:`stream`),
a warm (:mod:`warm`) and write-back's reads of the server's bytes
(:mod:`writeback`).  So it alone knows which blocks are on their way:
concurrent misses of one block share one fetch (collapsed forwarding),
a WRITE that overtakes a fetch keeps its bytes out of the cache, and
work that waited before fetching (a prefetch, a stream) asks
:meth:`Fetcher.wanted` again rather than fetch a block twice.

A fetch is one READ, one READ per non-zero part where the file's zero
map holds (none of its zeros cross the link), or, for several runs, one
READV of the bulk channel where the next hop serves it.  Which blocks
are still valid is :mod:`freshness`'s to say; how runs are grouped is
:mod:`gvfs_openstack.sidecar.profile_plan`'s.
"""

import asyncio
import contextlib
import time

from oslo_log import log as logging

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.proxy.cache.freshness import attrs_of
from gvfs_openstack.proxy.cache.freshness import cached_block
from gvfs_openstack.proxy.cache.freshness import version_key
from gvfs_openstack.proxy.cache.freshness import zeros_of
from gvfs_openstack.proxy.cache import readv
from gvfs_openstack.proxy.cache.store import fh_digest
from gvfs_openstack.proxy.upstream_calls import GarbledReply
from gvfs_openstack.proxy.upstream_calls import ReplyError
from gvfs_openstack.sidecar import profile_plan

LOG = logging.getLogger(__name__)


class FetchError(Exception):
    """An upstream READ for the cache brought no bytes to keep.

    The server answered it with an error, refused it, or the fetch was
    stopped.  Set on the futures :meth:`Fetcher.fetch` returns: a
    READ waiting on them is answered None (forwarded), a warm reports it.
    """


class Fetcher:
    """Fetches blocks into the cache, each once however many want it.

    ``store`` is the :class:`store.BlockStore`, ``files`` the
    :class:`freshness.FileStates` it shares with the other users of the
    cache, ``upstream`` the
    :class:`~gvfs_openstack.proxy.upstream_calls.UpstreamCalls` its
    fetches go through, ``counters`` the :class:`counters.CacheCounters`
    and ``policies`` the :class:`exports.ExportPolicies`; ``max_fetch``
    is the most one fetch asks the next hop for, in bytes.
    """

    def __init__(self, store, files, upstream, counters, policies,
                 max_fetch=1024 * 1024, clock=time.monotonic):
        self.store = store
        self.files = files
        self.upstream = upstream
        self.counters = counters
        self.policies = policies
        self.block_size = store.geometry.block_size
        self.max_fetch_blocks = max(1, max_fetch // self.block_size)
        self.clock = clock
        self._inflight = {}
        #: (digest, block) of fetches in flight that a WRITE overtook.
        self._overtaken = set()
        #: (digest, block) of speculative fetches a reader joined: stored
        #: like any block a reader asked for.
        self._claimed = set()
        #: Zeros to send: never written, so calloc's pages stay shared.
        self._zero_block = memoryview(bytes(self.block_size))
        #: Until when the next hop is known not to serve READV.
        self._readv_unavailable_until = 0.0

    # --- file state ---------------------------------------------------------

    async def state_of(self, call, fh):
        """The state of ``fh``, asking the server if it is too old.

        None if the server does not answer the GETATTR with attributes.
        """
        state = self.trusted(fh)
        if state is not None:
            return state
        self.counters.cache_revalidations += 1
        reports = self.files.reports_of(fh)
        res = await self._nfs(call, Nfs3Proc.GETATTR, nfs3.GetattrArgs(fh))
        if res is None or not res.ok:
            return None
        return self.files.observe(fh, res.body.obj_attributes, reports)

    def trusted(self, fh):
        """The state of ``fh`` if it is recent enough to trust, else None.

        Recent enough: checked within its export's revalidation window.
        """
        state = self.files.get(fh)
        if state is not None and self.clock() - state.checked < \
                self.policies.revalidate_after(fh):
            return state
        return None

    def forget(self, fh):
        """Ask the server about ``fh`` again before trusting it."""
        self.files.forget(fh)

    def drop(self):
        """Empty the cache: every block, every file's state."""
        self.store.drop_all()
        self.files.clear()

    def discard_range(self, fh, offset, count):
        """Forget blocks a WRITE changed, and those being fetched."""
        state = self.files.get(fh)
        digest = state.digest if state else fh_digest(fh)
        bs = self.block_size
        for block in range(offset // bs, (offset + max(count, 1) - 1) // bs
                           + 1):
            self.store.discard(digest, block)
            if (digest, block) in self._inflight:
                # The server may have read them before the WRITE.
                self._overtaken.add((digest, block))

    # --- fetching ----------------------------------------------------------

    async def _nfs(self, call, proc, args):
        """``proc`` upstream with the client's own credential.

        None if the next hop refused it or garbled the reply.
        """
        try:
            return await self.upstream.nfs(proc, args, call.cred, call.verf)
        except GarbledReply as e:
            LOG.warning("%s", e)
        except ReplyError:
            pass  # Forwarded, the call gets the same answer.
        return None

    def fetch(self, call, state, first, count, reader=None,
              speculative=False):
        """Start fetching ``count`` blocks from ``first`` upstream.

        One READ, or with a zero map one READ per non-zero part; or one
        call of ``reader(call, state, start, end)``, which returns
        ``(data, fattr, eof)`` like :meth:`_read_range` (the image
        stream's bulk READs).  Readers of these blocks meanwhile wait
        for this fetch instead of sending their own.  ``speculative``
        blocks are stored only where they push nothing out
        (:meth:`BlockStore.put`).
        """
        loop = asyncio.get_running_loop()
        futures = {}
        for block in range(first, first + count):
            futures[block] = self._inflight[(state.digest, block)] = \
                loop.create_future()
        loop.create_task(self._fill(call, state, first, count, futures,
                                    reader, speculative))
        return futures

    async def _read_range(self, call, fh, start, end):
        """``(data, fattr, eof)`` of one upstream READ."""
        res = await self._nfs(call, Nfs3Proc.READ, nfs3.ReadArgs(
            fh, start, end - start))
        if res is None or not res.ok:
            raise FetchError("READ refused upstream" if res is None else
                             const.status_name(res.status))
        self.counters.cache_bytes_fetched += len(res.body.data)
        self.count(fh, "bytes_fetched", len(res.body.data))
        return res.body.data, res.body.file_attributes, res.body.eof

    async def _fetch_nonzero(self, call, state, zeros, start, end):
        """The bytes of [start, end) reading only the non-zero parts.

        None if the file changed meanwhile (the zero map no longer holds).
        """
        parts = zeros.nonzero(start, end)
        replies = await asyncio.gather(*(
            self._read_range(call, state.fh, s, e) for s, e in parts))
        fattr = state.fattr
        for _, fattr, _ in replies:
            if fattr is None or version_key(fattr) != state.zeros_for:
                return None, fattr
        return self._with_zeros(start, end, parts,
                                [piece for piece, _, _ in replies]), fattr

    def _with_zeros(self, start, end, parts, pieces):
        """The bytes of [start, end): ``pieces`` at ``parts``, zeros between.

        None unless every part came back whole; the zeros are counted.
        """
        if len(pieces) != len(parts):
            return None
        data = bytearray(end - start)
        for (s, e), piece in zip(parts, pieces):
            if len(piece) != e - s:
                return None
            data[s - start:e - start] = piece
        self.counters.cache_bytes_zero_map += (end - start) - sum(
            e - s for s, e in parts)
        return data

    async def _fill(self, call, state, first, count, futures, reader,
                    speculative):
        bs = self.block_size
        fh = state.fh
        # What the file's attributes were reported as when the fetch
        # began: a reply older than a later report does not overrule it.
        reports = state.reports
        with self._settling(state, futures):
            start = first * bs
            end = min((first + count) * bs, state.fattr.size)
            zeros = zeros_of(state)
            data = None
            if reader is not None:
                data, fattr, eof = await reader(call, state, start, end)
            elif zeros is not None and end > start:
                data, fattr = await self._fetch_nonzero(call, state, zeros,
                                                        start, end)
                eof = True if data is None else end >= fattr.size
            if data is None:
                data, fattr, eof = await self._read_range(
                    call, fh, start, (first + count) * bs)
            self._keep(state, reports, first, count, data, fattr, eof,
                       futures, speculative)

    def fetch_runs(self, call, state, runs, speculative=False):
        """Start fetching the ``(first, count)`` runs in one upstream call.

        A READV of the bulk channel where the next hop serves it (the
        blocks of a boot are scattered: one call brings many), else one
        fetch per run.  Returns the futures, as :meth:`fetch` does.
        """
        loop = asyncio.get_running_loop()
        futures = {}
        for first, count in runs:
            for block in range(first, first + count):
                futures[block] = self._inflight[(state.digest, block)] = \
                    loop.create_future()
        loop.create_task(self._fill_runs(call, state, list(runs), futures,
                                         speculative))
        return futures

    def _parts(self, state, first, count):
        """What a fetch of the run reads: ``(start, end, parts)``.

        ``parts`` are the byte extents to ask for: the run's non-zero
        parts where the file's zero map holds (none of the zeros cross
        the link), else the whole run.
        """
        bs = self.block_size
        start = first * bs
        end = min((first + count) * bs, state.fattr.size)
        zeros = zeros_of(state)
        if zeros is None or end <= start:
            return start, None, [(start, (first + count) * bs)]
        return start, end, zeros.nonzero(start, end)

    async def _fill_runs(self, call, state, runs, futures, speculative):
        reports = state.reports
        with self._settling(state, futures):
            if self.clock() < self._readv_unavailable_until:
                await self._fill_each(call, state, runs, futures,
                                      speculative)
                return
            while runs:
                group, plans, extents = [], [], []
                for run in runs:
                    plan = self._parts(state, *run)
                    if group and len(extents) + len(plan[2]) > \
                            bulk.MAX_EXTENTS:
                        break
                    group.append(run)
                    plans.append(plan)
                    extents.extend(plan[2])
                if len(extents) > bulk.MAX_EXTENTS or not extents:
                    # Too many zero holes for one call, or all zeros:
                    # that run on its own, as a READ would fetch it.
                    await self._fill_each(call, state, group[:1], futures,
                                          speculative)
                    runs = runs[1:]
                    continue
                try:
                    fattr, pieces = await readv.read_extents(
                        self.upstream, call, state.fh,
                        [(s, e - s) for s, e in extents])
                except readv.ReadvUnavailable as e:
                    LOG.info("fetching block by block: %s", e)
                    self._readv_unavailable_until = \
                        self.clock() + readv.UNAVAILABLE_RETRY
                    await self._fill_each(call, state, runs, futures,
                                          speculative)
                    return
                except readv.ReadvFailed as e:
                    raise FetchError(str(e)) from e
                rest = self._keep_runs(state, reports, group, plans, fattr,
                                       pieces, futures, speculative)
                if rest == group:
                    if len(pieces) == len(extents):
                        raise FetchError("a READV upstream brought no block")
                    # Cut short within the first run's parts (the next
                    # hop bounds what one READV costs it): that run on
                    # its own, as a READ would fetch it.
                    await self._fill_each(call, state, group[:1], futures,
                                          speculative)
                    rest = rest[1:]
                runs = rest + runs[len(group):]

    def _keep_runs(self, state, reports, group, plans, fattr, pieces,
                   futures, speculative):
        """Keep what a READV brought of ``group``'s runs; the runs left.

        A run is kept whole or not at all where the zero map made its
        extents (its parts must all come back whole, under the
        attributes the map is for); otherwise its blocks as far as they
        came, short only at the end of the file.
        """
        bs = self.block_size
        rest, at = [], 0
        for (first, count), (start, end, parts) in zip(group, plans):
            got_parts = pieces[at:at + len(parts)]
            at += len(parts)
            fetched = sum(len(piece) for piece in got_parts)
            self.counters.cache_bytes_fetched += fetched
            self.count(state.fh, "bytes_fetched", fetched)
            if end is not None:
                data = None if fattr is None or \
                    version_key(fattr) != state.zeros_for else \
                    self._with_zeros(start, end, parts, got_parts)
                if data is None:
                    rest.append((first, count))
                    continue
                got, eof = count, end >= fattr.size
            else:
                if not got_parts:
                    rest.append((first, count))
                    continue
                data = got_parts[0]
                eof = fattr is not None and start + len(data) >= fattr.size
                got = count if eof else len(data) // bs
            if got:
                self._keep(state, reports, first, got, data[:got * bs],
                           fattr, eof, {b: futures[b] for b in range(
                               first, first + got)}, speculative)
            if got < count:
                rest.append((first + got, count - got))
        return rest

    async def _fill_each(self, call, state, runs, futures, speculative):
        """Each run in its own READ: a next hop without READV."""
        await asyncio.gather(*(
            self._fill(call, state, first, count,
                       {b: futures[b] for b in range(first, first + count)},
                       None, speculative)
            for first, count in runs))

    def _keep(self, state, reports, first, count, data, fattr, eof, futures,
              speculative):
        """Store a fetch's blocks and hand them to their waiters.

        ``reports``: the file's reports when the fetch began.
        """
        bs = self.block_size
        data = memoryview(data)
        fresh = self.files.observe(state.fh, fattr, reports) or state
        attrs = attrs_of(fattr) if fattr is not None else \
            fresh.current[-1]
        keep = attrs in fresh.current
        for i, block in enumerate(range(first, first + count)):
            chunk = data[i * bs:(i + 1) * bs]
            if chunk and (len(chunk) == bs or eof) and keep and \
                    (fresh.digest, block) not in self._overtaken:
                self.store.put(fresh.digest, block, chunk, attrs,
                               speculative and (state.digest, block)
                               not in self._claimed)
            if not futures[block].done():
                futures[block].set_result((chunk, attrs))

    @contextlib.contextmanager
    def _settling(self, state, futures):
        """Around a fetch: failed, its waiters get why; over, it is over.

        Its blocks are no longer on their way after it, either way.
        """
        try:
            yield
        except BaseException as e:
            _fail(futures, e)
            if not isinstance(e, Exception):
                raise
        finally:
            self._settled(state, futures)

    def _settled(self, state, futures):
        """A fetch is over: its blocks are no longer on their way."""
        for block in futures:
            self._inflight.pop((state.digest, block), None)
            self._overtaken.discard((state.digest, block))
            self._claimed.discard((state.digest, block))
        for future in futures.values():
            if future.done() and not future.cancelled():
                future.exception()  # Retrieved: the reader may be gone.

    def is_version(self, state, key):
        """Whether the file of ``state`` is still version ``key``.

        For work that runs on behind its reader (a prefetch, a stream):
        it stops when the file changes or is forgotten.
        """
        now = self.files.get(state.fh)
        return now is not None and version_key(now.fattr) == key

    # --- the bytes of spans ------------------------------------------------

    async def blocks(self, call, state, start, end):
        """The bytes of [start, end) as views, None if a fetch failed."""
        found = await self.spans(call, state, [(start, end)])
        return None if found is None else found[0]

    async def spans(self, call, state, spans):
        """The bytes of each ``(start, end)`` as views, None if a fetch
        failed.

        Misses of all the spans go upstream together: one READ for one
        run of them, one READV (:meth:`fetch_runs`) for several.
        """
        bs = self.block_size
        size = state.fattr.size
        pieces = {}
        waiting = {}
        missing = []
        zeros = zeros_of(state)
        zero_blocks = zero_bytes = 0
        for block in sorted({block for start, end in spans if end > start
                             for block in range(start // bs,
                                                (end - 1) // bs + 1)}):
            expected = min(bs, size - block * bs)
            if zeros is not None and zeros.covers(block * bs,
                                                  block * bs + expected):
                pieces[block] = self._zero_block[:expected]
                zero_blocks += 1
                zero_bytes += expected
                continue
            data = cached_block(self.store, state, block, expected)
            if data is not None:
                pieces[block] = data
                self.counters.cache_hits += 1
            elif (state.digest, block) in self._inflight:
                waiting[block] = self._inflight[(state.digest, block)]
                self._claimed.add((state.digest, block))
                self.counters.cache_collapsed += 1
            else:
                missing.append(block)
                self.counters.cache_misses += 1
        runs = list(self.runs(missing))
        if len(runs) == 1:
            waiting.update(self.fetch(call, state, *runs[0]))
        elif runs:
            waiting.update(self.fetch_runs(call, state, runs))
        try:
            for block, future in waiting.items():
                chunk, _ = await asyncio.shield(future)
                pieces[block] = chunk
        except FetchError:
            return None
        found = []
        for start, end in spans:
            if end <= start:
                found.append([])
                continue
            first, last = start // bs, (end - 1) // bs
            views = [memoryview(pieces[b]) for b in range(first, last + 1)]
            views[-1] = views[-1][:end - last * bs]
            views[0] = views[0][start - first * bs:]
            if sum(len(view) for view in views) != end - start:
                # The server had fewer bytes than the file's attributes
                # said (it shrank meanwhile): a reply must not promise
                # more bytes than it carries.  Forwarded, the server
                # answers.
                return None
            found.append(views)
        local = sum(len(pieces[b]) for b in pieces
                    if b not in waiting) - zero_bytes
        self.counters.cache_bytes_local += local
        self.counters.cache_bytes_zero_map += zero_bytes
        self.count(state.fh, "bytes_local", local)
        self.count(state.fh, "bytes_zero_map", zero_bytes)
        self.count(state.fh, "hits", len(pieces) - len(waiting) -
                   zero_blocks)
        self.count(state.fh, "misses", len(waiting))
        return found

    def count(self, fh, key, amount):
        """Per-export counters (``?`` for handles of unknown export)."""
        self.counters.export(self.policies.export_of(fh) or "?")[key] += \
            amount

    def cached(self, state, block, expected_len):
        """The block's bytes if the cache holds them, else None."""
        return cached_block(self.store, state, block, expected_len)

    def present(self, state, block, expected_len):
        """Whether the block needs no fetch.

        It is cached (by its tag), or all zeros by the zero map.
        """
        zeros = zeros_of(state)
        bs = self.block_size
        if zeros is not None and zeros.covers(block * bs,
                                              block * bs + expected_len):
            return True
        found = self.store.peek(state.digest, block)
        return found is not None and found[0] == expected_len and \
            found[1] in state.current

    def wanted(self, state, block):
        """Whether ``block`` needs a fetch: not cached, zero or on its way."""
        return (state.digest, block) not in self._inflight and \
            not self.present(state, block, min(
                self.block_size, state.fattr.size - block * self.block_size))

    def room_for(self, state, block):
        """Whether a speculative fetch of ``block`` would be kept."""
        return self.store.has_room(state.digest, block)

    # --- planning ----------------------------------------------------------

    def runs(self, blocks):
        """Contiguous runs of ``blocks``, each one upstream READ."""
        return profile_plan.runs(blocks, self.max_fetch_blocks)

    def run_bytes(self, state, first, count):
        """Bytes of ``count`` blocks from ``first``, to the file's end."""
        bs = self.block_size
        return min(count * bs, state.fattr.size - first * bs)

    def batches(self, state, runs):
        """``runs`` in groups that one upstream call each fetches.

        ``(runs, bytes)`` pairs in order, each closed once it holds one
        fetch's bytes (``max_fetch``) or :data:`bulk.MAX_EXTENTS` runs
        (:func:`profile_plan.batches`): :meth:`fetch_wanted` brings each
        in one READV, where a READ per run would cost every hop a call
        for nearly every block of a boot set.  ``runs`` is read lazily,
        a group at a time.
        """
        return profile_plan.batches(
            runs, lambda run: self.run_bytes(state, *run),
            self.max_fetch_blocks * self.block_size)

    def fetch_wanted(self, call, state, batch):
        """Fetch what the runs of ``batch`` still want, in one call.

        ``(futures, bytes, blocks)`` of that fetch, ``futures`` None if a
        reader's misses fetched every block while the caller waited.
        """
        runs = [run for first, count in batch
                for run in self.wanted_runs(state, first, count)]
        if not runs:
            return None, 0, 0
        return (self.fetch_runs(call, state, runs),
                sum(self.run_bytes(state, *run) for run in runs),
                sum(count for _, count in runs))

    def wanted_runs(self, state, first, count):
        """Runs of ``[first, first + count)`` that still need a fetch.

        For work that waited between choosing its blocks and fetching
        them (a prefetch or a stream waiting for room in its window): a
        reader's miss may have fetched some of them meanwhile, and
        fetching those again would bring them across the link twice.
        """
        return list(self.runs([b for b in range(first, first + count)
                               if self.wanted(state, b)]))


def _fail(futures, error):
    """Fail the futures not yet answered with ``error``."""
    for future in futures.values():
        if not future.done():
            future.set_exception(error if isinstance(error, Exception)
                                 else FetchError("fetch stopped"))
