# SPDX-License-Identifier: Apache-2.0
"""The privsep daemon of kernel NFS mounts checks against its own config.

A real ``privsep-helper`` started as oslo.privsep starts it for
glance-api or nova-compute, with its own configuration file; the caller
(a child process with another configuration, as a compromised service
might have) asks for mounts.  The kernel NFS mount itself cannot run here
(no NFS in this kernel, or no server on the port): a mount the daemon
allows reaches ``mount`` with the exact arguments, and fails there.
"""

import json
import os
import subprocess
import sys

import pytest

_CALLER = """
import json, sys
from oslo_config import cfg
from gvfs_openstack.mount import privileged
cfg.CONF(["--config-file", sys.argv[1]], project="gvfs-test")
results = {}
for name, call in json.loads(sys.argv[2]).items():
    try:
        getattr(privileged, call[0])(*call[1:])
    except Exception as e:
        results[name] = [type(e).__name__, str(e)]
    else:
        results[name] = ["ok", ""]
print(json.dumps(results))
"""


@pytest.fixture
def configs(tmp_path):
    allowed = tmp_path / "allowed"
    other = tmp_path / "other"
    allowed.mkdir()
    other.mkdir()
    daemon = tmp_path / "daemon.conf"
    daemon.write_text(
        "[gvfs_openstack_privileged]\n"
        "mount_bases = %s\n"
        "proxy_ports = 1\n"
        "exports = /srv/images\n" % allowed)
    helper = os.path.join(os.path.dirname(sys.executable), "privsep-helper")
    caller = tmp_path / "caller.conf"
    # The caller's own file allows everything: it must not matter.
    caller.write_text(
        "[gvfs_openstack_privileged]\n"
        "helper_command = %s --config-file %s\n"
        "mount_bases = %s,%s\n"
        "proxy_ports = 1,111,2049\n"
        "exports = /srv/images,/etc\n" % (helper, daemon, allowed, other))
    return {"allowed": str(allowed), "other": str(other),
            "caller": str(caller), "daemon": str(daemon)}


def _ask(configs, calls):
    out = subprocess.run(
        [sys.executable, "-c", _CALLER, configs["caller"], json.dumps(calls)],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_daemon_refuses_what_its_own_configuration_does_not_allow(
        configs):
    options = ("vers=3,proto=tcp,port=1,mountport=1,nolock,nosuid,nodev,"
               "retry=0")
    share = "127.0.0.1:/srv/images"
    os.mkdir(os.path.join(configs["allowed"], "m"))
    # Planted in the base by the service: a mount or unmount through it
    # would land on /etc or /proc.
    os.symlink("/etc", os.path.join(configs["allowed"], "etc"))
    os.symlink("/proc", os.path.join(configs["allowed"], "proc"))
    results = _ask(configs, {
        "through a link": ["mount_nfs", share,
                           os.path.join(configs["allowed"], "etc"),
                           options],
        "unmount through a link": ["unmount",
                                   os.path.join(configs["allowed"],
                                                "proc")],
        "another port": ["mount_nfs", share,
                         os.path.join(configs["allowed"], "m"),
                         options.replace("port=1,mountport=1",
                                         "port=2049,mountport=2049")],
        "setuid files": ["mount_nfs", share,
                         os.path.join(configs["allowed"], "m"),
                         options.replace("nosuid,", "")],
        "other base": ["mount_nfs", share,
                       os.path.join(configs["other"], "m"), options],
        "other export": ["mount_nfs", "127.0.0.1:/etc",
                         os.path.join(configs["allowed"], "m"), options],
        "remote host": ["mount_nfs", "192.0.2.9:/srv/images",
                        os.path.join(configs["allowed"], "m"), options],
        "unmount elsewhere": ["unmount", "/proc"],
        "allowed": ["mount_nfs", share,
                    os.path.join(configs["allowed"], "m"), options],
    })
    assert results["other base"][0] == "ValueError"
    assert "mount_bases" in results["other base"][1]
    assert results["other export"][0] == "ValueError"
    assert "exports" in results["other export"][1]
    assert results["remote host"][0] == "ValueError"
    assert "proxy_hosts" in results["remote host"][1]
    assert results["unmount elsewhere"][0] == "ValueError"
    assert results["through a link"] == [
        "ValueError", "%r is not a directory (a link is refused)"
        % os.path.join(configs["allowed"], "etc")]
    assert results["unmount through a link"][0] == "ValueError"
    assert "nothing is mounted" in results["unmount through a link"][1]
    assert results["another port"][0] == "ValueError"
    assert "proxy_ports [\'1\']" in results["another port"][1]
    assert results["setuid files"] == [
        "ValueError", "mount option nosuid is required: %r"
        % options.replace("nosuid,", "")]
    assert os.path.ismount("/proc") and not os.path.ismount(
        os.path.join(configs["allowed"], "m"))
    # Allowed: the daemon ran mount with exactly these arguments, and
    # the kernel's NFS (absent here, or no server on port 1) failed it.
    kind, message = results["allowed"]
    assert kind == "ProcessExecutionError", results["allowed"]
    assert "mount -t nfs -o %s %s %s" % (
        options, share, os.path.join(configs["allowed"], "m")) in message


def test_limits_only_root_may_write(configs):
    # The caller picks the daemon's --config-file (helper_command): one
    # it can write would set the daemon's limits.
    os.chown(configs["daemon"], 65534, 65534)
    share = "127.0.0.1:/srv/images"
    results = _ask(configs, {"own limits": [
        "mount_nfs", share, os.path.join(configs["allowed"], "m"),
        "vers=3,port=1,mountport=1,nosuid,nodev"]})
    kind, message = results["own limits"]
    assert kind == "ValueError"
    assert message == ("%s, which the privileged daemon read its limits "
                       "from, is not owned and only writable by root"
                       % configs["daemon"])
