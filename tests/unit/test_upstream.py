# SPDX-License-Identifier: Apache-2.0
"""The upstream pool against a real loopback peer that misbehaves."""

import asyncio
import struct
import time

import pytest

from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy import tunnel
from gvfs_openstack.proxy import upstream


#: An NFSv3 NULL call, for any XID.
_call = rpc.call_builder(100003, 3, 0, rpc.AUTH_NONE)


async def _peer(oversized_first):
    """A peer that answers calls with empty successful replies.

    With ``oversized_first``, the first answer is a 2 MiB reply.
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
            reply = rpc.accepted(xid, results=bytes(2 << 20)
                                 if oversized_first and not answered
                                 else b"")
            writer.write(struct.pack(">I", 0x80000000 | len(reply)) + reply)
            answered.append(xid)
            await writer.drain()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], answered


@pytest.mark.asyncio
async def test_a_reply_over_the_size_limit_fails_its_call_at_once():
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
        # Not sent again; the connection goes on for other calls.
        assert len(answered) == 1
        reply = await pool.call(_call, replayable=True)
        assert isinstance(reply, (bytes, bytearray))
        assert pool.counters.upstream_failed_calls == 1
        assert pool.counters.upstream_connects == 1
    finally:
        await pool.close()
        server.close()


async def _cutting_peer(second_reply):
    """Answers the first call with half of a large reply, then hangs up.

    Calls after that get ``second_reply(xid)``, whole.
    """
    calls = []

    def big_reply(xid):
        return rpc.accepted(xid, results=bytes(range(256)) * 1024)

    async def handle(reader, writer):
        try:
            while True:
                header = await reader.readexactly(4)
                size = struct.unpack(">I", header)[0] & 0x7FFFFFFF
                xid = struct.unpack(">I", (await reader.readexactly(
                    size))[:4])[0]
                calls.append(xid)
                reply = big_reply(xid) if len(calls) == 1 else \
                    second_reply(xid)
                writer.write(struct.pack(">I", 0x80000000 | len(reply)))
                if len(calls) == 1:
                    writer.write(reply[:100000])
                    await writer.drain()
                    await asyncio.sleep(0.2)  # Let the proxy relay it.
                    writer.transport.abort()
                    return
                writer.write(reply)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1], calls, big_reply


async def _relay_cut(second_reply):
    """Downstream wire and result of a call whose relayed reply is cut."""
    from gvfs_openstack.proxy import streams
    from tests.unit.test_streams import Wire

    server, port, calls, big_reply = await _cutting_peer(second_reply)
    pool = upstream.UpstreamPool(tunnel.TcpConnector("127.0.0.1", port),
                                 size=1, call_timeout=30,
                                 backoff_initial=0.01)
    await pool.start()
    wire = Wire()
    writer = streams.RecordWriter(wire, counters.ListenerCounters(),
                                  "downstream_bytes_out")
    try:
        result = await pool.call(
            _call, replayable=True,
            relay_to=streams.RelayTarget(writer, 77))
        return wire, result, calls, big_reply(77), pool.counters
    finally:
        await pool.close()
        server.close()


@pytest.mark.asyncio
async def test_a_relayed_reply_cut_part_way_is_finished_by_the_call_resent():
    from gvfs_openstack.proxy import streams
    from tests.unit.test_streams import records

    wire, result, calls, expected, stats = await _relay_cut(
        lambda xid: rpc.accepted(xid, results=bytes(range(256)) * 1024))
    assert result is streams.RELAYED
    assert len(calls) == 2 and calls[0] == calls[1]  # Sent again.
    assert stats.upstream_resent == 1
    # One whole record downstream, byte for byte the reply, XID 77.
    assert not wire.aborted
    assert records(wire) == [expected]


@pytest.mark.asyncio
async def test_a_different_reply_to_the_call_sent_again_aborts_the_stream():
    from gvfs_openstack.proxy import streams

    wire, result, calls, expected, _ = await _relay_cut(
        lambda xid: rpc.accepted(xid, results=b"\0\0\0\x46"))  # STALE.
    assert result is streams.RELAYED
    assert len(calls) == 2
    # Half a record went down and cannot be finished: the client's
    # connection is dropped, as a dying server's would be.
    assert wire.aborted
    assert 100000 <= len(wire.data) < len(expected)


@pytest.mark.asyncio
async def test_a_peer_that_closes_unanswered_is_retried_with_backoff():
    # A relay in front of a proxy that is down accepts and closes at once:
    # reconnecting at full speed would send every call again hundreds of
    # times a second.
    accepted = []

    async def close_at_once(reader, writer):
        accepted.append(time.monotonic())
        writer.transport.abort()

    server = await asyncio.start_server(close_at_once, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    pool = upstream.UpstreamPool(tunnel.TcpConnector("127.0.0.1", port),
                                 size=1, call_timeout=30,
                                 backoff_initial=0.01, backoff_max=0.2)
    await pool.start()
    call = asyncio.create_task(pool.call(_call, replayable=True))
    await asyncio.sleep(1.0)
    call.cancel()
    await pool.close()
    server.close()
    # 0.01, 0.02 ... doubling to 0.2: about 9 in a second, not hundreds.
    assert 3 <= len(accepted) <= 15, len(accepted)
    assert pool.counters.upstream_resent <= len(accepted)
