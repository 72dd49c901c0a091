# SPDX-License-Identifier: Apache-2.0
"""A write by anyone but root clears set-user-ID and set-group-ID bits.

As POSIX file systems do: otherwise whoever may write a set-user-ID
program keeps it privileged after changing it (issue 43, item 13).  Both
mount configurations, through the real chain (FUSE mount, client proxy,
server proxy, NFS-Ganesha): all-squash, where every caller is the file
account on the DTN, and identity-preserving, where the kernel asks the
mount to clear the bits as the writer, whom the NFS server does not let
change another user's mode.  The writers are other local accounts,
switched to in a child process.

No client sets the bits through the server proxy any more (it clears
them: ``test_set_id_files.py``), so each program gets them on the DTN's
disk, as a file restored there or made by other means would have them.
"""

import os
import stat
import subprocess
import tempfile

import pytest

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from tests.functional.test_pjdfstest import CONFIGURATIONS

OWNER = 2001
WRITER = 2002
PRIVILEGED = stat.S_ISUID | stat.S_ISGID | 0o777


def _as(uid, command):
    """The shell ``command`` run by ``uid`` (and gid ``uid``)."""
    def become():
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    return subprocess.run(["/bin/sh", "-c", command], preexec_fn=become,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module", params=sorted(CONFIGURATIONS))
def mounted(request, tmp_path_factory):
    lab_class, mount_options = CONFIGURATIONS[request.param]
    base = tmp_path_factory.mktemp("privileges-" + request.param)
    mountpoint = tempfile.mkdtemp(prefix="priv-", dir="/tmp")
    with lab_class(str(base / "lab"), tunnel="tcp",
                   cache={"capacity_mb": 64}) as lab:
        # Other local accounts are the writers: open to them.
        options = dict(mount_options, allow_other="true")
        mount = lab.mount(mountpoint, **options)
        where = os.path.join(mount.mountpoint, "programs")
        os.mkdir(where)
        os.chmod(where, 0o777)
        yield request.param, where, os.path.join(lab.export, "programs")
    os.rmdir(mountpoint)


def _program(mounted, name):
    """A set-user-ID, set-group-ID program that anyone may write.

    Owned by :data:`OWNER` where identities pass; with all-squash every
    file is the file account's (chown is refused there).  Made on the
    DTN's disk, as the server proxy lets no client set the bits.
    """
    configuration, where, on_disk = mounted
    made = os.path.join(on_disk, name)
    with open(made, "wb") as f:
        f.write(b"#!/bin/sh\necho privileged\n")
    owner = (FILE_UID, FILE_GID) if configuration == "all-squash" \
        else (OWNER, OWNER)
    os.chown(made, *owner)
    os.chmod(made, PRIVILEGED)     # After the chown, which clears them.
    # Looked up through the mount for the first time only now.
    path = os.path.join(where, name)
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == PRIVILEGED
    assert st.st_uid != WRITER
    return path


def test_a_write_by_another_user_clears_the_bits(mounted):
    path = _program(mounted, "written")
    # Before, the kernel's request to clear the bits went as the writer,
    # and the NFS server refused it: the write failed with EPERM.
    done = _as(WRITER, "printf '#!/bin/sh\\necho mine!' | "
               "dd of=%s conv=notrunc status=none" % path)
    assert done.returncode == 0, done.stderr
    mode = stat.S_IMODE(os.stat(path).st_mode)
    assert not mode & (stat.S_ISUID | stat.S_ISGID), oct(mode)
    assert mode == 0o777
    with open(path, "rb") as f:
        assert f.read().startswith(b"#!/bin/sh\necho mine!")


def test_a_truncate_by_another_user_clears_the_bits(mounted):
    path = _program(mounted, "truncated")
    done = _as(WRITER, "truncate -s 10 %s" % path)
    assert done.returncode == 0, done.stderr
    st = os.stat(path)
    assert stat.S_IMODE(st.st_mode) == 0o777
    assert st.st_size == 10


def test_a_write_by_the_owner_clears_the_bits_too(mounted):
    path = _program(mounted, "owners")
    done = _as(os.stat(path).st_uid, "echo '# more' >> %s" % path)
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o777


def test_another_user_still_cannot_chmod_it(mounted):
    """Only the kernel's own drop passes: a chmod is the owner's."""
    path = _program(mounted, "chmodded")
    done = _as(WRITER, "chmod 0777 %s" % path)
    assert done.returncode != 0
    assert "Operation not permitted" in done.stderr, done.stderr
    assert stat.S_IMODE(os.stat(path).st_mode) == PRIVILEGED
