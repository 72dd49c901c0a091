# SPDX-License-Identifier: Apache-2.0
"""Whole-file transfers: a file marked ``whole_file`` comes in one go.

When a file's sidecar asks for it, the first READ starts a transfer of
the whole file over the bulk channel (compressed chunks, ``window`` of
them in flight) into the block cache; READs then wait only for the chunk
that holds their range, or, if the transfer has not got that far, are
served block by block as usual.  Concurrent readers share the one
transfer.  Chunks are independent calls, so a tunnel reset costs only
those in flight (the upstream pool sends them again); a transfer that
fails is started again by a later READ, skipping chunks already cached.

As the chunks arrive, in file order, their non-zero bytes are hashed; at
the end the digest must equal the sidecar's, or the file's blocks are
dropped from the cache and the file is read block by block from then on.
"""

import asyncio
import functools
import hashlib
import time

from oslo_log import log as logging
import zstandard

from gvfs_openstack.client import zstd_chunks
from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs.bulk import BulkProc
from gvfs_openstack.nfs.bulk import Codec
from gvfs_openstack.nfs import const
from gvfs_openstack.proxy.cache.freshness import attrs_of
from gvfs_openstack.proxy.cache.freshness import cached_block
from gvfs_openstack.proxy.upstream_calls import CallRefused
from gvfs_openstack.proxy.upstream_calls import ReplyError

LOG = logging.getLogger(__name__)

#: Seconds before a failed transfer of a file is tried again.
RETRY_AFTER = 10.0
#: Seconds before asking again a next hop that does not serve the bulk
#: channel (a server proxy of an older release, or an NFS server).
UNAVAILABLE_RETRY = 600.0


class TransferError(Exception):
    """The bulk channel could not deliver a chunk."""


class BulkUnavailable(TransferError):
    """The next hop does not serve the bulk channel at all."""


def _hash_nonzero(digest, zeros, start, data):
    view = memoryview(data)
    for part_start, part_end in zeros.nonzero(start, start + len(data)):
        digest.update(view[part_start - start:part_end - start])


class _Transfer:
    def __init__(self, key, chunks):
        self.key = key
        loop = asyncio.get_running_loop()
        self.chunks = [loop.create_future() for _ in range(chunks)]
        #: Chunks before this one have been started.
        self.started = 0
        self.task = None


