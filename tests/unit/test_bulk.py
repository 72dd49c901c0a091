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


def test_readv_round_trips():
    args = bulk.ReadvArgs(b"\x01" * 28, (bulk.Extent(1 << 40, 65536),
                                         bulk.Extent(0, 0)), Codec.NONE)
    assert bulk.decode_args(BulkProc.READV, bulk.encode_args(
        BulkProc.READV, args)) == args
    ok = nfs3.Result(0, bulk.ReadvOk(samples.ATTR, (3, 0, 2), 5,
                                     Codec.NONE, b"abcde"))
    assert bulk.decode_res(BulkProc.READV, bulk.encode_res(
        BulkProc.READV, ok)) == ok


def test_a_readv_of_too_many_extents_is_garbage():
    many = tuple(bulk.Extent(i, 1) for i in range(bulk.MAX_EXTENTS + 1))
    with pytest.raises(ValueError):
        bulk.encode_args(BulkProc.READV, bulk.ReadvArgs(b"fh", many))
    # Sent anyway (a hostile client): refused before anything is read.
    data = bytearray(bulk.encode_args(BulkProc.READV, bulk.ReadvArgs(
        b"fh", many[:bulk.MAX_EXTENTS])))
    data[8:12] = (bulk.MAX_EXTENTS + 1).to_bytes(4, "big")
    with pytest.raises(ProtocolError):
        bulk.decode_args(BulkProc.READV, bytes(data))


def test_a_readv_answer_is_planned_within_the_limit_and_the_file():
    extents = [bulk.Extent(0, 100), bulk.Extent(1000, 100),
               bulk.Extent(5000, 100), bulk.Extent(50, 0)]
    # The file ends at 1050; 250 bytes in all at most: an extent is
    # answered whole or not at all, short only at the end of the file.
    assert bulk.plan(extents, 250, size=1050) == [(0, 100), (1000, 1050)]
    # The first extent is answered in part, the rest left out.
    assert bulk.plan(extents, 30) == [(0, 30)]
    assert bulk.plan(extents, 1000) == [
        (0, 100), (1000, 1100), (5000, 5100), (50, 50)]


def test_a_readv_reply_is_taken_apart_or_refused():
    pieces = bulk.split([3, 5, 4], [3, 2], b"abcde")
    assert [bytes(p) for p in pieces] == [b"abc", b"de"]
    for counts, data in (((), b""),              # Nothing answered.
                         ((3, 5, 4, 1), b"x" * 13),  # More than asked.
                         ((4,), b"abcd"),        # More bytes than asked.
                         ((3, 2), b"abcdef")):   # Counts != data.
        with pytest.raises(ValueError):
            bulk.split([3, 5, 4], counts, data)


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
        for proc in (BulkProc.READ, BulkProc.WRITE, BulkProc.READV):
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
