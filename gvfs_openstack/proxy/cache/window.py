# SPDX-License-Identifier: Apache-2.0
"""A window of cache fetches in flight, for those who fetch ahead.

Across a WAN one READ at a time uses a fraction of the link (a 64 KiB
READ on a 50 ms, 200 Mbit/s link: 5% of its bandwidth-delay product).
A prefetch or a warm keeps ``size`` bytes of fetches in flight instead,
and waits for one to arrive before it sends more.

More than the path's bandwidth-delay product in flight fills a queue
instead of the link: on a LAN port that many hosts share (a boot storm
behind a LAN proxy), each host's 4 MiB window queues 32 MiB at a 1 Gbit/s
port shared by eight, and a guest's read of a block not yet there waits
a quarter of a second behind the others' prefetches.  A window that
``fits`` keeps at most 1.5 times what it measures -- the best delivery
rate of its recent fetches times the quickest round trip one took (the
path's bandwidth-delay product, as BBR estimates it) -- and never more
than ``size``.  It starts with one fetch in flight and, like BBR's
startup, keeps twice the estimate while the rate still grows, so that
each round trip may double it (the window, not the path, limited the
rate it measured); once three round trips brought no quarter more, 1.5
times.  Across a WAN that is about ``size``; on a LAN port shared with
many, about one fetch at a time.
"""

import asyncio
import collections
import time

#: In flight, against the measured bandwidth-delay product, once the
#: rate stopped growing.
HEADROOM = 1.5
#: ... and while it grows (BBR's startup): each round trip may double it.
STARTUP_GAIN = 2.0
#: The rate grows while a round trip brings a quarter more than the best
#: before; after this many round trips that do not, the path is full.
FLAT_ROUNDS = 3
#: Delivery rates kept for the best of them (BBR's max filter).
RATE_SAMPLES = 10


class PathEstimate:
    """The bytes to keep in flight on a path, from what its fetches show.

    Sans-IO, so that the storm model (``tools/bench/storm_model.py``)
    runs the same rule as the proxies: :meth:`sent` when a fetch goes
    out (its token), :meth:`arrived` with the token when it is back.
    """

    def __init__(self, size):
        self.size = size
        #: The quickest round trip of a fetch seen, seconds.
        self._quickest = None
        #: Bytes arrived in all, and recent delivery rates (bytes/s).
        self._delivered = 0
        self._rates = collections.deque(maxlen=RATE_SAMPLES)
        #: Round trips: one ends when a fetch sent after it began is
        #: back, that is when ``_delivered`` passes this.
        self._round_ends_at = 0
        #: The best rate when it last grew, and round trips since.
        self._grew_to = 0.0
        self._flat = 0

    @property
    def limit(self):
        """Bytes to keep in flight now; 0 before anything came back."""
        if not self._rates:
            return 0       # One fetch, to measure the path with.
        gain = STARTUP_GAIN if self._flat < FLAT_ROUNDS else HEADROOM
        return min(self.size, gain * max(self._rates) * self._quickest)

    def sent(self, now):
        """A fetch goes out at ``now``; the token to give :meth:`arrived`."""
        return now, self._delivered

    def arrived(self, token, nbytes, now):
        """The fetch of ``token`` brought ``nbytes`` at ``now``.

        Its rate is every byte that arrived while it was out, its own
        included, over its round trip.
        """
        sent, before = token
        self._delivered += nbytes
        took = now - sent
        if took <= 0:
            return
        if self._quickest is None or took < self._quickest:
            self._quickest = took
        self._rates.append((self._delivered - before) / took)
        if before >= self._round_ends_at:
            self._round_ends_at = self._delivered
            best = max(self._rates)
            if best >= 1.25 * self._grew_to:
                self._grew_to, self._flat = best, 0
            else:
                self._flat += 1


class FetchWindow:
    """Fetches started by :meth:`Fetcher.fetch`, ``size`` bytes at most.

    Each fetch's futures are awaited through a shield: they are shared
    with readers waiting for the same blocks, and a window that is
    cancelled must not cancel their fetches.  With ``fits``, fewer bytes
    than ``size`` when the path's measured bandwidth-delay product is
    smaller (:class:`PathEstimate`, the module's docstring).
    """

    def __init__(self, size, fits=False, clock=time.monotonic):
        self.size = size
        self.clock = clock
        #: The :class:`PathEstimate`, with ``fits``.
        self.path = PathEstimate(size) if fits else None
        #: task -> bytes it waits for
        self._runs = {}
        #: Bytes that arrived so far.
        self.arrived = 0

    def __len__(self):
        return len(self._runs)

    @property
    def in_flight(self):
        return sum(self._runs.values())

    @property
    def limit(self):
        """Bytes it keeps in flight now."""
        return self.size if self.path is None else self.path.limit

    async def make_room(self, nbytes):
        """Wait until ``nbytes`` more fit (or nothing is in flight).

        Raises what a fetch that arrived failed with
        (:class:`fetch.FetchError`).
        """
        while self._runs and self.in_flight + nbytes > self.limit:
            await self._one()

    def add(self, futures, nbytes):
        """Count a fetch's ``futures`` (block -> future) in the window."""
        task = asyncio.ensure_future(_arrived(futures.values()))
        self._runs[task] = nbytes
        if self.path is not None:
            token = self.path.sent(self.clock())
            task.add_done_callback(lambda done: self._measure(done, token))

    def _measure(self, task, token):
        if not task.cancelled() and task.exception() is None:
            self.path.arrived(token, task.result(), self.clock())

    async def drain(self):
        while self._runs:
            await self._one()

    def cancel(self):
        for task in self._runs:
            task.cancel()
        self._runs.clear()

    async def _one(self):
        done, _ = await asyncio.wait(self._runs,
                                     return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            self._runs.pop(task)
            self.arrived += task.result()


async def _arrived(futures):
    got = 0
    for future in futures:
        chunk, _ = await asyncio.shield(future)
        got += len(chunk)
    return got
