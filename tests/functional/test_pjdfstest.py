# SPDX-License-Identifier: Apache-2.0
"""pjdfstest on the FUSE mount: no request hangs, every failure explained.

Both configurations mount through a caching tcp chain to NFS-Ganesha.
The default all-squash map shows what users of a shared file account get;
the identity-preserving one (ids passed through, root allowed, requests
made as their callers with the kernel checking permissions) shows the
mount's own POSIX semantics.  Each failing test case must be listed in
``pjdfstest-expected.ini`` with its reason; a new failure, a listed case
that passes, or a run that hangs fails here.
"""

import os
import tempfile

import pytest

from gvfs_lab import pjdfstest
from gvfs_lab import topology

EXPECTED = pjdfstest.ExpectedFailures(os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "pjdfstest-expected.ini"))

#: Seconds a whole run may take: about 20 on two cores; more is a hang.
RUN_TIMEOUT = 600


class IdentityPreservingLab(topology.Lab):
    """The lab with a server proxy that passes uids and gids through.

    And a Ganesha that does too (root's included): pjdfstest checks the
    mount's own POSIX semantics, chown and root's rights among them.
    """

    squash_all = False

    def _server_sections(self):
        sections = super()._server_sections()
        sections["server"].update(squash_unmapped="false",
                                  allow_root="true")
        return sections


CONFIGURATIONS = {
    "all-squash": (topology.Lab, {}),
    "identity-preserving": (IdentityPreservingLab,
                            {"identity": "caller", "allow_other": "true"}),
}


@pytest.fixture(scope="module")
def pjdfstest_binary():
    return pjdfstest.binary()


@pytest.mark.parametrize("configuration", sorted(CONFIGURATIONS))
def test_pjdfstest_failures_are_the_expected_ones(
        configuration, pjdfstest_binary, tmp_path):
    lab_class, mount_options = CONFIGURATIONS[configuration]
    # pjdfstest binds Unix sockets in the mount: their paths must fit in
    # sun_path's 108 bytes, which pytest's own temporary paths do not.
    mountpoint = tempfile.mkdtemp(prefix="pjd-", dir="/tmp")
    with lab_class(str(tmp_path / "lab"), tunnel="tcp",
                   cache={"capacity_mb": 64}) as lab:
        mount = lab.mount(mountpoint, **mount_options)
        # Open to the users pjdfstest switches to.
        where = os.path.join(mount.mountpoint, "pjdfstest")
        os.mkdir(where)
        os.chmod(where, 0o777)
        run = pjdfstest.run(where, str(tmp_path), RUN_TIMEOUT)
        # Still answering after the suite: nothing it did wedged the
        # mount.
        assert os.listdir(mount.mountpoint)
    os.rmdir(mountpoint)

    assert len(run.outcomes) > 350, run.output[-3000:]
    expected = EXPECTED.of(configuration)
    new = sorted(run.failed() - set(expected))
    assert not new, "failures not in pjdfstest-expected.ini:\n" + "\n".join(
        "%s\n%s" % (name, run.why(name)) for name in new)
    passing = sorted(name for name in expected
                     if run.outcomes.get(name) == "ok"
                     and not EXPECTED.may_pass(configuration, name))
    assert not passing, ("listed in pjdfstest-expected.ini but passed "
                         "(remove them): %s" % ", ".join(passing))
    unknown = sorted(set(expected) - set(run.outcomes))
    assert not unknown, "not pjdfstest %s test cases: %s" % (
        pjdfstest.VERSION, ", ".join(unknown))
