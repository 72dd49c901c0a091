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
        "exports = /srv/images\n" % allowed)
    helper = os.path.join(os.path.dirname(sys.executable), "privsep-helper")
    caller = tmp_path / "caller.conf"
    # The caller's own file allows everything: it must not matter.
    caller.write_text(
        "[gvfs_openstack_privileged]\n"
        "helper_command = %s --config-file %s\n"
        "mount_bases = %s,%s\n"
        "exports = /srv/images,/etc\n" % (helper, daemon, allowed, other))
    return {"allowed": str(allowed), "other": str(other),
            "caller": str(caller)}


def _ask(configs, calls):
    out = subprocess.run(
        [sys.executable, "-c", _CALLER, configs["caller"], json.dumps(calls)],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_the_daemon_refuses_what_its_own_configuration_does_not_allow(
        configs):
    options = "vers=3,proto=tcp,port=1,mountport=1,nolock,retry=0"
    share = "127.0.0.1:/srv/images"
    results = _ask(configs, {
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
    # Allowed: the daemon ran mount with exactly these arguments, and
    # the kernel's NFS (absent here, or no server on port 1) failed it.
    kind, message = results["allowed"]
    assert kind == "ProcessExecutionError", results["allowed"]
    assert "mount -t nfs -o %s %s %s" % (
        options, share, os.path.join(configs["allowed"], "m")) in message
