# SPDX-License-Identifier: Apache-2.0
"""A mount acting as its callers sends their uid, gid and groups."""

import os

from gvfs_openstack.fuse import callers
from gvfs_openstack.nfs import rpc


class _Context:
    def __init__(self, uid, gid, pid):
        self.uid, self.gid, self.pid = uid, gid, pid


def _proc_with(tmp_path, pid, groups_line):
    os.makedirs(tmp_path / str(pid))
    (tmp_path / str(pid) / "status").write_text(
        "Name:\tpjdfstest\nUid:\t1000\t1000\t1000\t1000\n%s\n" % groups_line)
    return str(tmp_path)


def test_credential_carries_the_callers_groups(tmp_path):
    proc = _proc_with(tmp_path, 77, "Groups:\t27 100 1000")
    credential = callers.Callers("node", proc).of(_Context(1000, 1000, 77))
    assert rpc.AuthSys.from_opaque(credential) == \
        rpc.AuthSys(1000, 1000, (27, 100), "node")


def test_at_most_sixteen_groups_fit(tmp_path):
    proc = _proc_with(tmp_path, 78, "Groups:\t" + " ".join(
        str(g) for g in range(1, 40)))
    credential = callers.Callers("node", proc).of(_Context(5, 5, 78))
    assert len(rpc.AuthSys.from_opaque(credential).gids) == 16


def test_a_caller_gone_before_its_request_has_no_groups(tmp_path):
    credential = callers.Callers("node", str(tmp_path)).of(
        _Context(1000, 100, 4242))
    assert rpc.AuthSys.from_opaque(credential) == \
        rpc.AuthSys(1000, 100, (), "node")
