# SPDX-License-Identifier: Apache-2.0
"""A window of cache fetches in flight, for those who fetch ahead.

Across a WAN one READ at a time uses a fraction of the link (a 64 KiB
READ on a 50 ms, 200 Mbit/s link: 5% of its bandwidth-delay product).
A prefetch or a warm keeps ``size`` bytes of fetches in flight instead,
and waits for one to arrive before it sends more.
"""

import asyncio


class FetchWindow:
    """Fetches started by :meth:`CachedReads.fetch`, ``size`` bytes at most.

    Each fetch's futures are awaited through a shield: they are shared
    with readers waiting for the same blocks, and a window that is
    cancelled must not cancel their fetches.
    """

    def __init__(self, size):
        self.size = size
        #: task -> bytes it waits for
        self._runs = {}
        #: Bytes that arrived so far.
        self.arrived = 0

    def __len__(self):
        return len(self._runs)

    @property
    def in_flight(self):
        return sum(self._runs.values())

    async def make_room(self, nbytes):
        """Wait until ``nbytes`` more fit (or nothing is in flight).

        Raises what a fetch that arrived failed with
        (:class:`reads.FetchError`).
        """
        while self._runs and self.in_flight + nbytes > self.size:
            await self._one()

    def add(self, futures, nbytes):
        """Count a fetch's ``futures`` (block -> future) in the window."""
        task = asyncio.ensure_future(_arrived(futures.values()))
        self._runs[task] = nbytes

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
