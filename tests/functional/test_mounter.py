# SPDX-License-Identifier: Apache-2.0
"""The mount interface's ``fuse`` kind on the lab: mount on demand, and
find and replace a mount that died or hangs."""

import os
import signal
import subprocess
import time

import pytest

from gvfs_lab import slowness
from gvfs_openstack import exceptions
from gvfs_openstack.mount import mounter


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp")


@pytest.fixture
def fuse(tmp_path):
    made = mounter.FuseMounter(str(tmp_path / "mounts"), io_timeout=3)
    yield made
    for path in list(made.processes):
        made.unmount(path)


def share(lab):
    return mounter.Share("127.0.0.1", lab.client_proxy.port, lab.export)


def _written_through(path, name):
    """A file written through the mount at ``path``, for its successor.

    Through the mount, not beside the server: Ganesha caches directory
    entries and does not see what is written behind its back.
    """
    with open(os.path.join(path, name), "w") as f:
        f.write("through the mount")
    return name


def test_ensure_mounts_once_and_reuses_the_mount(lab, fuse):
    path = fuse.ensure(share(lab))
    assert mounter.is_mounted(path)
    with open(os.path.join(path, "via-mounter"), "w") as f:
        f.write("ok")
    assert open(os.path.join(lab.export, "via-mounter")).read() == "ok"
    first = fuse.processes[path]
    assert fuse.ensure(share(lab)) == path
    assert fuse.processes[path] is first


def test_a_dead_mount_is_replaced(lab, fuse):
    path = fuse.ensure(share(lab))
    name = _written_through(path, "seen-after-death")
    fuse.processes[path].kill()
    fuse.processes[path].wait(30)
    with pytest.raises(OSError):
        os.listdir(path)    # ENOTCONN: the FUSE process is gone
    with pytest.raises(exceptions.MountUnhealthy):
        mounter.check_health(path, 3)
    assert fuse.ensure(share(lab)) == path
    assert name in os.listdir(path)


def test_a_mount_killed_as_it_starts_exits(lab, tmp_path):
    """Killed while the first requests to it are unanswered, it exits.

    Had a thread of it been waiting on its own mount (as a stat of the
    mount point to learn that INIT was answered did), the kernel would
    wait out that request forever and the process would never end.  The
    client proxy is stopped as the mount appears, so that any request
    the daemon has read stays unanswered when the kill lands.
    """
    made = mounter.FuseMounter(str(tmp_path / "mounts"), io_timeout=3)
    path = made.mount_point(share(lab))
    for _ in range(3):
        os.makedirs(path, exist_ok=True)
        child = subprocess.Popen(made.command(share(lab), path),
                                 stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        made.processes[path] = child
        try:
            deadline = time.monotonic() + slowness.scaled(30)
            while not mounter.is_mounted(path):
                assert child.poll() is None and time.monotonic() < deadline
            lab.client_proxy.process.signal(signal.SIGSTOP)
            time.sleep(0.5)
            child.kill()
            child.wait(30)
        finally:
            lab.client_proxy.process.signal(signal.SIGCONT)
            # Aborts the connection first: frees a daemon stuck as above.
            made.unmount(path)


def test_a_hung_mount_is_replaced(lab, fuse):
    path = fuse.ensure(share(lab))
    name = _written_through(path, "seen-after-hang")
    hung = fuse.processes[path]
    hung.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(exceptions.MountUnhealthy) as e:
            mounter.check_health(path, 1)
        assert "hung" in str(e.value)
        assert fuse.ensure(share(lab)) == path
        assert fuse.processes[path] is not hung
        assert hung.poll() is not None      # the hung one was ended
        assert name in os.listdir(path)
    finally:
        if hung.poll() is None:
            hung.kill()


def test_an_unreachable_proxy_is_a_clear_error(lab, fuse):
    with pytest.raises(exceptions.MountFailed) as e:
        fuse.ensure(mounter.Share("127.0.0.1", 1, lab.export))
    assert "127.0.0.1:%s" % lab.export in str(e.value)
    assert "Connect call failed" in str(e.value) or "refused" in str(e.value)
