# SPDX-License-Identifier: Apache-2.0
"""A private PostgreSQL server on loopback: the job store several
conductors share, and the database of the DR lab's Glance servers.

PostgreSQL refuses to run as root, so the cluster is made and served as
the ``postgres`` account the Debian package creates, in a directory of
the lab's that the account owns.
"""

import os
import pwd
import shutil
import subprocess

from gvfs_lab import process

ACCOUNT = "postgres"


def _bin(name):
    for version in sorted(os.listdir("/usr/lib/postgresql"), reverse=True):
        path = os.path.join("/usr/lib/postgresql", version, "bin", name)
        if os.path.exists(path):
            return path
    raise process.LabError("PostgreSQL's %s is not installed" % name)


class PostgreSQL:
    def __init__(self, workdir):
        self.workdir = workdir
        process.account_directory(workdir, ACCOUNT)
        self.port = process.free_port()
        data = os.path.join(workdir, "data")
        as_account = ["runuser", "-u", ACCOUNT, "--"]
        made = subprocess.run(as_account + [_bin("initdb"), "-D", data,
                                            "-A", "trust", "-U", ACCOUNT],
                              capture_output=True, text=True)
        if made.returncode:
            raise process.LabError("initdb failed: %s" % made.stderr[-2000:])
        self.process = process.ManagedProcess(
            "postgres", as_account + [
                _bin("postgres"), "-D", data, "-p", str(self.port),
                "-h", "127.0.0.1", "-k", workdir],
            os.path.join(workdir, "postgres.log"))
        try:
            self._wait_until_accepting()
        except BaseException:
            self.stop()
            raise

    def _client(self, name, *args):
        return subprocess.run(
            ["runuser", "-u", ACCOUNT, "--", _bin(name), "-h", "127.0.0.1",
             "-p", str(self.port), *args], capture_output=True, text=True)

    def _wait_until_accepting(self):
        """Wait for sessions, not just the port.

        The server listens before its startup is over and refuses
        sessions meanwhile ("the database system is starting up"), so a
        ``createdb`` run as soon as the port answers can fail.
        """
        process.wait_until(
            lambda: self._client("pg_isready", "-t", "1").returncode == 0,
            "accepting sessions on port %d" % self.port, 60.0,
            self.process, 0.1)

    def database(self, name):
        """Create database ``name``; its SQLAlchemy URL."""
        made = self._client("createdb", name)
        if made.returncode:
            raise process.LabError("createdb %s failed: %s (log: %s)" % (
                name, made.stderr.strip()[-2000:], self.process.log_path))
        return "postgresql+psycopg2://%s@127.0.0.1:%d/%s" % (
            ACCOUNT, self.port, name)

    def stop(self):
        self.process.stop(timeout=30)


def available():
    try:
        pwd.getpwnam(ACCOUNT)
        _bin("postgres")
    except (KeyError, OSError, process.LabError):
        return False
    return bool(shutil.which("runuser"))
