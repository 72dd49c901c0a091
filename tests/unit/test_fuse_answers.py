# SPDX-License-Identifier: Apache-2.0
"""Every FUSE request handler answers the kernel, whatever it raises."""

import asyncio
import errno

import pyfuse3
import pytest

from gvfs_openstack.fuse import counters as fuse_counters
from gvfs_openstack.fuse import fusefs
from gvfs_openstack.fuse import inodes
from gvfs_openstack.fuse import nfsattr
from gvfs_openstack.fuse import session
from gvfs_openstack.nfs.errors import LocalProtocolError


@pytest.mark.parametrize("error,expected", [
    (RuntimeError("a bug"), errno.EIO),
    (KeyError(7), errno.EIO),
    (session.OperationFailed(errno.EACCES, "no"), errno.EACCES),
    (inodes.StaleInode(5), errno.ESTALE),
    (nfsattr.NotRepresentable("2106"), errno.EOVERFLOW),
    (LocalProtocolError("cannot encode"), errno.EINVAL),
    (TimeoutError(), errno.ETIMEDOUT),
    (PermissionError(errno.EPERM, "no"), errno.EPERM),
])
def test_a_failing_handler_answers_an_errno(error, expected):
    @fusefs._answers_every_request
    class Ops:
        counters = fuse_counters.KernelCounters()

        def _credential(self, args):
            return None     # As the daemon itself.

        async def getattr(self, inode, ctx=None):
            raise error

    with pytest.raises(pyfuse3.FUSEError) as e:
        asyncio.run(Ops().getattr(1))
    assert e.value.errno == expected
    assert Ops.counters.requests == {"getattr": 1}
    assert Ops.counters.failures == {errno.errorcode[expected]: 1}


def test_every_handler_of_the_mount_is_wrapped():
    for name in fusefs._REQUESTS:
        handler = vars(fusefs.GvfsFuse).get(name)
        if handler is not None:
            assert handler.__wrapped__ is not None, name


@pytest.mark.parametrize("ns", [-1, (1 << 32) * 10**9])
def test_times_nfsv3_cannot_carry_are_refused(ns):
    with pytest.raises(nfsattr.NotRepresentable):
        nfsattr.nfs_time(ns)


def test_the_last_time_nfsv3_carries_is_kept():
    t = nfsattr.nfs_time((1 << 32) * 10**9 - 1)
    assert (t.seconds, t.nseconds) == ((1 << 32) - 1, 999_999_999)


def test_an_nfs_time_in_nanoseconds_is_what_nfs_time_was_given():
    ns = 1_700_000_000 * 10**9 + 123_456_789
    assert nfsattr.nfs_time(ns).nanoseconds == ns
