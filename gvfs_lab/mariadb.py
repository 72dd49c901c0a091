# SPDX-License-Identifier: Apache-2.0
"""A private MariaDB server on loopback: the MySQL kind of job store that
several conductors share.

The data directory is made and served as the ``mysql`` account the Debian
package creates, in a directory of the lab's that the account owns; the
server listens on a free port of 127.0.0.1 and on a socket in that
directory, and never touches the system's own instance.
"""

import os
import pwd
import shutil
import subprocess

from gvfs_lab import process

ACCOUNT = "mysql"
SERVER = "mariadbd"
INSTALL_DB = "mariadb-install-db"
CLIENT = "mariadb"


class MariaDB:
    def __init__(self, workdir):
        self.workdir = workdir
        process.account_directory(workdir, ACCOUNT)
        self.port = process.free_port()
        self.socket = os.path.join(workdir, "mysqld.sock")
        data = os.path.join(workdir, "data")
        made = subprocess.run(
            [INSTALL_DB, "--no-defaults", "--user=" + ACCOUNT,
             "--datadir=" + data, "--auth-root-authentication-method=normal",
             "--skip-test-db"], capture_output=True, text=True)
        if made.returncode:
            raise process.LabError("%s failed: %s" % (
                INSTALL_DB, (made.stdout + made.stderr)[-2000:]))
        self.process = process.ManagedProcess(
            "mariadb", [shutil.which(SERVER), "--no-defaults",
                        "--user=" + ACCOUNT, "--datadir=" + data,
                        "--port=%d" % self.port, "--bind-address=127.0.0.1",
                        "--socket=" + self.socket,
                        "--pid-file=" + os.path.join(workdir, "mysqld.pid"),
                        "--skip-name-resolve", "--innodb-buffer-pool-size=64M",
                        "--skip-log-bin"],
            os.path.join(workdir, "mariadb.log"))
        try:
            process.wait_until(
                lambda: self._sql("SELECT 1").returncode == 0,
                "MariaDB accepting sessions on port %d" % self.port, 60.0,
                self.process, 0.1)
        except BaseException:
            self.stop()
            raise

    def _sql(self, statement):
        return subprocess.run(
            [CLIENT, "--no-defaults", "--user=root", "--socket=" + self.socket,
             "--batch", "--execute", statement],
            capture_output=True, text=True)

    def database(self, name, user="gvfs", password="gvfs-db-secret"):
        """Create database ``name`` and a user of it over TCP; its URL."""
        made = self._sql(
            "CREATE DATABASE `{0}` CHARACTER SET utf8mb4; "
            "CREATE USER IF NOT EXISTS '{1}'@'127.0.0.1' "
            "IDENTIFIED BY '{2}'; "
            "GRANT ALL ON `{0}`.* TO '{1}'@'127.0.0.1';".format(
                name, user, password))
        if made.returncode:
            raise process.LabError("creating database %s failed: %s "
                                   "(log: %s)" % (name, made.stderr.strip(),
                                                  self.process.log_path))
        return "mysql+pymysql://%s:%s@127.0.0.1:%d/%s?charset=utf8mb4" % (
            user, password, self.port, name)

    def stop(self):
        self.process.stop(timeout=30)


def available():
    try:
        pwd.getpwnam(ACCOUNT)
    except KeyError:
        return False
    return all(shutil.which(name) for name in (SERVER, INSTALL_DB, CLIENT))
