# SPDX-License-Identifier: Apache-2.0
"""``tunnel = ssh``: the system OpenSSH client, supervised by the proxy.

The GVFS paper's channel is SSH to the DTN's own sshd, so that the server
proxy only listens on the DTN's loopback.  OpenSSH moves bytes several
times faster than a Python SSH library (C, AES-GCM in hardware), so the
proxy runs ``ssh`` and forwards a Unix socket of its own, in a private
directory, to the server proxy; every upstream connection is a channel of
that one SSH connection.

Two details matter for speed and lifetime:

* ``ssh -N`` opens no session, and then neither ssh nor sshd sets
  TCP_NODELAY on the SSH connection: every small NFS reply behind a
  window update waits out a delayed ACK (40 ms), which held WRITEs to
  about 22 MB/s.  A session running ``cat`` turns it on at both ends.
* ``cat`` reads the ssh client's stdin, a pipe from this proxy: when the
  proxy dies, however it dies, the pipe closes, ``cat`` ends, and ssh and
  its forward go with it.
"""

import asyncio
import os
import shutil
import subprocess
import tempfile
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: AEAD ciphers first: AES-GCM runs on the CPU's AES instructions.
DEFAULT_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com",
                   "chacha20-poly1305@openssh.com")

#: What the session runs; it must wait on stdin and never write.
REMOTE_COMMAND = "cat"


class ForwardFailed(ConnectionError):
    """ssh exited, or did not set the forward up in time."""


def ssh_argv(ssh_command, socket_path, target, ssh_host, ssh_port, user,
             key_file, known_hosts, connect_timeout, ciphers):
    """The ssh command line of one forward to ``target`` (host, port).

    Host keys must be in ``known_hosts`` (never trusted on first use);
    only ``key_file`` is offered; no agent, no password prompt, no
    connection sharing with the user's own sessions.
    """
    options = {
        "BatchMode": "yes",
        "StrictHostKeyChecking": "yes",
        "UserKnownHostsFile": known_hosts,
        "GlobalKnownHostsFile": "/dev/null",
        "IdentitiesOnly": "yes",
        "IdentityFile": key_file,
        "IdentityAgent": "none",
        "ControlMaster": "no",
        "ControlPath": "none",
        "ExitOnForwardFailure": "yes",
        "StreamLocalBindUnlink": "yes",
        "StreamLocalBindMask": "0177",
        "ServerAliveInterval": "15",
        "ServerAliveCountMax": "3",
        "ConnectTimeout": str(max(1, int(connect_timeout))),
        "Ciphers": ",".join(ciphers),
        "LogLevel": "ERROR",
    }
    argv = [ssh_command, "-T", "-p", str(ssh_port), "-l", user]
    for name, value in options.items():
        argv += ["-o", "%s=%s" % (name, value)]
    argv += ["-L", "%s:%s:%d" % (socket_path, target[0], target[1]),
             ssh_host, REMOTE_COMMAND]
    return argv


class SshForward:
    """One supervised ``ssh`` forwarding a local Unix socket to a target.

    :meth:`ready` (re)starts ssh when it is not running and waits until
    the socket takes connections; the caller's reconnect loop supplies
    the backoff between failed attempts.
    """

    def __init__(self, argv_for, connect_timeout=10.0):
        #: socket path -> ssh argv
        self._argv_for = argv_for
        self.connect_timeout = connect_timeout
        self._directory = None
        self._process = None
        self._lock = None

    @property
    def socket_path(self):
        if self._directory is None:
            # Private to this proxy's user: the socket reaches the DTN
            # as that user.
            self._directory = tempfile.mkdtemp(prefix="gvfs-ssh-")
        return os.path.join(self._directory, "upstream.sock")

    @property
    def running(self):
        return self._process is not None and self._process.poll() is None

    async def ready(self):
        """The socket path, with ssh up and forwarding."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self.running:
                await self._start()
            return self.socket_path

    async def _start(self):
        path = self.socket_path
        self._reap()
        if os.path.exists(path):
            os.unlink(path)
        argv = self._argv_for(path)
        LOG.info("starting %s", " ".join(argv))
        # Its messages go to a file: a pipe nobody reads while it runs
        # could fill and stall it.
        with open(self._log_path, "wb") as log:
            self._process = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=log, start_new_session=True)
        deadline = time.monotonic() + self.connect_timeout
        while not os.path.exists(path):
            if self._process.poll() is not None:
                raise ForwardFailed("ssh exited with status %d: %s" % (
                    self._process.returncode, self._stderr()))
            if time.monotonic() > deadline:
                self._reap()
                raise ForwardFailed("ssh did not forward %s within %.0fs"
                                    % (path, self.connect_timeout))
            await asyncio.sleep(0.02)

    @property
    def _log_path(self):
        return os.path.join(os.path.dirname(self.socket_path), "ssh.log")

    def _stderr(self):
        try:
            with open(self._log_path, "rb") as f:
                text = f.read().decode(errors="replace")
        except OSError:
            return ""
        return " ".join(text.split())[-500:]

    def _reap(self):
        """Stop the ssh of an earlier attempt, if any."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        process.stdin.close()

    def close(self):
        self._reap()
        if self._directory is not None:
            shutil.rmtree(self._directory, ignore_errors=True)
            self._directory = None
