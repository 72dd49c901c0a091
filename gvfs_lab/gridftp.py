# SPDX-License-Identifier: Apache-2.0
"""A real GridFTP server on a loopback port, as a DTN runs one.

Anonymous mode (``-aa``): on loopback the lab needs no certificates.  The
server serves each connection in a child process running as the anonymous
user, which may not be root: files it reads must be readable by that user,
and directories it writes into writable by it.
"""

import os
import pwd
import shutil
import signal
import subprocess

from gvfs_lab import process

#: Debian has this account on every machine.
ANONYMOUS_USER = "nobody"


class GridFtpServer:
    """One anonymous GridFTP server on a free loopback port.

    ``data_interface`` and ``data_ports`` (a range of ports) fix where it
    listens for data connections when it receives, so that the lab can
    route them through an emulated link.
    """

    def __init__(self, workdir, user=ANONYMOUS_USER,
                 data_interface="127.0.0.1", data_ports=None):
        os.makedirs(workdir, exist_ok=True)
        self.workdir = workdir
        self.user = user
        entry = pwd.getpwnam(user)
        self.uid, self.gid = entry.pw_uid, entry.pw_gid
        self.port = process.free_port()
        self.url = "ftp://127.0.0.1:%d" % self.port
        self.data_interface = data_interface
        self.data_ports = data_ports
        self.start()

    def start(self):
        binary = shutil.which("globus-gridftp-server") or \
            "/usr/sbin/globus-gridftp-server"
        self.process = process.start_listening(
            "globus-gridftp-server",
            [binary, "-aa", "-anonymous-user", self.user, "-p",
             str(self.port), "-control-interface", "127.0.0.1",
             "-data-interface", self.data_interface] + (
                ["-port-range", "%d,%d" % (self.data_ports[0],
                                           self.data_ports[-1])]
                if self.data_ports else []),
            os.path.join(self.workdir, "gridftp.log"), [self.port])

    def session_pids(self):
        """PIDs of the per-connection children (to reset transfers)."""
        out = subprocess.run(["pgrep", "-P", str(self.process.pid)],
                             capture_output=True, text=True,
                             check=False).stdout
        return [int(p) for p in out.split()]

    def reset_sessions(self):
        """Kill every connection's child: a reset of the DTN link."""
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def stop(self):
        # The children are in the server's session: end them with it.
        self.reset_sessions()
        self.process.stop()
