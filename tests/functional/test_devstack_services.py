# SPDX-License-Identifier: Apache-2.0
"""What the devstack plugin starts works, on real parts.

``tests/unit/test_devstack.py`` checks what the plugin writes; here the
plugin's ``stack`` phases run the same way (devstack's helpers stood in),
and then the very commands it handed to ``run_process`` are started:
NFS-Ganesha with the ``ganesha.conf`` it wrote, the GridFTP server, the
server and client proxies with their generated configurations (over a
``tcp`` tunnel on loopback), and the FUSE mount of the export.  A file
written through the mount must arrive on the export byte for byte, owned
by the file account the server proxy squashes to, and the plugin's
GridFTP server must serve it back.
"""

import os
import pwd
import shlex
import subprocess
import sys

import pytest

from gvfs_lab import ganesha
from gvfs_lab import process
from gvfs_openstack.mount import mounter
from tests.unit.test_devstack import Devstack


def _argv(devstack, command):
    """The command, with the plugin's programs taken from this venv."""
    argv = shlex.split(command)
    if os.path.dirname(argv[0]) == devstack.bin_dir:
        argv[0] = os.path.join(os.path.dirname(sys.executable),
                               os.path.basename(argv[0]))
    return argv


@pytest.fixture
def stacked(tmp_path):
    """The plugin's storage services, started from its own commands."""
    ports = [process.free_port() for _ in range(5)]
    data_ports = process.free_port_range(8)
    devstack = Devstack(
        tmp_path, STACK_USER="nobody", SERVICE_HOST="127.0.0.1",
        GVFS_TUNNEL="tcp", GVFS_DTN_NFS_PORT=str(ports[0]),
        GVFS_DTN_MOUNT_PORT=str(ports[1]),
        GVFS_SERVER_PROXY_PORT=str(ports[2]),
        GVFS_CLIENT_PROXY_PORT=str(ports[3]),
        GVFS_GRIDFTP_PORT=str(ports[4]),
        GVFS_GRIDFTP_DATA_PORTS="%d,%d" % (data_ports, data_ports + 7),
        ENABLED_SERVICES="g-api,n-cpu",
        DISABLED_SERVICES="gvfs-conductor")
    for phase in ("install", "post-config"):
        devstack.phase("stack", phase)
    commands = devstack.running()
    # Ganesha acts as the squashed account, which must reach the export.
    process.let_others_traverse(devstack.env["GVFS_DTN_EXPORT"])
    # The stand-in "mounted" the export; the real mount takes its place.
    os.rmdir(os.path.join(devstack.env["DATA_DIR"], "gvfs-mnt", "images"))
    logs = str(tmp_path / "logs")
    os.makedirs(logs)
    started = []
    try:
        started.append(ganesha.Rpcbind(logs))
        for name, ports_of in (("gvfs-nfs", ports[:2]),
                               ("gvfs-gridftp", ports[4:5]),
                               ("gvfs-server", ports[2:3]),
                               ("gvfs-client", ports[3:4])):
            started.append(process.start_listening(
                name, _argv(devstack, commands[name]),
                os.path.join(logs, name + ".log"), ports_of))
        mountpoint = _argv(devstack, commands["gvfs-mount"])[-1]
        mount = process.ManagedProcess(
            "gvfs-mount", _argv(devstack, commands["gvfs-mount"]),
            os.path.join(logs, "gvfs-mount.log"))
        started.append(mount)
        if not mounter.wait_for_mount(mountpoint, mount, 30.0):
            pytest.fail("the plugin's gvfs-mount did not mount: see %s"
                        % os.path.join(logs, "gvfs-mount.log"))
        yield devstack, mountpoint, logs, ports[4]
    finally:
        for part in reversed(started):
            part.stop()
        mountpoint = os.path.join(devstack.env["DATA_DIR"], "gvfs-mnt")
        if mounter.is_mounted(mountpoint):
            mounter.detach_fuse(mountpoint)


def test_a_file_written_through_the_mount_lands_on_the_export(stacked):
    devstack, mountpoint, logs, gridftp_port = stacked
    data = os.urandom(8 * 1024 * 1024 + 123)
    path = os.path.join(mountpoint, "images", "devstack-image.raw")
    with open(path, "wb") as f:
        f.write(data)
        os.fsync(f.fileno())
    on_export = os.path.join(devstack.env["GVFS_DTN_EXPORT"], "images",
                             "devstack-image.raw")
    with open(on_export, "rb") as f:
        assert f.read() == data
    nobody = pwd.getpwnam("nobody")
    assert os.stat(on_export).st_uid == nobody.pw_uid
    with open(path, "rb") as f:
        assert f.read() == data
    # The export's directories the plugin made are what the mount shows.
    assert sorted(os.listdir(mountpoint)) == ["images", "staging"]
    # The plugin's GridFTP server serves the export (as the migration's
    # DTN-to-DTN stage reads it).
    fetched = os.path.join(logs, "fetched.raw")
    subprocess.run(["globus-url-copy", "-q", "ftp://127.0.0.1:%d%s" % (
        gridftp_port, on_export), "file://" + fetched], check=True,
        timeout=120, capture_output=True)
    with open(fetched, "rb") as f:
        assert f.read() == data
    # Ganesha ignores what it does not understand, with a warning only.
    with open(os.path.join(logs, "gvfs-nfs.log")) as f:
        complaints = [line for line in f if "config_errs_to_log" in line]
    assert not complaints, complaints
