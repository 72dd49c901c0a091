# SPDX-License-Identifier: Apache-2.0
"""Bounded fuzzing of every decoder: only ProtocolError may escape.

Hypothesis feeds random bytes and mutations of real records (the encoded
samples of every procedure, wrapped in RPC calls and replies).  The run is
bounded (``max_examples``) so that it fits in the unit test suite.
"""

from hypothesis import given
from hypothesis import HealthCheck
from hypothesis import settings
from hypothesis import strategies as st

from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from tests.unit import samples

FUZZ = settings(max_examples=400, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def _seeds():
    seeds = []
    cred = rpc.AuthSys(1000, 1000, (1, 2), "host").to_opaque()
    for proc, args in samples.NFS_ARGS.items():
        body = nfs3.encode_args(proc, args)
        seeds.append(("nfs-args", proc, body))
        seeds.append(("rpc", proc, rpc.encode_message(rpc.Call(
            proc, const.NFS_PROGRAM, 3, proc, cred, args=body))))
        for res in samples.NFS_RESULTS[proc]:
            data = nfs3.encode_res(proc, res)
            seeds.append(("nfs-res", proc, data))
            seeds.append(("rpc", proc, rpc.encode_message(
                rpc.Reply(proc, results=data))))
    for proc, args in samples.MOUNT_ARGS.items():
        seeds.append(("mount-args", proc, mount3.encode_args(proc, args)))
        for res in samples.MOUNT_RESULTS[proc]:
            seeds.append(("mount-res", proc, mount3.encode_res(proc, res)))
    return seeds


SEEDS = _seeds()
DECODERS = {
    "nfs-args": nfs3.decode_args, "nfs-res": nfs3.decode_res,
    "mount-args": mount3.decode_args, "mount-res": mount3.decode_res,
    "rpc": lambda proc, data: rpc.decode_message(data),
}


def _decode(kind, proc, data):
    try:
        DECODERS[kind](proc, data)
    except ProtocolError:
        pass  # The one error decoders may raise on bad input.


@st.composite
def mutated(draw):
    kind, proc, data = draw(st.sampled_from(SEEDS))
    data = bytearray(data)
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["flip", "truncate", "insert", "word"]))
        if op == "flip" and data:
            i = draw(st.integers(0, len(data) - 1))
            data[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "truncate":
            del data[draw(st.integers(0, len(data))):]
        elif op == "insert":
            i = draw(st.integers(0, len(data)))
            data[i:i] = draw(st.binary(max_size=16))
        elif op == "word" and len(data) >= 4:
            i = draw(st.integers(0, (len(data) - 4) // 4)) * 4
            data[i:i + 4] = draw(st.sampled_from(
                [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\0\0\0\0",
                 b"\0\0\x10\0"]))
    return kind, proc, bytes(data)


@FUZZ
@given(mutated())
def test_mutated_real_records_raise_only_protocol_errors(case):
    _decode(*case)


@FUZZ
@given(st.sampled_from(sorted(DECODERS)), st.integers(0, 25),
       st.binary(max_size=512))
def test_random_bytes_raise_only_protocol_errors(kind, proc, data):
    _decode(kind, proc, data)


@FUZZ
@given(st.binary(max_size=2048), st.integers(1, 64))
def test_record_reader_survives_any_stream(data, chunk):
    reader = connection.RecordReader(max_record_size=4096, scratch_size=256)
    try:
        for i in range(0, len(data), chunk):
            reader.feed(data[i:i + chunk])
            while reader.next_record() is not None:
                pass
        reader.feed(b"")
        reader.next_record()
    except ProtocolError:
        pass  # Framing errors and oversize records are ProtocolErrors.


@FUZZ
@given(st.sampled_from(list(connection.Role)), st.binary(max_size=2048),
       st.integers(1, 64))
def test_a_connection_survives_any_stream(role, data, chunk):
    """Whatever a peer sends, either side yields events or ProtocolError."""
    conn = connection.RpcConnection(role, max_record_size=4096,
                                    scratch_size=256)
    if role is connection.Role.CLIENT:
        for xid in range(4):
            conn.expect_reply(xid, xid)
    try:
        for i in range(0, len(data), chunk):
            conn.receive_data(data[i:i + chunk])
            while (event := conn.next_event()) is not connection.NEED_DATA:
                assert not isinstance(event, connection.CallReceived) or \
                    role is connection.Role.SERVER
        conn.receive_data(b"")
        assert conn.next_event() is connection.CLOSED
    except ProtocolError:
        pass  # Garbage, wrong-role messages, oversize records.
