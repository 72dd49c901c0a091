# SPDX-License-Identifier: Apache-2.0
"""pjdfstest, the POSIX file system suite, built and run against a path.

The Rust rewrite of pjdfstest is published on crates.io: the lab builds
the pinned version with cargo into ``.tox/pjdfstest`` once and runs it
there after.  A debug build: 42 s on two cores instead of 64 s for an
optimised one, and the suite runs as fast (its time is the file
system's and its own pauses).  Its results are read from
its output, one line per test case: ``<name> ok|FAILED|skipped|...``.
"""

import configparser
import os
import re
import shutil
import subprocess

from gvfs_lab import process

VERSION = "0.2.2"

_REPO = os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))
_ROOT = os.path.join(_REPO, ".tox", "pjdfstest")

#: Features of the mounts under test, as pjdfstest names them: NFSv3
#: carries nanosecond times set by the client (utimensat, UTIME_NOW), and
#: the NFS server changes ctime on rename.
_CONFIG = """\
[features]
posix_fallocate = {}
rename_ctime = {}
utime_now = {}
utimensat = {}

[settings]
naptime = 0.01
allow_remount = false

[dummy_auth]
entries = [["nobody", "nogroup"], ["daemon", "daemon"]]
"""

_RESULT = re.compile(
    r"^(?P<name>\S+::\S+)\s+(?P<outcome>ok|FAILED|skipped)\s*$")


def binary():
    """The pjdfstest program, built from crates.io if need be."""
    found = shutil.which("pjdfstest")
    if found:
        return found
    built = os.path.join(_ROOT, "bin", "pjdfstest")
    if not os.path.exists(built):
        cargo = shutil.which("cargo") or os.path.expanduser(
            "~/.cargo/bin/cargo")
        try:
            subprocess.run([cargo, "install", "--locked", "--quiet",
                            "--debug", "--version", VERSION, "--root",
                            _ROOT, "pjdfstest"], check=True, timeout=900)
        except (OSError, subprocess.SubprocessError) as e:
            raise process.LabError(
                "cannot build pjdfstest %s with cargo (Rust from rustup "
                "or Debian's cargo; crates.io reachable): %s"
                % (VERSION, e)) from e
    return built


class Run:
    """One run's outcome per test case, and what it printed."""

    def __init__(self, output, returncode):
        self.output = output
        self.returncode = returncode
        self.outcomes = {}
        for line in output.splitlines():
            match = _RESULT.match(line)
            if match:
                self.outcomes[match.group("name")] = match.group("outcome")

    def failed(self):
        return {name for name, outcome in self.outcomes.items()
                if outcome == "FAILED"}

    def why(self, name):
        """The lines pjdfstest printed under a failed test case."""
        lines = self.output.splitlines()
        for index, line in enumerate(lines):
            if line.startswith(name + " "):
                return "\n".join(lines[index + 1:index + 4])
        return ""


def run(path, workdir, timeout):
    """Every test case in ``path``; a hang past ``timeout`` is an error."""
    config = os.path.join(workdir, "pjdfstest.toml")
    with open(config, "w") as f:
        f.write(_CONFIG)
    try:
        done = subprocess.run(
            [binary(), "-c", config, "-p", path], capture_output=True,
            text=True, timeout=timeout, env=dict(os.environ,
                                                 RUST_BACKTRACE="0"))
    except subprocess.TimeoutExpired as e:
        raise process.LabError(
            "pjdfstest did not finish within %ds in %s; its last words: "
            "%s" % (timeout, path, (e.stdout or b"")[-2000:])) from None
    return Run(done.stdout + done.stderr, done.returncode)


class ExpectedFailures:
    """The test cases each configuration fails, and why.

    Read from an INI file: ``[reasons]`` names each reason once, and a
    section per configuration maps test cases to a reason's name.  A
    reason whose name starts with ``flaky-`` may pass too.
    """

    def __init__(self, path):
        parser = configparser.ConfigParser(delimiters=("=",))
        parser.optionxform = str    # Test case names are case-sensitive.
        parser.read(path)
        self.reasons = dict(parser["reasons"])
        self.configurations = {
            section: dict(parser[section]) for section in parser.sections()
            if section != "reasons"}
        for section, cases in self.configurations.items():
            for name, reason in cases.items():
                if reason not in self.reasons:
                    raise ValueError("%s: %s names no reason in [reasons]: "
                                     "%r" % (section, name, reason))

    def of(self, configuration):
        return self.configurations[configuration]

    def may_pass(self, configuration, name):
        return self.of(configuration)[name].startswith("flaky-")
