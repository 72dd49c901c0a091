# SPDX-License-Identifier: Apache-2.0
"""The bulk channel's XDR: round trips and garbage."""

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest
import zstandard

from gvfs_openstack.client import zstd_chunks
from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs.bulk import BulkProc
from gvfs_openstack.nfs.bulk import Codec
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import nfs3
from tests.unit import samples


def test_read_round_trips():
    args = bulk.ReadArgs(b"\x01" * 28, 4 << 20, 2 << 20, Codec.ZSTD)
    assert bulk.decode_args(BulkProc.READ, bulk.encode_args(
        BulkProc.READ, args)) == args
    ok = nfs3.Result(0, bulk.ReadOk(samples.ATTR, True, 10, Codec.NONE,
                                    b"0123456789"))
    assert bulk.decode_res(BulkProc.READ, bulk.encode_res(
        BulkProc.READ, ok)) == ok
    fail = nfs3.Result(70, nfs3.AttrBody(None))
    assert bulk.decode_res(BulkProc.READ, bulk.encode_res(
        BulkProc.READ, fail)) == fail


def test_write_round_trips():
    args = bulk.WriteArgs(b"\x01" * 28, 8 << 20, 4 << 20, Codec.ZSTD,
                          b"frame")
    assert bulk.decode_args(BulkProc.WRITE, bulk.encode_args(
        BulkProc.WRITE, args)) == args
    ok = nfs3.Result(0, nfs3.WriteOk(nfs3.WccData(None, samples.ATTR),
                                     4 << 20, 0, b"verifier"))
    assert bulk.decode_res(BulkProc.WRITE, bulk.encode_res(
        BulkProc.WRITE, ok)) == ok
    fail = nfs3.Result(22, nfs3.WccBody(nfs3.WccData()))
    assert bulk.decode_res(BulkProc.WRITE, bulk.encode_res(
        BulkProc.WRITE, fail)) == fail


def test_an_unknown_codec_or_procedure_is_a_protocol_error():
    data = bytearray(bulk.encode_args(BulkProc.READ, bulk.ReadArgs(
        b"fh", 0, 1, Codec.ZSTD)))
    data[-1] = 9
    with pytest.raises(ProtocolError):
        bulk.decode_args(BulkProc.READ, bytes(data))
    with pytest.raises(ProtocolError):
        bulk.decode_args(7, b"")


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_raises_only_protocol_errors(data):
    for decode in (bulk.decode_args, bulk.decode_res):
        for proc in (BulkProc.READ, BulkProc.WRITE):
            try:
                decode(proc, data)
            except ProtocolError:
                pass


def test_decompress_never_takes_more_than_the_chunk_says():
    raw = bytes(2 * 1024 * 1024)
    frame = zstd_chunks.compress(raw, 1)
    assert zstd_chunks.decompress(frame, len(raw)) == raw
    with pytest.raises(zstandard.ZstdError, match="holds 2097152"):
        zstd_chunks.decompress(frame, 1024 * 1024)
    with pytest.raises(zstandard.ZstdError):
        zstd_chunks.decompress(b"\x28\xb5\x2f\xfd" + b"junk", 1024)
