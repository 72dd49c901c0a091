# SPDX-License-Identifier: Apache-2.0
"""The prefetch's window: as much in flight as the path's measured BDP."""

import asyncio

import pytest

from gvfs_openstack.proxy.cache import window as window_mod
from gvfs_openstack.proxy.cache.window import FetchWindow

MIB = 1024 * 1024


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def fetch(loop, nbytes):
    """A fetch's futures (one block), and how to make it arrive."""
    future = loop.create_future()
    return {0: future}, lambda: future.set_result((b"x" * nbytes, None))


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.asyncio
async def test_a_fixed_window_keeps_its_size():
    loop = asyncio.get_running_loop()
    window = FetchWindow(4 * MIB)
    for _ in range(4):
        await asyncio.wait_for(window.make_room(MIB), 0.1)
        window.add(fetch(loop, MIB)[0], MIB)
    assert window.in_flight == 4 * MIB and window.limit == 4 * MIB
    window.cancel()


@pytest.mark.asyncio
async def test_a_fitting_window_starts_with_one_fetch_and_doubles():
    """Across an empty WAN: each round trip measures a rate that the
    window, not the path, limited, and the window grows to its size."""
    loop = asyncio.get_running_loop()
    clock = Clock()
    window = FetchWindow(8 * MIB, fits=True, clock=clock)
    limits = []
    for _ in range(8):
        # A round of fetches, all sent at once, all back 50 ms later.
        arrivals = []
        while True:
            room = asyncio.ensure_future(window.make_room(MIB))
            await settle()
            if not room.done():
                room.cancel()
                break
            futures, arrive = fetch(loop, MIB)
            window.add(futures, MIB)
            arrivals.append(arrive)
        clock.now += 0.05
        for arrive in arrivals:
            arrive()
        await window.drain()
        limits.append(window.limit)
    # One fetch, two, four, eight: then the size.
    assert limits[:3] == pytest.approx([2 * MIB, 4 * MIB, 8 * MIB])
    assert limits[-1] == 8 * MIB


@pytest.mark.asyncio
async def test_on_a_shared_port_it_keeps_about_one_fetch():
    """Eight hosts share 1 Gbit/s: a 1 MiB fetch takes 70 ms, so each
    host's rate is an eighth of the port.  It does not grow: after three
    round trips the window is 1.5 x BDP, one fetch."""
    loop = asyncio.get_running_loop()
    clock = Clock()
    window = FetchWindow(4 * MIB, fits=True, clock=clock)
    limits = []
    for _ in range(6):
        await window.make_room(MIB)
        futures, arrive = fetch(loop, MIB)
        window.add(futures, MIB)
        clock.now += 0.07
        arrive()
        await settle()
        limits.append(window.limit)
    rate = MIB / 0.07
    assert limits[:3] == [pytest.approx(2 * rate * 0.07)] * 3
    assert window.limit == pytest.approx(window_mod.HEADROOM * rate * 0.07)
    # A second fetch waits for the first: no queue of this host's own.
    await window.make_room(MIB)
    window.add(fetch(loop, MIB)[0], MIB)
    waiting = asyncio.ensure_future(window.make_room(MIB))
    await settle()
    assert not waiting.done()
    waiting.cancel()
    window.cancel()


@pytest.mark.asyncio
async def test_a_failed_fetch_measures_nothing_and_is_raised():
    loop = asyncio.get_running_loop()
    clock = Clock()
    window = FetchWindow(4 * MIB, fits=True, clock=clock)
    futures, _ = fetch(loop, MIB)
    window.add(futures, MIB)
    clock.now += 0.05
    futures[0].set_exception(OSError("gone"))
    with pytest.raises(OSError):
        await window.drain()
    assert window.limit == 0
