# SPDX-License-Identifier: Apache-2.0
"""SSH to a site's DTN: how the remote copy reaches the destination's files.

SFTP for files, and commands run on the DTN for what SFTP cannot do:
``ln`` (hard links), a coreutils ``*sum`` (hashing a file where it is,
without moving its bytes), ``sync`` (making a file durable) and
``gvfs-meta`` (sidecars and deltas).  Key authentication only, and the
DTN's host key must already be in the configured known_hosts file: an
unknown host key is refused, never trusted on first use.
"""

import contextlib
import errno
import posixpath
import shlex

import paramiko

from gvfs_openstack.delta import blocks
from gvfs_openstack import exceptions

_READ_AHEAD = 1024 * 1024

#: Hash algorithms Glance uses, and the coreutils program for each.
_SUM_PROGRAMS = {"md5": "md5sum", "sha1": "sha1sum", "sha224": "sha224sum",
                 "sha256": "sha256sum", "sha384": "sha384sum",
                 "sha512": "sha512sum"}


class DtnSession:
    """Files and commands on one DTN over one SSH connection."""

    def __init__(self, client):
        self.client = client
        self.sftp = client.open_sftp()

    def close(self):
        self.sftp.close()
        self.client.close()

    def exists(self, path):
        try:
            self.sftp.stat(path)
        except FileNotFoundError:
            return False
        return True

    def size(self, path):
        return self.sftp.stat(path).st_size

    def listdir(self, path):
        return self.sftp.listdir(path)

    def makedirs(self, path):
        parent = posixpath.dirname(path)
        if parent and parent != path and not self.exists(parent):
            self.makedirs(parent)
        try:
            self.sftp.mkdir(path)
        except OSError as e:
            if not self.exists(path):
                raise OSError(errno.EIO, "cannot create %s: %s"
                              % (path, e)) from e

    def remove_quietly(self, path):
        """Remove ``path`` if it is there; a missing file is no error."""
        try:
            self.sftp.remove(path)
        except FileNotFoundError:
            pass

    def remove_image(self, path):
        """Remove an image file and the block signature beside it."""
        self.remove_quietly(path)
        self.remove_quietly(blocks.signature_path(path))

    def rmdir(self, path):
        self.sftp.rmdir(path)

    def read_chunks(self, path, chunk):
        """Yield the file's bytes, ``chunk`` at a time, read ahead."""
        with self.sftp.open(path, "rb", bufsize=_READ_AHEAD) as f:
            f.prefetch()
            while True:
                data = f.read(chunk)
                if not data:
                    return
                yield data

    def run(self, argv):
        """Run ``argv`` on the DTN; its output, or OSError with its errors."""
        _, stdout, stderr = self.client.exec_command(
            " ".join(shlex.quote(a) for a in argv), timeout=3600)
        out = stdout.read().decode(errors="replace")
        status = stdout.channel.recv_exit_status()
        if status != 0:
            raise OSError(errno.EIO, "%s on the DTN failed (%d): %s" % (
                argv[0], status,
                stderr.read().decode(errors="replace").strip()))
        return out

    def flush(self, path):
        """Make a file and its name durable on the DTN's disks.

        fsync of the file and of its directory (a new hard link is an
        entry there); GNU ``sync`` takes both.
        """
        self.run(["sync", "--", path, posixpath.dirname(path)])

    def hard_link(self, source, target):
        """A second name for a file (SFTP cannot make hard links)."""
        self.run(["ln", "--", source, target])

    def digest(self, path, algo):
        """The file's ``algo`` digest, computed on the DTN; None if unknown."""
        program = _SUM_PROGRAMS.get(algo)
        if program is None:
            return None
        return self.run([program, "--", path]).split()[0]


def open_session(site, image_id, stage):
    """A DtnSession on ``site``'s DTN, for the caller to close.

    StageFailed when it cannot be had: transient, but for a host key or
    an account the DTN refuses.
    """
    client = paramiko.SSHClient()
    try:
        if site.ssh_known_hosts:
            client.load_host_keys(site.ssh_known_hosts)
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        client.connect(site.ssh_host, site.ssh_port, username=site.ssh_user,
                       key_filename=site.ssh_key_file, look_for_keys=False,
                       allow_agent=False, timeout=30, banner_timeout=30,
                       auth_timeout=30)
        return DtnSession(client)
    except (OSError, paramiko.SSHException) as e:
        client.close()
        raise exceptions.StageFailed(
            stage=stage, image=image_id, transient=not isinstance(
                e, (paramiko.BadHostKeyException,
                    paramiko.AuthenticationException)),
            reason="cannot reach the DTN of site %s over SSH (%s:%d): %s"
                   % (site.name, site.ssh_host, site.ssh_port, e)) from e


@contextlib.contextmanager
def connect(site, image_id, stage):
    """A DtnSession on ``site``'s DTN, closed on the way out."""
    session = open_session(site, image_id, stage)
    try:
        yield session
    finally:
        session.close()
