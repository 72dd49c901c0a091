# SPDX-License-Identifier: Apache-2.0
"""The systemd units shipped under ``etc/systemd`` pass
``systemd-analyze verify``.

verify also checks that every ``Exec*`` command exists, so the units are
verified with the project's commands pointed at this environment's
scripts (the units name ``/usr/bin``, where distribution packages put
them); nothing else in them is changed.
"""

import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
UNITS = os.path.join(REPO, "etc", "systemd")
# The template units, each with the instance an operator would start.
INSTANCES = {"gvfs-proxy@.service": ["server", "client"],
             "gvfs-mount@.service": ["var-lib-gvfs-mnt"]}


def _installed_copies(target):
    bindir = os.path.dirname(sys.executable)
    names = []
    for unit in sorted(os.listdir(UNITS)):
        with open(os.path.join(UNITS, unit)) as f:
            text = f.read()
        assert "/usr/bin/gvfs-" in text, unit
        text = text.replace("/usr/bin/gvfs-", bindir + "/gvfs-")
        for instance in INSTANCES.get(unit, [None]):
            name = unit.replace("@.", "@%s." % instance) if instance \
                else unit
            with open(os.path.join(target, name), "w") as f:
                f.write(text)
            names.append(name)
    return names


def test_every_unit_passes_systemd_analyze_verify(tmp_path):
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing: run tools/install-deps.sh "
                    "(bindep.txt lists systemd)")
    names = _installed_copies(str(tmp_path))
    assert set(names) >= {"gvfs-proxy@server.service",
                          "gvfs-proxy@client.service",
                          "gvfs-mount@var-lib-gvfs-mnt.service",
                          "gvfs-conductor.service", "gvfs-api.service"}
    result = subprocess.run(
        [analyze, "verify", "--man=no"] + [os.path.join(str(tmp_path), n)
                                           for n in names],
        capture_output=True, text=True, timeout=120)
    # Units this one orders itself against but that are not installed
    # here (glance-api, nova-compute, rabbitmq-server, ...) are fine.
    problems = [line for line in
                (result.stdout + result.stderr).splitlines()
                if line.strip() and not re.search(
                    r"(Failed to load|Unit \S+ not found|"
                    r"Cannot add dependency job)", line)]
    assert result.returncode == 0 and not problems, problems


def test_a_broken_unit_is_caught(tmp_path):
    """verify is strict enough to fail on what an operator could break."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.fail("systemd-analyze is missing")
    unit = tmp_path / "gvfs-broken.service"
    unit.write_text("[Service]\nExecStart=/nonexistent/gvfs-proxy serve\n")
    result = subprocess.run([analyze, "verify", "--man=no", str(unit)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert "is not executable" in result.stdout + result.stderr
