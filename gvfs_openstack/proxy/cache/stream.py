# SPDX-License-Identifier: Apache-2.0
"""The image stream: the rest of a golden image, paced, in the background.

A boot profile covers what earlier boots read.  The very first boot of
an image has none, and a later boot may read a block no boot read
before; each such block is a round trip across the WAN, one at a time.
The stream removes them: after the profile's prefetch (or at the first
READ of an image that has no profile), one task per image and proxy
fetches every non-zero block the cache lacks, in file order, as
zstd-compressed bulk READs of ``chunk_size`` bytes (a golden image's
file system compresses to about a third).  Later boots on the host then
read nothing across the link.

It must never slow the reader it works for.  On the host's two cores a
stream costs CPU (decompression, the cache's writes, and the DTN's
compression) that a TCG guest booting beside it would rather have; it is
worth that only while it saves the guest round trips across the WAN.
So it waits until the file's readers have been quiet for
``quiet_seconds`` (the profiles' ``profile_quiet_seconds``, long enough
to span the pause between Nova's clone and the guest's first read; at
most ``max_wait`` seconds) before it goes on, when

* the image has a boot profile: the prefetch already fetched what this
  boot reads, the stream is for later boots and stray blocks;
* its first chunk came back within :data:`NEAR_SECONDS`: the next hop is
  a LAN proxy that holds the image, and a miss costs little.

Only the first boot of an image across a WAN streams at once, beside its
guest.  Then:

* it keeps at most ``window`` bytes *on the wire* in flight (counted
  from the compression seen so far), about 1.5 times the link's
  bandwidth-delay product, so that it runs at the link's rate while the
  link's queue stays short: a guest's own miss, sent at once beside the
  stream, waits behind at most the window's excess over the product;
* a guest that wants a block the stream is fetching joins that fetch
  (collapsed forwarding in :class:`fetch.Fetcher`) instead of
  asking again;
* it stops at its share of the cache (what the profile's prefetch took
  counts against it), when the file changes or is deleted, when a fetch
  fails, and when the proxy stops.

A next hop that does not serve the bulk channel (an NFS server, a proxy
of an older release) gets plain READs instead, uncompressed.  A LAN
proxy answers the bulk READs it can from its own cache (see
:meth:`reads.CachedReads.bulk_read`), so a host behind it streams from
the LAN.
"""

import asyncio
import collections
import time

from oslo_log import log as logging

from gvfs_openstack.proxy.cache import bulk_fetch
from gvfs_openstack.proxy.cache.fetch import FetchError
from gvfs_openstack.proxy.cache.freshness import zeros_of
from gvfs_openstack.proxy.cache.window import FetchWindow

LOG = logging.getLogger(__name__)

#: The wire-to-raw ratio assumed of a chunk before any has arrived, and
#: the least one assumed after (so that a window of zeros stays bounded).
FIRST_RATIO = 1.0
MIN_RATIO = 1.0 / 16
#: A first chunk back within this many seconds came from near by.
NEAR_SECONDS = 0.01
#: Files whose last READ is remembered.
MAX_FILES = 4096


class _StreamStopped(Exception):
    """The stream ends early; the message says why (logged)."""


