# SPDX-License-Identifier: Apache-2.0
"""Order of the UNSTABLE WRITEs a :class:`WriteBatch` keeps in flight.

The fake server answers each WRITE only when the test says so, in any
order, as a real one may: what lands last is what the file keeps.
"""

import asyncio

import pytest

from gvfs_openstack.client.nfs import WriteBatch
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import nfs3


class Server:
    """Applies a WRITE when :meth:`answer` releases it."""

    window = 8

    def __init__(self):
        self.data = bytearray(16)
        self.waiting = []

    async def write(self, fh, offset, data):
        answered = asyncio.get_running_loop().create_future()
        entry = (offset, bytes(data), answered)
        self.waiting.append(entry)
        try:
            await answered
        except asyncio.CancelledError:
            self.waiting.remove(entry)   # The client gave up on it.
            raise
        self.data[offset:offset + len(data)] = data
        return nfs3.WriteOk(None, len(data), const.StableHow.UNSTABLE,
                            b"verf0001")

    async def write_all(self, fh, offset, data):
        """As the client's: this server always takes all of it."""
        return await self.write(fh, offset, data)

    async def answer(self, index):
        """Apply and answer the ``index``-th WRITE waiting."""
        offset, data, answered = self.waiting.pop(index)
        answered.set_result(None)
        await settle()
        return offset, data

    def sent(self):
        return [(offset, data) for offset, data, _ in self.waiting]


async def settle():
    for _ in range(5):
        await asyncio.sleep(0)


def run(scenario):
    return asyncio.run(scenario())


def test_writes_over_other_bytes_go_together():
    async def scenario():
        server = Server()
        batch = WriteBatch(server, b"fh")
        await batch.add(0, b"aaaa")
        await batch.add(4, b"bbbb")
        await settle()
        assert server.sent() == [(0, b"aaaa"), (4, b"bbbb")]
        await server.answer(1)
        await server.answer(0)
        await batch._drain()
        assert bytes(server.data[:8]) == b"aaaabbbb"

    run(scenario)


def test_a_write_over_bytes_in_flight_waits_for_them():
    async def scenario():
        server = Server()
        batch = WriteBatch(server, b"fh")
        await batch.add(0, b"old!")
        await batch.add(2, b"NEW!")
        await settle()
        # The second is not sent while the first may still land after it.
        assert server.sent() == [(0, b"old!")]
        await server.answer(0)
        assert server.sent() == [(2, b"NEW!")]
        await server.answer(0)
        await batch._drain()
        assert bytes(server.data[:6]) == b"olNEW!"

    run(scenario)


def test_settle_waits_for_the_writes_over_a_range_only():
    async def scenario():
        server = Server()
        batch = WriteBatch(server, b"fh")
        await batch.add(0, b"aaaa")
        await batch.add(8, b"bbbb")
        await settle()
        settled = asyncio.ensure_future(batch.settle(8, 10))
        await batch.settle(4, 8)   # Nothing in flight there.
        await settle()
        assert not settled.done()
        await server.answer(0)     # The WRITE at 0.
        assert not settled.done()
        await server.answer(0)     # The WRITE at 8.
        assert settled.done() and settled.result() is None

    run(scenario)


def test_settle_raises_what_the_write_raised():
    class Failing(Server):
        async def write(self, fh, offset, data):
            await asyncio.sleep(0)
            raise ConnectionResetError("gone")

    async def scenario():
        batch = WriteBatch(Failing(), b"fh")
        await batch.add(0, b"aaaa")
        with pytest.raises(ConnectionResetError):
            await batch.settle(0, 4)

    run(scenario)


def test_a_resend_keeps_the_order_of_overlapping_writes():
    async def scenario():
        server = Server()
        batch = WriteBatch(server, b"fh")
        await batch.add(0, b"1111")
        await batch.add(0, b"2222")
        await batch.add(8, b"3333")
        await settle()
        batch.resend()      # As after a reconnect: nothing was answered.
        await settle()
        assert server.sent() == [(0, b"1111"), (8, b"3333")]
        # Answer the re-sent ones, newest first where the server may.
        while server.waiting:
            await server.answer(len(server.waiting) - 1)
        await batch._drain()
        assert bytes(server.data[:12]) == b"2222\0\0\0\x003333"
        assert batch.resent_bytes == 12

    run(scenario)
