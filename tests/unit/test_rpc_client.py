# SPDX-License-Identifier: Apache-2.0
"""The asyncio RPC client against a real loopback peer."""

import asyncio
import struct
import time

import pytest

from gvfs_openstack.client.nfs import RpcClient
from gvfs_openstack.nfs.errors import RecordTooLarge
from gvfs_openstack.nfs import rpc


async def _peer():
    """Answers the first call with a 2 MiB reply, later ones empty."""
    answered = []

    async def handle(reader, writer):
        try:
            while True:
                size = struct.unpack(">I", await reader.readexactly(4))[0]
                record = await reader.readexactly(size & 0x7FFFFFFF)
                xid = struct.unpack(">I", record[:4])[0]
                reply = rpc.accepted(xid, results=b"" if answered
                                     else bytes(2 << 20))
                answered.append(xid)
                writer.write(struct.pack(">I", 0x80000000 | len(reply))
                             + reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.asyncio
async def test_a_reply_over_the_size_limit_fails_its_call_at_once():
    server, port = await _peer()
    client = RpcClient("127.0.0.1", port, timeout=30,
                       max_record_size=1 << 20)
    await client.connect()
    try:
        started = time.monotonic()
        with pytest.raises(RecordTooLarge):
            await client.call(100003, 3, 0)
        assert time.monotonic() - started < 10
        # The connection goes on for the next call.
        assert client.connected
        assert await client.call(100003, 3, 0) == b""
    finally:
        client.close()
        server.close()
