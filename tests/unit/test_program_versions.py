# SPDX-License-Identifier: Apache-2.0
"""Every program answers ``--version`` with the installed release.

Run as an operator runs them (a process each, ``--version`` alone: no
configuration file, no subcommand), they print pbr's version of the
distribution and exit 0.
"""

from importlib import metadata
import subprocess
import sys

import pytest

from gvfs_openstack import version

PROGRAMS = ["proxy", "conductor", "api", "manage", "status", "meta"]


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_program_prints_its_version(program, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c",
         "import sys; from gvfs_openstack.cmd import %s; "
         "sys.exit(%s.main())" % (program, program), "--version"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == version.string()


def test_the_version_is_the_installed_distributions():
    assert version.string() == metadata.version("gvfs-openstack")