class WholeFiles:
    """Whole-file transfers into ``store`` over the bulk channel.

    ``files`` is the cache's :class:`freshness.FileStates`, ``upstream``
    the :class:`UpstreamCalls` the chunks come through.
    """

    def __init__(self, store, files, upstream, counters,
                 chunk_size=4 * 1024 * 1024, window=8, clock=time.monotonic):
        self.store = store
        self.files = files
        self.upstream = upstream
        #: :class:`counters.WholeFileCounters`
        self.counters = counters
        self.block_size = bs = store.geometry.block_size
        self.chunk_size = max(bs, chunk_size - chunk_size % bs)
        self.window = window
        self.clock = clock
        self._transfers = {}
        #: Until when the next hop is known not to serve the bulk channel.
        self._unavailable_until = None
        #: fh -> (file key, until when) of files not to transfer.
        self._refused = {}

    def _usable(self, state, key):
        refused = self._refused.get(state.fh)
        if refused is None or refused[0] != key:
            return True
        return refused[1] is not None and self.clock() >= refused[1]

    async def wait_for(self, call, state, start, end):
        """Wait until the transfer has cached [start, end), if it has or
        is about to.

        Returns whether the file is handled by a whole-file transfer (so
        block read-ahead would only compete with it).
        """
        sidecar = state.sidecar
        key = state.zeros_for
        if sidecar is None or sidecar.action != "whole_file" or \
                key is None or not self._usable(state, key):
            return False
        if self._unavailable_until is not None:
            if self.clock() < self._unavailable_until:
                return False
            self._unavailable_until = None
        transfer = self._transfers.get(state.fh)
        if transfer is None or transfer.key != key:
            transfer = self._start(call, state, sidecar, key)
        first = start // self.chunk_size
        last = (max(end, start + 1) - 1) // self.chunk_size
        for index in range(first, min(last + 1, len(transfer.chunks))):
            if index >= transfer.started + 2 * self.window:
                return True  # Too far ahead: block reads serve it sooner.
            try:
                await asyncio.shield(transfer.chunks[index])
            except Exception:
                return False  # The transfer failed: block reads instead.
        return True

    def _start(self, call, state, sidecar, key):
        chunks = -(-state.fattr.size // self.chunk_size)
        transfer = self._transfers[state.fh] = _Transfer(key, chunks)
        transfer.task = asyncio.ensure_future(
            self._run(call, state, sidecar, transfer))
        self.counters.wholefile_transfers += 1
        return transfer

    async def _run(self, call, state, sidecar, transfer):
        loop = asyncio.get_running_loop()
        window = asyncio.Semaphore(self.window)
        # Chunks fetched but not hashed yet are held in memory: a bound.
        backlog = asyncio.Semaphore(4 * self.window)
        raws = [loop.create_future() for _ in transfer.chunks]
        #: Chunks in flight (a done task holds its bytes: not kept).
        tasks = set()
        verifier = asyncio.ensure_future(self._verify(sidecar, raws, backlog))
        try:
            for index in range(len(transfer.chunks)):
                await backlog.acquire()
                await window.acquire()
                if verifier.done():
                    break  # A chunk failed: the verifier says which.
                transfer.started = index + 1
                task = asyncio.ensure_future(
                    self._chunk(call, state, sidecar, index))
                task.add_done_callback(functools.partial(
                    self._chunk_done, transfer, raws, index, window))
                task.add_done_callback(tasks.discard)
                tasks.add(task)
            matches = await verifier
        except Exception as e:
            for task in list(tasks):
                task.cancel()
            verifier.cancel()
            for raw in raws:
                if raw is not None and not raw.done():
                    raw.cancel()
            self._fail(state, transfer, e, retry=True)
            return
        if not matches:
            self.counters.wholefile_digest_mismatches += 1
            LOG.warning("a whole-file transfer does not match its sidecar's "
                        "digest: the copy is dropped, the file is read block "
                        "by block")
            self._drop_blocks(state)
            self._fail(state, transfer, None, retry=False)
            return
        self.counters.wholefile_verified += 1

    @staticmethod
    def _chunk_done(transfer, raws, index, window, task):
        window.release()
        if task.cancelled():
            return
        if task.exception() is not None:
            if not raws[index].done():
                raws[index].set_exception(task.exception())
            return
        raws[index].set_result(task.result())
        # The chunk is in the cache: its readers need not wait for the
        # digest, which is checked at the end.
        if not transfer.chunks[index].done():
            transfer.chunks[index].set_result(None)

    async def _verify(self, sidecar, raws, backlog):
        """Hash the chunks in file order, in a worker thread (hashlib
        releases the GIL), while the transfer goes on."""
        digest = hashlib.sha256()
        loop = asyncio.get_running_loop()
        for index, raw in enumerate(raws):
            data = await raw
            start = index * self.chunk_size
            await loop.run_in_executor(None, _hash_nonzero, digest,
                                       sidecar.zeros, start, data)
            raws[index] = None  # Hashed: let the bytes go.
            backlog.release()
        return digest.hexdigest() == sidecar.digest

    def _fail(self, state, transfer, error, retry):
        if isinstance(error, BulkUnavailable):
            if self._unavailable_until is None:
                LOG.warning("the next hop does not serve the bulk channel "
                            "(%s): files marked whole_file are read block "
                            "by block; asking again in %ds", error,
                            UNAVAILABLE_RETRY)
            self.counters.wholefile_unavailable += 1
            self._unavailable_until = self.clock() + UNAVAILABLE_RETRY
            error, retry = None, True
        if error is not None:
            self.counters.wholefile_failures += 1
            LOG.warning("whole-file transfer stopped (%s); reading block by "
                        "block, and trying again in %ds", error, RETRY_AFTER)
        self._refused[state.fh] = (transfer.key, self.clock() + RETRY_AFTER
                                   if retry else None)
        self._transfers.pop(state.fh, None)
        for future in transfer.chunks:
            if not future.done():
                future.set_exception(TransferError("transfer stopped"))
                future.exception()  # Nobody may be waiting.

    def _drop_blocks(self, state):
        bs = self.block_size
        for block in range(-(-state.fattr.size // bs)):
            self.store.discard(state.digest, block)

    async def _chunk(self, call, state, sidecar, index):
        """The chunk's bytes, from the cache or the bulk channel."""
        bs = self.block_size
        size = state.fattr.size
        start = index * self.chunk_size
        end = min(start + self.chunk_size, size)
        if sidecar.zeros.covers(start, end):
            return bytes(end - start)
        cached = self._from_cache(state, start, end)
        if cached is not None:
            return cached
        reports = state.reports
        res, raw = await read_chunk(self.upstream, call, state.fh, start,
                                    end - start)
        if len(raw) != end - start:
            raise TransferError("chunk at %d has %d bytes, not %d" % (
                start, len(raw), end - start))
        self.counters.wholefile_chunks += 1
        self.counters.wholefile_raw_bytes += len(raw)
        self.counters.wholefile_wire_bytes += len(res.data)
        fresh = self.files.observe(state.fh, res.file_attributes,
                                   reports) or state
        if fresh.fattr.size != size:
            raise TransferError("the file changed during the transfer")
        attrs = fresh.current[-1]
        if res.file_attributes is not None and \
                attrs_of(res.file_attributes) not in fresh.current:
            # Read before a change that is already known here.
            raise TransferError("the file changed during the transfer")
        view = memoryview(raw)
        for block in range(start // bs, -(-end // bs)):
            self.store.put(fresh.digest, block,
                           view[block * bs - start:
                                min(end, (block + 1) * bs) - start],
                           attrs)
        return raw

    def _from_cache(self, state, start, end):
        bs = self.block_size
        pieces = []
        for block in range(start // bs, -(-end // bs)):
            data = cached_block(self.store, state, block,
                                min(bs, end - block * bs))
            if data is None:
                return None
            pieces.append(data)
        return b"".join(pieces)


async def read_chunk(upstream, call, fh, offset, count):
    """``(reply body, raw bytes)`` of one bulk READ, decompressed.

    Raises :class:`BulkUnavailable` if the next hop does not serve the
    bulk channel, :class:`TransferError` for any other failure.
    """
    try:
        res = await upstream.bulk(BulkProc.READ, bulk.ReadArgs(
            fh, offset, count, Codec.ZSTD), call.cred, call.verf)
    except CallRefused as e:
        if e.program_unavailable:
            raise BulkUnavailable(const.AcceptStat(
                e.reply.accept_stat).name) from e
        raise TransferError("the next hop refused a bulk READ") from e
    except ReplyError as e:
        raise TransferError(str(e)) from e
    if not res.ok:
        raise TransferError(const.status_name(res.status))
    body = res.body
    try:
        raw = await zstd_chunks.reply_bytes(body)
    except zstandard.ZstdError as e:
        raise TransferError("chunk at %d does not decompress: %s"
                            % (offset, e)) from e
    return body, raw
