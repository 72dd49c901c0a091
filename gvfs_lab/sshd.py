# SPDX-License-Identifier: Apache-2.0
"""A real OpenSSH server on a loopback port, with generated keys.

It stands for the DTN's sshd: proxies tunnel through it with
``direct-tcpip`` channels and key authentication, as in the GVFS paper.
"""

import getpass
import os
import shutil
import subprocess

from gvfs_lab import process

_CONFIG = """
Port {port}
ListenAddress {address}
HostKey {workdir}/host_ed25519
PidFile {workdir}/sshd.pid
AuthorizedKeysFile {workdir}/authorized_keys
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
UsePAM no
StrictModes no
AllowTcpForwarding yes
X11Forwarding no
PrintMotd no
Subsystem sftp internal-sftp
LogLevel INFO
"""


def _keygen(path):
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                    path], check=True, stdout=subprocess.DEVNULL)


class Sshd:
    """sshd on a free port; ``user``, ``key`` and ``known_hosts`` log in.

    ``address``: the loopback address it listens on (a compute host's
    own, ``[DEFAULT] my_ip``); ``wrap``: a function of its command line
    that runs it elsewhere, e.g. in a compute host's mount namespace
    (:meth:`gvfs_lab.hostns.HostNamespace.command`).
    """

    def __init__(self, workdir, address="127.0.0.1", wrap=None):
        self.workdir = workdir
        self.address = address
        os.makedirs(workdir, exist_ok=True)
        # sshd insists on its privilege separation directory.
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        self.port = process.free_port(address)
        self.user = getpass.getuser()
        self.host_key = os.path.join(workdir, "host_ed25519")
        self.key = os.path.join(workdir, "client_ed25519")
        #: The DTN operator's own key, never restricted: scp baselines.
        self.admin_key = os.path.join(workdir, "admin_ed25519")
        for path in (self.host_key, self.key, self.admin_key):
            if not os.path.exists(path):
                _keygen(path)
        with open(self.key + ".pub") as f:
            self._client_pub = f.read().strip()
        with open(self.admin_key + ".pub") as f:
            self._admin_pub = f.read().strip()
        self._authorized_keys = os.path.join(workdir, "authorized_keys")
        with open(self._authorized_keys, "w") as f:
            f.write("%s\n%s\n" % (self._client_pub, self._admin_pub))
        with open(self.host_key + ".pub") as f:
            host_pub = f.read().split()
        self.known_hosts = os.path.join(workdir, "known_hosts")
        with open(self.known_hosts, "w") as f:
            f.write("[%s]:%d %s %s\n" % (
                address, self.port, host_pub[0], host_pub[1]))
        self.config = os.path.join(workdir, "sshd_config")
        with open(self.config, "w") as f:
            f.write(_CONFIG.format(port=self.port, workdir=workdir,
                                   address=address))
        binary = shutil.which("sshd") or "/usr/sbin/sshd"
        argv = [binary, "-D", "-e", "-f", self.config]
        self.process = process.start_listening(
            "sshd", wrap(argv) if wrap else argv,
            os.path.join(workdir, "sshd.log"), [self.port], host=address)

    def known_as(self, host, port):
        """Trust this server's key at ``host:port`` too (a route to it)."""
        with open(self.host_key + ".pub") as f:
            kind, key = f.read().split()[:2]
        with open(self.known_hosts, "a") as f:
            f.write("[%s]:%d %s %s\n" % (host, port, kind, key))

    def restrict_key(self, port):
        """Let ``key`` only forward to 127.0.0.1:``port`` and run cat.

        The ``authorized_keys`` line the deployment guide gives the
        client proxies' key; sshd reads it at every login.
        """
        with open(self._authorized_keys, "w") as f:
            f.write('restrict,port-forwarding,permitopen="127.0.0.1:%d",'
                    'command="cat" %s\n%s\n' % (port, self._client_pub,
                                                self._admin_pub))

    def session_pids(self):
        """PIDs of sshd's per-connection children (to cut a tunnel)."""
        try:
            out = subprocess.run(
                ["pgrep", "-P", str(self.process.pid)], capture_output=True,
                text=True, check=False).stdout
        except OSError:
            return []
        return [int(p) for p in out.split()]

    def stop(self):
        self.process.stop()
