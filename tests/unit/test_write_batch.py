# SPDX-License-Identifier: Apache-2.0
"""The UNSTABLE WRITEs a :class:`WriteBatch` keeps in flight, and COMMIT.

The fake server answers each WRITE only when the test says so, in any
order, as a real one may: what lands last is what the file keeps.  The
COMMIT tests use one that answers at once and can "restart" (change its
write verifier, losing what was not committed) at a chosen moment.
"""

import asyncio

import pytest

from gvfs_openstack.client import write_batch
from gvfs_openstack.client.write_batch import WriteBatch
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


@pytest.mark.asyncio
async def test_writes_over_other_bytes_go_together():
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


@pytest.mark.asyncio
async def test_a_write_over_bytes_in_flight_waits_for_them():
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


@pytest.mark.asyncio
async def test_settle_waits_for_the_writes_over_a_range_only():
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


@pytest.mark.asyncio
async def test_settle_raises_what_the_write_raised():
    class Failing(Server):
        async def write(self, fh, offset, data):
            await asyncio.sleep(0)
            raise ConnectionResetError("gone")

    batch = WriteBatch(Failing(), b"fh")
    await batch.add(0, b"aaaa")
    with pytest.raises(ConnectionResetError):
        await batch.settle(0, 4)


@pytest.mark.asyncio
async def test_a_resend_keeps_the_order_of_overlapping_writes():
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


class RestartingServer:
    """Answers at once; keeps UNSTABLE data apart until COMMIT.

    ``restarts`` lists the COMMITs (counted from 1) before which the
    server restarts: what was not committed is lost, the verifier
    changes.  ``short`` makes it take at most that many bytes a WRITE.
    """

    def __init__(self, window=2, restarts=(), short=None):
        self.window = window
        self.restarts = set(restarts)
        self.short = short
        self.boot = 1
        self.stable = bytearray(16)
        self.unstable = {}
        self.writes = []
        self.commits = 0
        self.sending = self.most_sending = 0

    @property
    def verf(self):
        return b"boot%04d" % self.boot

    async def write(self, fh, offset, data):
        self.sending += 1
        self.most_sending = max(self.most_sending, self.sending)
        await asyncio.sleep(0)
        self.sending -= 1
        data = bytes(data if self.short is None else data[:self.short])
        self.writes.append((offset, data))
        self.unstable[offset] = data
        return nfs3.WriteOk(None, len(data), const.StableHow.UNSTABLE,
                            self.verf)

    write_all = write

    async def commit(self, fh):
        self.commits += 1
        if self.commits in self.restarts:
            self.boot += 1
            self.unstable = {}
        for offset, data in sorted(self.unstable.items()):
            self.stable[offset:offset + len(data)] = data
        self.unstable = {}
        return self.verf


@pytest.mark.asyncio
async def test_commit_makes_the_writes_stable():
    server = RestartingServer()
    batch = WriteBatch(server, b"fh")
    await batch.add(0, b"aaaa")
    await batch.add(4, b"bbbb")
    await batch.commit()
    assert bytes(server.stable[:8]) == b"aaaabbbb"
    assert server.commits == 1 and batch.resent_bytes == 0
    assert batch.size == 0 and batch.sent == []
    await batch.commit()   # Nothing since: no COMMIT.
    assert server.commits == 1


@pytest.mark.asyncio
async def test_a_new_verifier_at_commit_sends_everything_again():
    """RFC 1813 section 3.3.7: the server lost the UNSTABLE data."""
    server = RestartingServer(restarts={1})
    batch = WriteBatch(server, b"fh")
    await batch.add(0, b"aaaa")
    await batch.add(4, b"bbbb")
    await batch.commit()
    assert server.commits == 2
    assert bytes(server.stable[:8]) == b"aaaabbbb"
    assert batch.resent_bytes == 8
    assert server.writes == [(0, b"aaaa"), (4, b"bbbb")] * 2


@pytest.mark.asyncio
async def test_a_verifier_that_keeps_changing_fails_the_commit():
    server = RestartingServer(restarts={1, 2, 3})
    batch = WriteBatch(server, b"fh")
    await batch.add(0, b"aaaa")
    with pytest.raises(write_batch.VerifierKeptChanging):
        await batch.commit()
    assert server.commits == WriteBatch.MAX_COMMIT_RETRIES
    assert batch.size == 4   # Kept: the caller may try again.


@pytest.mark.asyncio
async def test_a_short_write_is_completed_and_a_stuck_one_fails():
    server = RestartingServer(short=3)
    batch = WriteBatch(server, b"fh", server.write)
    await batch.add(0, b"abcdefgh")
    await batch.commit()
    assert server.writes == [(0, b"abc"), (3, b"def"), (6, b"gh")]
    assert bytes(server.stable[:8]) == b"abcdefgh"
    server = RestartingServer(short=0)
    stuck = WriteBatch(server, b"fh", server.write)
    await stuck.add(0, b"abcd")
    with pytest.raises(write_batch.WriteNotTaken):
        await stuck.commit()


@pytest.mark.asyncio
async def test_bytes_given_as_a_function_are_read_at_every_send():
    """As write-back's flush gives them: read from the journal."""
    server = RestartingServer(restarts={1})
    loads = []

    def load():
        loads.append(1)
        return b"zzzz"

    batch = WriteBatch(server, b"fh")
    await batch.add(8, load, 4)
    assert batch.size == 4
    await batch.commit()
    assert len(loads) == 2   # Sent, lost, sent again.
    assert bytes(server.stable[8:12]) == b"zzzz"


@pytest.mark.asyncio
async def test_a_resend_keeps_to_the_window():
    server = RestartingServer(window=2)
    batch = WriteBatch(server, b"fh")
    for offset in range(0, 16, 2):
        await batch.add(offset, b"xy")
    await batch._drain()
    batch.resend()
    await batch.commit()
    assert server.most_sending == 2
    assert len(server.writes) == 16
