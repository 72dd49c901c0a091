# SPDX-License-Identifier: Apache-2.0
import dataclasses
import random

import pytest

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs.xdr import Packer
from gvfs_openstack.nfs.xdr import Unpacker
from tests.unit import samples


def test_every_nfs3_procedure_has_a_sample():
    assert set(samples.NFS_ARGS) == set(const.Nfs3Proc) == \
        set(nfs3.PROCEDURES)
    assert len(nfs3.PROCEDURES) == 22


@pytest.mark.parametrize("proc", list(const.Nfs3Proc))
def test_nfs3_arguments_round_trip(proc):
    args = samples.NFS_ARGS[proc]
    assert nfs3.decode_args(proc, nfs3.encode_args(proc, args)) == args


@pytest.mark.parametrize("proc", list(const.Nfs3Proc))
def test_nfs3_results_round_trip(proc):
    for res in samples.NFS_RESULTS[proc]:
        data = nfs3.encode_res(proc, res)
        assert len(data) % 4 == 0
        assert nfs3.decode_res(proc, data) == res


@pytest.mark.parametrize("proc", list(const.MountProc))
def test_mount3_round_trip(proc):
    args = samples.MOUNT_ARGS[proc]
    assert mount3.decode_args(proc, mount3.encode_args(proc, args)) == args
    for res in samples.MOUNT_RESULTS[proc]:
        assert mount3.decode_res(proc, mount3.encode_res(proc, res)) == res


def test_read_reply_layout_matches_rfc1813():
    # status, post_op_attr (absent), count, eof, opaque data.
    res = nfs3.Result(0, nfs3.ReadOk(None, 3, True, b"abc"))
    assert nfs3.encode_res(const.Nfs3Proc.READ, res) == (
        b"\0\0\0\0" b"\0\0\0\0" b"\0\0\0\x03" b"\0\0\0\x01"
        b"\0\0\0\x03abc\0")


def test_file_handle_longer_than_64_bytes_is_refused():
    data = nfs3.encode_args(const.Nfs3Proc.GETATTR,
                            nfs3.GetattrArgs(b"x" * 64))
    assert nfs3.decode_args(const.Nfs3Proc.GETATTR, data).object == b"x" * 64
    hostile = b"\0\0\0\x41" + b"x" * 68
    with pytest.raises(ProtocolError):
        nfs3.decode_args(const.Nfs3Proc.GETATTR, hostile)


def test_unknown_enum_value_is_a_protocol_error():
    data = bytearray(nfs3.encode_args(const.Nfs3Proc.WRITE,
                                      samples.NFS_ARGS[const.Nfs3Proc.WRITE]))
    # The stable_how field sits after fh (4+12), offset (8) and count (4).
    data[28:32] = b"\0\0\0\x09"
    with pytest.raises(ProtocolError):
        nfs3.decode_args(const.Nfs3Proc.WRITE, bytes(data))


def test_unknown_procedure_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        nfs3.decode_args(99, b"")


def _random_fattr(rng):
    u32, u64 = (lambda: rng.getrandbits(32)), (lambda: rng.getrandbits(64))
    return nfs3.Fattr(
        rng.choice(list(const.FileType)), u32(), u32(), u32(), u32(), u64(),
        u64(), nfs3.SpecData(u32(), u32()), u64(), u64(),
        nfs3.NfsTime(u32(), u32()), nfs3.NfsTime(u32(), u32()),
        nfs3.NfsTime(u32(), u32()))


def test_fast_fattr_codec_matches_the_declarative_one():
    rng = random.Random(3)
    fast, reference = nfs3.Fattr.CODEC, nfs3.Fattr.CODEC.reference
    for _ in range(500):
        value = _random_fattr(rng)
        packed = []
        for codec in (fast, reference):
            p = Packer()
            codec.pack(p, value)
            packed.append(p.get_buffer())
        assert packed[0] == packed[1] and len(packed[0]) == 84
        for codec in (fast, reference):
            u = Unpacker(packed[0])
            assert codec.unpack(u) == value
            u.done()


def test_fast_fattr_codec_refuses_what_the_declarative_one_does():
    value = _random_fattr(random.Random(4))
    p = Packer()
    nfs3.Fattr.CODEC.pack(p, value)
    wire = bytearray(p.get_buffer())
    wire[0:4] = (9).to_bytes(4, "big")  # No such ftype3.
    res = b"\0\0\0\0" + bytes(wire)  # GETATTR3resok: status 0, fattr3.
    with pytest.raises(ProtocolError):
        nfs3.decode_res(const.Nfs3Proc.GETATTR, res)
    with pytest.raises(ProtocolError):
        nfs3.decode_res(const.Nfs3Proc.GETATTR, res[:-1])
    negative = dataclasses.replace(value, mode=-1)
    with pytest.raises(ValueError):
        nfs3.Fattr.CODEC.pack(Packer(), negative)
