# SPDX-License-Identifier: Apache-2.0
import struct

import pytest

from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs.connection import NEED_DATA
from gvfs_openstack.nfs.connection import Role
from gvfs_openstack.nfs.connection import RpcConnection
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import LocalProtocolError
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs.errors import RecordTooLarge
from gvfs_openstack.nfs import rpc


def pump(data, receiver, chunk=7):
    """Feed bytes in small pieces, as a network would."""
    for i in range(0, len(data), chunk):
        receiver.receive_data(data[i:i + chunk])


def test_call_and_reply_pumped_between_client_and_server():
    client = RpcConnection(Role.CLIENT)
    server = RpcConnection(Role.SERVER)
    cred = rpc.AuthSys(1000, 100, (4, 5), "node1").to_opaque()
    pump(client.send(rpc.Call(42, const.NFS_PROGRAM, 3, 6, cred,
                              args=b"\0\0\0\x01"), tag="mine"), server)
    event = server.next_event()
    assert isinstance(event, connection.CallReceived)
    call = event.call
    assert (call.xid, call.prog, call.vers, call.proc) == (42, 100003, 3, 6)
    assert rpc.AuthSys.from_opaque(call.cred) == rpc.AuthSys(
        1000, 100, (4, 5), "node1")
    assert bytes(call.args) == b"\0\0\0\x01"
    assert server.next_event() is NEED_DATA
    assert client.outstanding == {42: "mine"}
    pump(server.send(rpc.Reply(42, results=b"\0\0\0\0")), client)
    event = client.next_event()
    assert isinstance(event, connection.ReplyReceived)
    assert (event.xid, event.tag) == (42, "mine")
    reply = event.decode()
    assert reply.xid == 42 and bytes(reply.results) == b"\0\0\0\0"
    assert client.outstanding == {}


@pytest.mark.parametrize("msg", [
    rpc.Reply(1, const.AcceptStat.PROG_MISMATCH, mismatch=(3, 3)),
    rpc.Reply(2, const.AcceptStat.GARBAGE_ARGS),
    rpc.Denied(3, const.RejectStat.AUTH_ERROR,
               auth_stat=const.AuthStat.AUTH_TOOWEAK),
    rpc.Denied(4, const.RejectStat.RPC_MISMATCH, mismatch=(2, 2)),
])
def test_error_replies_round_trip(msg):
    assert rpc.decode_message(rpc.encode_message(msg)) == msg


def test_multi_fragment_record_is_reassembled():
    message = rpc.encode_message(rpc.Call(9, 100003, 3, 0))
    half = len(message) // 2
    data = struct.pack(">I", half) + message[:half] + \
        struct.pack(">I", 0x80000000 | (len(message) - half)) + message[half:]
    server = RpcConnection(Role.SERVER)
    pump(data, server, chunk=3)
    assert server.next_event().call.xid == 9


def test_large_record_is_read_without_the_scratch_buffer():
    reader = connection.RecordReader(scratch_size=64)
    body = bytes(range(256)) * 40
    reader.feed(connection.frame(body) + connection.frame(b"tail"))
    assert bytes(reader.next_record()) == body
    assert bytes(reader.next_record()) == b"tail"
    assert reader.next_record() is None


def test_buffered_protocol_interface_gives_the_same_records():
    reader = connection.RecordReader(scratch_size=128)
    stream = b"".join(connection.frame(bytes([i]) * (i * 37))
                      for i in range(1, 12))
    pos = 0
    while pos < len(stream):
        buf = reader.get_buffer()
        n = min(len(buf), 50, len(stream) - pos)
        buf[:n] = stream[pos:pos + n]
        reader.buffer_updated(n)
        pos += n
    records = []
    while (record := reader.next_record()) is not None:
        records.append(bytes(record))
    assert records == [bytes([i]) * (i * 37) for i in range(1, 12)]


def test_an_oversized_call_is_refused_alone_and_the_stream_goes_on():
    server = RpcConnection(Role.SERVER, max_record_size=1024,
                           scratch_size=256)
    big = connection.frame(rpc.encode_message(
        rpc.Call(0xABCD, 100003, 3, 7, args=bytes(1 << 20))))
    after = connection.frame(rpc.encode_message(rpc.Call(0xABCE, 100003,
                                                         3, 1)))
    seen = []
    pump(big + after, server, chunk=4093)
    while (event := server.next_event()) is not NEED_DATA:
        seen.append(event)
    refused, call = seen
    assert isinstance(refused, connection.RecordRefused)
    assert refused.xid == 0xABCD
    assert struct.unpack_from(">I", refused.head, 20)[0] == 7  # proc
    assert isinstance(call, connection.CallReceived)
    assert call.call.xid == 0xABCE


