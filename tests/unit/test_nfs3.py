import pytest

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
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
