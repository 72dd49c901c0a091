# SPDX-License-Identifier: Apache-2.0
"""A program run without its role's extra names the extra, in one line.

Every node gets every console script; each runs here as its console
script does (:mod:`gvfs_openstack.cmd.entry`), in a process where one
module of its extra cannot be imported (``sys.modules[name] = None``,
which makes its import raise ``ModuleNotFoundError`` as a missing
distribution does).  ``tools/check_package.py`` runs every program in
each role's own virtualenv the same way.
"""

import subprocess
import sys

import pytest

#: (program, its arguments, the module made missing, the extra named).
CASES = [
    ("conductor", ["--version"], "sqlalchemy", "conductor"),
    ("manage", ["db", "version"], "alembic", "conductor"),
    ("status", ["upgrade", "check"], "oslo_upgradecheck", "conductor"),
    ("api", ["--version"], "keystonemiddleware", "api"),
    ("proxy", ["mount", "--proxy", "127.0.0.1:1", "--export", "/x",
               "MOUNTPOINT"], "pyfuse3", "fuse"),
]


@pytest.mark.parametrize("program,args,missing,extra", CASES)
def test_the_missing_extra_is_named(tmp_path, program, args, missing,
                                    extra):
    args = [str(tmp_path) if a == "MOUNTPOINT" else a for a in args]
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c",
         "import sys; sys.modules[%r] = None; "
         "sys.argv[0] = 'gvfs-%s'; "
         "from gvfs_openstack.cmd import entry; sys.exit(entry.%s())"
         % (missing, program, program)] + args,
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, (done.stdout, done.stderr[-2000:])
    assert done.stderr.strip().splitlines() == [
        "gvfs-%s: module %s is missing: install the '%s' extra "
        "(pip install 'gvfs-openstack[%s]')" % (program, missing, extra,
                                                extra)]


def test_a_module_no_extra_provides_is_a_real_error(tmp_path):
    """Only a dependency of an extra is reported so: not our own bugs."""
    done = subprocess.run(
        [sys.executable, "-W", "ignore", "-c",
         "import sys; sys.modules['gvfs_openstack.conductor.service'] = "
         "None; from gvfs_openstack.cmd import entry; "
         "sys.exit(entry.conductor())", "--version"],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert "ModuleNotFoundError" in done.stderr
    assert "gvfs_openstack.conductor.service" in done.stderr
    assert "install the" not in done.stderr
