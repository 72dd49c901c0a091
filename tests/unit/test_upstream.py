"""The upstream pool against a real loopback peer that misbehaves."""

import asyncio
import struct
import time

import pytest

from gvfs_openstack.gvfs import tunnel
from gvfs_openstack.gvfs import upstream
from gvfs_openstack.nfs import rpc


#: An NFSv3 NULL call, for any XID.
_call = rpc.call_builder(100003, 3, 0, rpc.AUTH_NONE)


async def _peer(oversized_first):
    """A peer that answers calls with empty successful replies.

    With ``oversized_first``, the first answer is a record header
    announcing 64 MiB, and the XID.
    """
    answered = []

    async def handle(reader, writer):
        try:
            await answer(reader, writer)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    async def answer(reader, writer):
        while True:
            header = await reader.readexactly(4)
            size = struct.unpack(">I", header)[0] & 0x7FFFFFFF
            record = await reader.readexactly(size)
            xid = struct.unpack(">I", record[:4])[0]
            if oversized_first and not answered:
                writer.write(struct.pack(">II", 0x80000000 | 64 << 20, xid))
            else:
                reply = rpc.accepted(xid)
                writer.write(struct.pack(">I", 0x80000000 | len(reply))
                             + reply)
            answered.append(xid)
            await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], answered


def test_a_reply_over_the_size_limit_fails_its_call_at_once():
    async def scenario():
        server, port, answered = await _peer(oversized_first=True)
        pool = upstream.UpstreamPool(tunnel.TcpConnector("127.0.0.1", port),
                                     size=1, max_record_size=1 << 20,
                                     call_timeout=30)
        await pool.start()
        try:
            started = time.monotonic()
            with pytest.raises(upstream.UpstreamReplyTooLarge) as e:
                await pool.call(_call, replayable=True)
            assert time.monotonic() - started < 10
            assert "max_record_size" in str(e.value)
            # Not sent again; the connection comes back for other calls.
            assert len(answered) == 1
            reply = await pool.call(_call, replayable=True)
            assert isinstance(reply, (bytes, bytearray))
            assert pool.stats["upstream_failed_calls"] == 1
        finally:
            await pool.close()
            server.close()

    asyncio.run(scenario())
