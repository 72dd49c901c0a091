# SPDX-License-Identifier: Apache-2.0
"""The server proxy's set-ID clearing, on encoded NFSv3 arguments.

Every procedure that carries a sattr3 loses S_ISUID and S_ISGID from
its mode and keeps everything else byte for byte; calls without those
bits, or without a mode, are left alone (None: forwarded as they came).
"""

import pytest

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc as P
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.proxy import set_id

FH = b"\x01" * 32
WHERE = nfs3.DirOpArgs(FH, "name")


def _args(proc, mode):
    attrs = nfs3.Sattr(mode=mode, uid=7, size=0)
    if proc == P.SETATTR:
        return nfs3.SetattrArgs(FH, attrs, nfs3.NfsTime(5, 6))
    if proc == P.CREATE:
        return nfs3.CreateArgs(WHERE, nfs3.CreateHow(
            const.CreateMode.GUARDED, attrs))
    if proc == P.MKDIR:
        return nfs3.MkdirArgs(WHERE, attrs)
    if proc == P.SYMLINK:
        return nfs3.SymlinkArgs(WHERE, attrs, "target")
    if proc == "chr":
        return nfs3.MknodArgs(WHERE, nfs3.MknodData(
            const.FileType.NF3CHR,
            nfs3.DeviceData(attrs, nfs3.SpecData(1, 3))))
    return nfs3.MknodArgs(WHERE, nfs3.MknodData(const.FileType.NF3FIFO,
                                                attrs))


@pytest.mark.parametrize("case", [P.SETATTR, P.CREATE, P.MKDIR, P.SYMLINK,
                                  "chr", "fifo"])
def test_set_id_bits_are_cleared_and_nothing_else(case):
    proc = P.MKNOD if case in ("chr", "fifo") else case
    encoded = nfs3.encode_args(proc, _args(case, 0o7755))
    args, asked = set_id.cleared(proc, encoded)
    assert asked == 0o7755
    assert nfs3.decode_args(proc, args) == _args(case, 0o1755)


@pytest.mark.parametrize("mode", [None, 0o644, 0o1777, 0o755])
def test_lawful_modes_are_left_alone(mode):
    for proc in (P.SETATTR, P.MKDIR):
        assert set_id.cleared(proc, nfs3.encode_args(
            proc, _args(proc, mode))) is None


def test_an_exclusive_create_and_other_calls_are_left_alone():
    exclusive = nfs3.CreateArgs(WHERE, nfs3.CreateHow(
        const.CreateMode.EXCLUSIVE, verf=b"v" * 8))
    assert set_id.cleared(P.CREATE, nfs3.encode_args(
        P.CREATE, exclusive)) is None
    assert set_id.cleared(P.WRITE, b"not even decoded") is None


def test_garbled_arguments_are_refused():
    with pytest.raises(ProtocolError):
        set_id.cleared(P.SETATTR, b"\0\0")
