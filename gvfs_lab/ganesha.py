# SPDX-License-Identifier: Apache-2.0
"""NFS-Ganesha as a DTN's NFS server: VFS FSAL, NFSv3 over TCP, loopback.

Ganesha 4 registers its programs with rpcbind and will not start without
one, so the lab starts ``rpcbind`` itself when none is running (and stops
only that one).  Clients never use rpcbind: ports are given explicitly.

rpcbind holds one address per program, machine-wide: two Ganeshas of two
pytest-xdist workers starting at once race for it, and the loser exits
("Cannot register NFS V3 on TCP") or runs on without serving MOUNT
(clients then get PROG_UNAVAIL).  The lab checks that a new Ganesha
answers both programs and starts it again if not.
"""

import os
import random
import shutil
import socket
import struct
import time

from gvfs_lab import process

#: Starts of a Ganesha that lost rpcbind to another before the lab
#: gives up.
START_ATTEMPTS = 5
NFS_PROGRAM = 100003
MOUNT_PROGRAM = 100005

_CONFIG = """
NFS_CORE_PARAM {{
    Protocols = 3;
    NFS_Port = {nfs_port};
    MNT_Port = {mount_port};
    Bind_addr = 127.0.0.1;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Enable_UDP = false;
}}
NFSV4 {{
    RecoveryRoot = {workdir}/recovery;
    Graceless = true;
}}
EXPORT {{
    Export_Id = 1;
    Path = {export};
    Pseudo = {export};
    Protocols = 3;
    Transports = TCP;
    SecType = sys;
    Access_Type = RW;
    {squash}
    FSAL {{ Name = VFS; }}
}}
"""

RPCBIND_SOCKET = "/run/rpcbind.sock"


def _squash(owner, squash_all):
    """The export's ``Squash`` lines: all to ``owner``, else none."""
    if owner is None or not squash_all:
        return "Squash = No_Root_Squash;"
    return ("Squash = All_Squash; Anonymous_Uid = %d; Anonymous_Gid = %d;"
            % owner)


def _rpcbind_alive():
    """Whether an rpcbind answers on its socket.

    The socket file alone proves nothing: rpcbind leaves it behind when
    it stops, and Ganesha then fails to register and exits.
    """
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        try:
            sock.connect(RPCBIND_SOCKET)
        except OSError:
            return False
    return True


class Rpcbind:
    """Starts rpcbind if the machine has none; stops only its own."""

    def __init__(self, workdir):
        self.process = None
        if _rpcbind_alive():
            return
        binary = shutil.which("rpcbind") or "/usr/sbin/rpcbind"
        self.process = process.start_listening(
            "rpcbind", [binary, "-f", "-w"],
            os.path.join(workdir, "rpcbind.log"), [111])

    def stop(self):
        if self.process is not None:
            self.process.stop()


class Ganesha:
    """One ganesha.nfsd exporting ``export`` on free loopback ports.

    With an ``owner`` ``(uid, gid)`` every caller is squashed to it, as
    the deployment guide exports a DTN's images: whatever reaches the NFS
    server (the server proxy, or anything else on the DTN) is the file
    account, never root.  ``squash_all=False``, or no ``owner`` (the DR
    lab's sites, whose GridFTP account is known only later), passes every
    identity through, root's too.
    """

    def __init__(self, workdir, export, owner=None, squash_all=True):
        self.workdir = workdir
        self.export = export
        os.makedirs(os.path.join(workdir, "recovery"), exist_ok=True)
        os.makedirs(export, exist_ok=True)
        if owner is not None:
            os.chown(export, *owner)
        # Two ports asked for one after the other may be the same one.
        self.nfs_port = process.free_port_range(2)
        self.mount_port = self.nfs_port + 1
        self.config = os.path.join(workdir, "ganesha.conf")
        with open(self.config, "w") as f:
            f.write(_CONFIG.format(nfs_port=self.nfs_port,
                                   mount_port=self.mount_port,
                                   workdir=workdir, export=export,
                                   squash=_squash(owner, squash_all)))
        self._start()

    def _start(self):
        for attempt in range(START_ATTEMPTS):
            if attempt:
                # Let the other Ganesha's registration end first.
                time.sleep(random.uniform(0.2, 1.0))
            try:
                self.process = self._launch()
            except process.LabError:
                if attempt + 1 == START_ATTEMPTS:
                    raise
                continue
            if _serves(self.nfs_port, NFS_PROGRAM, 3) and \
                    _serves(self.mount_port, MOUNT_PROGRAM, 3):
                break
            self.process.stop(timeout=20)
        else:
            raise process.LabError(
                "ganesha.nfsd does not serve NFS and MOUNT on ports %d and "
                "%d after %d starts (see %s)" % (
                    self.nfs_port, self.mount_port, START_ATTEMPTS,
                    os.path.join(self.workdir, "ganesha.log")))
        # Ganesha takes its boot time before it listens, so the second it
        # is ready in bounds the second its write verifier was made in.
        self.started_at = time.time()

    def _launch(self):
        binary = shutil.which("ganesha.nfsd") or "/usr/bin/ganesha.nfsd"
        workdir = self.workdir
        return process.start_listening(
            "ganesha.nfsd",
            [binary, "-F", "-f", self.config,
             "-L", os.path.join(workdir, "ganesha.log"),
             "-p", os.path.join(workdir, "ganesha.pid"), "-N", "NIV_EVENT"],
            os.path.join(workdir, "ganesha.out"),
            [self.nfs_port, self.mount_port])

    def restart(self):
        """Stop and start again on the same ports: a server reboot.

        The NFSv3 write verifier changes, as after a real reboot: Ganesha
        makes it from its boot time in whole seconds, so a restart within
        that second would keep it (a test writing and restarting at once
        saw that); the new start waits for the second after the old one
        was ready, as the boot time is taken before the listening starts.
        """
        self.stop()
        while int(time.time()) <= int(self.started_at):
            time.sleep(0.05)
        self._start()

    def url(self, path):
        """libnfs URL of ``path`` (relative to the export) on this server."""
        return nfs_url(self.export, path, self.nfs_port, self.mount_port)

    def stop(self):
        self.process.stop(timeout=20)


def _serves(port, program, version):
    """Whether the RPC server on ``port`` accepts ``program``'s NULL call.

    AUTH_NONE; accepted means the reply's accept status is SUCCESS.
    """
    call = struct.pack(">10I", 1, 0, 2, program, version, 0, 0, 0, 0, 0)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.sendall(struct.pack(">I", 0x80000000 | len(call)) + call)
            reply = b""
            while len(reply) < 28:
                got = s.recv(28 - len(reply))
                if not got:
                    return False
                reply += got
    except OSError:
        return False
    # Record mark, xid, REPLY, MSG_ACCEPTED, verifier (flavor, empty),
    # accept status.
    return struct.unpack(">7I", reply)[6] == 0


def nfs_url(export, path, nfs_port, mount_port, host="127.0.0.1"):
    """A libnfs URL with explicit ports (no portmapper involved)."""
    return "nfs://%s%s/%s?version=3&nfsport=%d&mountport=%d" % (
        host, export.rstrip("/"), path.lstrip("/"), nfs_port, mount_port)
