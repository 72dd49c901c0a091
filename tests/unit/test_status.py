# SPDX-License-Identifier: Apache-2.0
"""``gvfs-status upgrade check`` on a real sqlite job store."""

import json
import subprocess
import sys

import pytest

from gvfs_openstack.cmd import manage

CONDUCTOR = """
[conductor]
sites = east,west
local_site = east
{conductor}
[database]
connection = sqlite:///{store}
[site:east]
auth_type = none
glance_endpoint = http://127.0.0.1:9292
dtn_export = /srv/images
{east}
[site:west]
auth_type = none
glance_endpoint = http://127.0.0.1:9393
dtn_export = /export
"""


def _config(tmp_path, conductor="", east=""):
    path = tmp_path / "gvfs-conductor.conf"
    path.write_text(CONDUCTOR.format(store=tmp_path / "jobs.sqlite",
                                     conductor=conductor, east=east))
    return str(path)


def _status(config, *flags):
    """The real command on ``config``, whatever its exit code."""
    return subprocess.run(
        [sys.executable, "-m", "gvfs_openstack.cmd.status", "--config-file",
         config, "upgrade", "check", *flags], capture_output=True,
        text=True, timeout=120)


def _check(config):
    """(exit code, {check: (result, details)}) of the JSON report."""
    done = _status(config, "--json")
    report = json.loads(done.stdout)
    return done.returncode, {c["check"]: (c["result"], c["details"])
                             for c in report["checks"]}


def test_a_store_at_the_newest_revision_with_safe_settings_passes(
        tmp_path):
    config = _config(tmp_path)
    assert manage.main(["--config-file", config, "db", "sync"]) == 0
    code, checks = _check(config)
    assert code == 0, checks
    assert checks["Job store schema"][0] == 0
    assert checks["Job store schema"][1].startswith(
        "The job store is at revision ")
    assert {name: result for name, (result, _) in checks.items()} == {
        "Job store schema": 0, "Deprecated options": 0, "Trusts": 0,
        "DTN identity": 0, "DTN links": 0}


def test_a_store_not_synced_fails_and_says_what_to_run(tmp_path):
    code, checks = _check(_config(tmp_path))
    assert code == 2
    result, details = checks["Job store schema"]
    assert result == 2
    assert details.startswith("The job store is at revision none (empty)")
    assert details.endswith("Run gvfs-manage db sync with the conductors "
                            "stopped.")


def test_a_store_that_cannot_be_opened_fails(tmp_path):
    config = _config(tmp_path)
    (tmp_path / "jobs.sqlite").mkdir()     # Not a database file.
    code, checks = _check(config)
    assert code == 2
    assert checks["Job store schema"][1].startswith(
        "Cannot read the job store: ")


@pytest.mark.parametrize("conductor, east, check, says", [
    ("job_store = sqlite:///{store}", "", "Deprecated options",
     "[conductor] job_store is deprecated"),
    ("require_trust = false", "", "Trusts",
     "[conductor] require_trust is off"),
    ("", "nfs_uid = 0", "DTN identity", "[site:east] nfs_uid = 0"),
    ("", "dtn_nfs_host = 192.0.2.7\ndtn_nfs_trusted_network = true",
     "DTN links", "[site:east] dtn_nfs_trusted_network: the conductor's "
     "NFS calls to that DTN are plain AUTH_SYS in clear"),
])
def test_unsafe_or_deprecated_settings_warn(tmp_path, conductor, east,
                                            check, says):
    config = _config(tmp_path, conductor.format(
        store=tmp_path / "jobs.sqlite"), east)
    assert manage.main(["--config-file", config, "db", "sync"]) == 0
    code, checks = _check(config)
    assert code == 1, checks
    result, details = checks[check]
    assert result == 1 and details.startswith(says), details
    assert all(r == 0 for name, (r, _) in checks.items() if name != check)


def test_plain_nfs_to_a_dtn_off_loopback_fails_the_check(tmp_path):
    """The release refuses such a site: say so before the upgrade."""
    config = _config(tmp_path, east="dtn_nfs_host = 192.0.2.7")
    assert manage.main(["--config-file", config, "db", "sync"]) == 0
    code, checks = _check(config)
    assert code == 2, checks
    result, details = checks["DTN links"]
    assert result == 2
    assert details.startswith(
        "Invalid configuration of [site:east] dtn_nfs_host: 192.0.2.7 is "
        "not a loopback address"), details
    assert "dtn_nfs_tls_cert" in details


# --- a proxy's file ---------------------------------------------------------

def _proxy_config(tmp_path, text):
    path = tmp_path / "gvfs-proxy.conf"
    path.write_text(text)
    return str(path)


SERVER = "[proxy]\nrole = server\n[listen]\nallowed_peers = 127.0.0.1\n"
CLIENT = "[proxy]\nrole = client\n[upstream]\nport = 20490\n"


def test_a_proxy_with_the_guides_settings_passes(tmp_path):
    for text in (SERVER, CLIENT, CLIENT + "tunnel = tcp\n"):
        code, checks = _check(_proxy_config(tmp_path, text))
        assert code == 0, checks
        # A proxy's checks, not the conductor's (no job store here).
        assert set(checks) == {"Proxy listener", "Root on the export",
                               "Tunnel"}


@pytest.mark.parametrize("text,check,result,says", [
    (SERVER + "[server]\nallow_root = true\n", "Root on the export", 1,
     "[server] allow_root = true: root on any node"),
    (CLIENT + "tunnel = tcp\nhost = 192.0.2.7\n", "Tunnel", 1,
     "[upstream] tunnel = tcp to 192.0.2.7: images and AUTH_SYS"),
    ("[proxy]\nrole = server\n", "Proxy listener", 2,
     "a server proxy with an empty allowed_peers serves every host"),
    ("[proxy]\nrole = server\n[listen]\ntrusted_network = true\n",
     "Proxy listener", 1,
     "a server proxy with an empty allowed_peers serves every host"),
    (CLIENT + "[listen]\nhost = 0.0.0.0\n", "Proxy listener", 2,
     "a plain TCP listener on 0.0.0.0 with an empty allowed_peers"),
])
def test_a_proxys_unsafe_settings_are_reported(tmp_path, text, check,
                                               result, says):
    code, checks = _check(_proxy_config(tmp_path, text))
    assert code == result, checks
    found, details = checks[check]
    assert found == result and details.startswith(says), details
    assert all(r == 0 for name, (r, _) in checks.items() if name != check)


def test_a_bad_role_is_a_clear_failure(tmp_path):
    done = _status(_proxy_config(tmp_path, "[proxy]\nrole = dtn\n"))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "role" in done.stderr and "dtn" in done.stderr, done.stderr