def test_an_oversized_multi_fragment_record_is_dropped_whole():
    reader = connection.RecordReader(max_record_size=100, scratch_size=64)
    body = bytes(range(40)) * 5
    data = b"".join(struct.pack(">I", n) + body[i:i + n] for i, n in
                    ((0, 60), (60, 60), (120, 60)))
    data += struct.pack(">I", 0x80000000 | 20) + body[180:200]
    reader.feed(data + connection.frame(b"next"))
    with pytest.raises(RecordTooLarge) as e:
        reader.next_record()
    assert e.value.head == body[:24]
    assert bytes(reader.next_record()) == b"next"
    assert reader.next_record() is None


def test_an_oversized_reply_fails_its_own_call_only():
    client = RpcConnection(Role.CLIENT, max_record_size=1024)
    client.expect_reply(1, "big")
    client.expect_reply(2, "small")
    client.receive_data(_reply_record(1, bytes(5000)) +
                        _reply_record(2, b"ok"))
    refused = client.next_event()
    assert isinstance(refused, connection.RecordRefused)
    assert (refused.xid, refused.tag) == (1, "big")
    assert client.next_event().tag == "small"
    assert client.outstanding == {}


def test_eof_inside_a_record_is_a_protocol_error():
    server = RpcConnection(Role.SERVER)
    server.receive_data(struct.pack(">I", 0x80000010) + b"abc")
    assert server.next_event() is NEED_DATA
    server.receive_data(b"")
    with pytest.raises(ProtocolError, match="inside a record"):
        server.next_event()


def test_clean_eof_is_reported():
    server = RpcConnection(Role.SERVER)
    server.receive_data(b"")
    assert server.next_event() is connection.CLOSED


def test_server_refuses_replies_and_cannot_send_calls():
    server = RpcConnection(Role.SERVER)
    server.receive_data(connection.frame(rpc.encode_message(rpc.Reply(1))))
    with pytest.raises(ProtocolError):
        server.next_event()
    with pytest.raises(LocalProtocolError):
        server.send(rpc.Call(1, 1, 1, 1))


def test_wrong_rpc_version_is_kept_for_an_rpc_mismatch_reply():
    data = bytearray(rpc.encode_message(rpc.Call(5, 100003, 3, 0)))
    struct.pack_into(">I", data, 8, 3)
    call = rpc.decode_message(bytes(data))
    assert call.rpcvers == 3


def test_set_xid_rewrites_in_place():
    record = bytearray(rpc.encode_message(rpc.Reply(1, results=b"data")))
    assert rpc.set_xid(record, 0xDEADBEEF) is record
    assert rpc.read_xid(record) == 0xDEADBEEF


def test_auth_sys_with_too_many_groups_is_refused():
    with pytest.raises(LocalProtocolError):
        rpc.AuthSys(1, 1, tuple(range(17))).to_opaque()


def test_an_oversized_record_waits_for_its_head():
    server = RpcConnection(Role.SERVER, max_record_size=1024)
    server.receive_data(struct.pack(">I", 0x80000000 | 1 << 20))
    assert server.next_event() is NEED_DATA
    server.receive_data(struct.pack(">II", 0xABCD, 0))
    assert server.next_event() is NEED_DATA     # the rest of its head
    server.receive_data(bytes(16))
    event = server.next_event()
    assert isinstance(event, connection.RecordRefused)
    assert event.xid == 0xABCD
    server.receive_data(b"")
    with pytest.raises(ProtocolError, match="inside a record"):
        server.next_event()


@pytest.mark.parametrize("role,msg_type", [(Role.SERVER, 1),
                                           (Role.CLIENT, 0),
                                           (Role.SERVER, 0x41414141)])
def test_an_oversized_record_of_the_wrong_kind_is_garbage(role, msg_type):
    conn = RpcConnection(role, max_record_size=1024)
    conn.receive_data(struct.pack(">III", 0x80000000 | 1 << 20, 5,
                                  msg_type) + bytes(16))
    with pytest.raises(ProtocolError, match="oversized record"):
        conn.next_event()


def _reply_record(xid, payload):
    return connection.frame(rpc.encode_message(rpc.Reply(xid,
                                                         results=payload)))