class ImageStreams:
    """Streams whole images into the cache through ``fetcher``.

    ``fetcher`` is the cache's :class:`fetch.Fetcher`, ``upstream`` the
    :class:`UpstreamCalls` of the bulk READs, ``counters`` a
    :class:`counters.StreamCounters`.
    """

    def __init__(self, fetcher, upstream, counters, chunk_size=1024 * 1024,
                 window=2 * 1024 * 1024, max_bytes=None, max_wait=600.0,
                 quiet_seconds=30.0, clock=time.monotonic):
        self.fetcher = fetcher
        self.upstream = upstream
        self.counters = counters
        bs = fetcher.block_size
        self.chunk_blocks = max(1, min(chunk_size // bs,
                                       fetcher.max_fetch_blocks))
        self.window = max(window, bs)
        self.max_bytes = max_bytes
        self.max_wait = max_wait
        self.quiet_seconds = quiet_seconds
        self.clock = clock
        #: Until when the next hop is known not to serve the bulk channel.
        self._plain_until = 0.0
        #: fh -> when a reader last read it.
        self._read_at = collections.OrderedDict()

    def note_read(self, fh):
        """A reader read the file ``fh`` (every READ, hit or miss)."""
        self._read_at.pop(fh, None)
        self._read_at[fh] = self.clock()
        if len(self._read_at) > MAX_FILES:
            self._read_at.popitem(last=False)

    async def until_quiet(self, fh, since):
        """Until ``fh`` has not been read for ``quiet_seconds``, or
        ``max_wait`` seconds after ``since``."""
        while True:
            now = self.clock()
            idle = now - self._read_at.get(fh, since)
            left = since + self.max_wait - now
            if idle >= self.quiet_seconds or left <= 0:
                return
            self.counters.stream_waits += 1
            await asyncio.sleep(min(self.quiet_seconds - idle, left))

    async def run(self, call, state, key, spent=0, profiled=False):
        """Stream the file of ``state`` (version ``key``) into the cache.

        ``spent`` bytes of its share of the cache went to its profile;
        ``profiled`` says it had one (the stream then waits for quiet).
        Returns the blocks it fetched.  Only files with a zero map (a
        metadata sidecar: golden images) are streamed, and not those
        whose sidecar says ``whole_file`` (:mod:`bulk_fetch` has them).
        """
        if zeros_of(state) is None or \
                state.sidecar.action == "whole_file":
            return 0    # Not a golden image, or one that comes whole.
        self.counters.streams += 1
        started = self.clock()
        if profiled:
            await self.until_quiet(state.fh, started)
        budget = None if self.max_bytes is None else self.max_bytes - spent
        plain = self.clock() < self._plain_until
        fetched = 0
        try:
            while True:
                try:
                    fetched += await self._stream(call, state, key, budget,
                                                  plain, started, profiled)
                    break
                except _BulkUnavailable as e:
                    if plain:
                        raise _StreamStopped(str(e)) from e
                    LOG.info("image stream: %s; plain READs instead", e)
                    self._plain_until = self.clock() + \
                        bulk_fetch.UNAVAILABLE_RETRY
                    self.counters.streams_plain += 1
                    plain = True
        except _StreamStopped as e:
            self.counters.streams_stopped += 1
            LOG.info("image stream stopped after %d blocks: %s", fetched, e)
            return fetched
        self.counters.streams_done += 1
        LOG.info("image stream: %d blocks fetched in %.2f s", fetched,
                 self.clock() - started)
        return fetched

    def _runs(self, state):
        """Runs of blocks the cache still needs and has room for.

        In file order.  A block whose cache set holds no free frame is
        left to its reader: the stream pushes nothing out.
        """
        fetcher = self.fetcher
        blocks = -(-state.fattr.size // fetcher.block_size)
        for first in range(0, blocks, self.chunk_blocks):
            wanted = []
            for block in range(first, min(first + self.chunk_blocks,
                                          blocks)):
                if not fetcher.wanted(state, block):
                    continue
                if fetcher.room_for(state, block):
                    wanted.append(block)
                else:
                    self.counters.stream_blocks_no_room += 1
            yield from fetcher.runs(wanted)

    async def _stream(self, call, state, key, budget, plain, started,
                      waited):
        fetcher = self.fetcher
        progress = _Progress()
        reader = None if plain else progress.reader(self, state)
        window = FetchWindow(self.window)
        fetched = 0
        try:
            for first, count in self._runs(state):
                if not fetcher.is_version(state, key):
                    raise _StreamStopped("the file changed")
                run_bytes = fetcher.run_bytes(state, first, count)
                if budget is not None:
                    if budget < run_bytes:
                        raise _StreamStopped("its share of the cache is "
                                             "full")
                    budget -= run_bytes
                wire = run_bytes * progress.ratio
                await self._room(window, wire, progress)
                sent = self.clock()
                for run_first, run_count in fetcher.wanted_runs(
                        state, first, count):
                    window.add(fetcher.fetch(call, state, run_first,
                                             run_count, reader,
                                             speculative=True),
                               wire * run_count / count)
                    self.counters.stream_blocks += run_count
                    fetched += run_count
                if not waited:
                    # The first chunk alone: how far away is its source?
                    waited = True
                    await self._room(window, None, progress)
                    if self.clock() - sent < NEAR_SECONDS:
                        self.counters.streams_near += 1
                        await self.until_quiet(state.fh, started)
            await self._room(window, None, progress)
        finally:
            window.cancel()
        return fetched

    async def _room(self, window, wire, progress):
        """Room for ``wire`` more bytes (None: all of it arrived)."""
        try:
            if wire is None:
                await window.drain()
            else:
                await window.make_room(wire)
        except FetchError as e:
            if progress.unavailable is not None:
                raise _BulkUnavailable(progress.unavailable) from e
            raise _StreamStopped(str(e)) from e


class _BulkUnavailable(Exception):
    """The next hop does not serve the bulk channel."""


class _Progress:
    """What one stream's bulk READs brought: raw and wire bytes."""

    def __init__(self):
        self.raw = 0
        self.wire = 0
        #: Why the bulk channel is not served, once a READ found out.
        self.unavailable = None

    @property
    def ratio(self):
        if not self.raw:
            return FIRST_RATIO
        return max(MIN_RATIO, self.wire / self.raw)

    def reader(self, streams, state):
        """A ``reader`` for :meth:`Fetcher.fetch`: one bulk READ."""
        counters = streams.counters

        async def bulk_read(call, state, start, end):
            try:
                body, raw = await bulk_fetch.read_chunk(
                    streams.upstream, call, state.fh, start, end - start)
            except bulk_fetch.BulkUnavailable as e:
                self.unavailable = "the next hop does not serve the bulk " \
                    "channel (%s)" % e
                raise FetchError(self.unavailable) from e
            except bulk_fetch.TransferError as e:
                raise FetchError(str(e)) from e
            self.raw += len(raw)
            self.wire += len(body.data)
            counters.stream_raw_bytes += len(raw)
            counters.stream_wire_bytes += len(body.data)
            return raw, body.file_attributes, body.eof

        return bulk_read