def test_a_reply_nobody_waits_for_is_named_and_the_stream_goes_on():
    client = RpcConnection(Role.CLIENT)
    client.send(rpc.Call(7, 1, 1, 1), tag="seven")
    assert client.forget(7) == "seven"
    client.receive_data(_reply_record(7, b"late") + _reply_record(8, b"x"))
    assert client.next_event() == connection.UnexpectedReply(7)
    assert client.next_event() == connection.UnexpectedReply(8)
    assert client.next_event() is NEED_DATA


def test_a_client_refuses_a_call_and_a_duplicate_xid():
    client = RpcConnection(Role.CLIENT)
    client.expect_reply(3, "a")
    with pytest.raises(LocalProtocolError):
        client.expect_reply(3, "b")
    client.receive_data(connection.frame(rpc.encode_message(
        rpc.Call(3, 1, 1, 1))))
    with pytest.raises(ProtocolError, match="received a call"):
        client.next_event()
    with pytest.raises(ProtocolError, match="already failed"):
        client.next_event()


def test_a_large_reply_is_announced_while_it_arrives():
    """The events a proxy relays cut-through from.

    The same buffer, with more of it filled each time, then the whole
    reply marked streamed.
    """
    client = RpcConnection(Role.CLIENT, scratch_size=256)
    client.expect_reply(0x55, "big")
    client.expect_reply(0x56, "small")
    payload = bytes(range(256)) * 64
    stream = _reply_record(0x56, b"s") + _reply_record(0x55, payload)
    seen = []
    for i in range(0, len(stream), 4000):
        client.receive_data(stream[i:i + 4000])
        while (event := client.next_event()) is not NEED_DATA:
            seen.append(event)
    assert isinstance(seen[0], connection.ReplyReceived)
    assert (seen[0].tag, seen[0].streamed) == ("small", False)
    arriving = seen[1:-1]
    assert arriving and all(isinstance(e, connection.RecordArriving)
                            for e in arriving)
    assert {(e.xid, e.tag) for e in arriving} == {(0x55, "big")}
    assert len({id(e.buffer) for e in arriving}) == 1
    fills = [e.filled for e in arriving]
    assert fills == sorted(set(fills))
    last = seen[-1]
    assert isinstance(last, connection.ReplyReceived)
    assert last.streamed and last.record is arriving[0].buffer
    assert bytes(last.decode().results) == payload


def test_a_large_call_is_announced_once_its_header_is_in():
    server = RpcConnection(Role.SERVER, scratch_size=256)
    record = connection.frame(rpc.encode_message(
        rpc.Call(9, 100003, 3, 7, args=bytes(8000))))
    server.receive_data(record[:600])
    assert server.next_event() is NEED_DATA   # header not surely in yet
    server.receive_data(record[600:2000])
    event = server.next_event()
    assert isinstance(event, connection.RecordArriving)
    assert (event.xid, event.filled, event.tag) == (9, 1996, None)
    assert server.next_event() is NEED_DATA   # nothing new since
    server.receive_data(record[2000:])
    event = server.next_event()
    assert isinstance(event, connection.CallReceived) and event.streamed
    assert event.call.proc == 7


def test_a_dead_stream_hands_back_every_outstanding_tag():
    client = RpcConnection(Role.CLIENT)
    for xid in (1, 2, 3):
        client.send(rpc.Call(xid, 1, 1, 1), tag=xid * 10)
    assert sorted(client.take_outstanding()) == [10, 20, 30]
    assert client.outstanding == {}


@pytest.mark.parametrize("role", list(Role))
def test_a_streamed_record_keeps_the_xid_it_arrived_with(role):
    """A relay rewrites the XID in place; the events keep the original.

    The record still answers (or is) the call it arrived as.
    """
    conn = RpcConnection(role, scratch_size=256)
    if role is Role.CLIENT:
        conn.expect_reply(0x77, "mine")
        record = _reply_record(0x77, bytes(5000))
    else:
        record = connection.frame(rpc.encode_message(
            rpc.Call(0x77, 100003, 3, 7, args=bytes(5000))))
    conn.receive_data(record[:2000])
    event = conn.next_event()
    assert isinstance(event, connection.RecordArriving)
    rpc.set_xid(event.buffer, 0x1234)   # What a relay does.
    conn.receive_data(record[2000:3000])
    event = conn.next_event()
    assert (event.xid, event.tag) == (
        0x77, "mine" if role is Role.CLIENT else None)
    conn.receive_data(record[3000:])
    event = conn.next_event()
    assert event.streamed
    if role is Role.CLIENT:
        assert (event.xid, event.tag) == (0x77, "mine")
    else:
        assert event.call.xid == 0x77
