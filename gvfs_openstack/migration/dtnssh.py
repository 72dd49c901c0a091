# SPDX-License-Identifier: Apache-2.0
"""SSH to a site's DTN: how the remote copy reaches the destination's files.

SFTP for files, and commands run on the DTN for what SFTP cannot do:
``ln`` (hard links), a coreutils ``*sum`` (hashing a file where it is,
without moving its bytes), ``sync`` (making a file durable),
``gvfs-meta`` (sidecars and deltas) and ``python3`` running
:mod:`gvfs_openstack.files.dtn_paths` (removing and making names without
following a link planted in the export, which SFTP cannot promise).
Key authentication only, and the DTN's host key must already be in the
configured known_hosts file: an unknown host key is refused, never
trusted on first use.
"""

import contextlib
import errno
import inspect
import json
import posixpath
import shlex
import socket
import stat

import paramiko

from gvfs_openstack.delta import blocks
from gvfs_openstack import exceptions
from gvfs_openstack.files import dtn_paths
from gvfs_openstack.sidecar import profile

_READ_AHEAD = 1024 * 1024
#: The most an image's mode gives: its owner reads and writes, its group
#: reads (the store's 0640).
_PRIVATE_MODE = 0o640

#: Hash algorithms Glance uses, and the coreutils program for each.
_SUM_PROGRAMS = {"md5": "md5sum", "sha1": "sha1sum", "sha224": "sha224sum",
                 "sha256": "sha256sum", "sha384": "sha384sum",
                 "sha512": "sha512sum"}


class CommandFailed(OSError):
    """A command on the DTN exited with ``status`` (not 0)."""

    def __init__(self, program, status, errors):
        super().__init__(errno.EIO, "%s on the DTN failed (%d): %s" % (
            program, status, errors))
        self.status = status


class RemoteCommand:
    """A command running on the DTN: lines to it, lines from it.

    For a command that says something early and goes on working while
    the conductor does something else (``gvfs-meta rebuild``).  Its
    input is closed only by :meth:`abandon`, while it surely runs: an
    end of input sent after sshd closed the channel would make OpenSSH
    drop the whole connection.
    """

    def __init__(self, program, stdin, stdout, stderr):
        self.program = program
        self._stdin = stdin
        self._stdout = stdout
        self._stderr = stderr
        self._ended = False

    def readline(self):
        """Its next line of output; CommandFailed if it ended instead."""
        line = self._stdout.readline()
        if not line:
            self.wait()
            raise CommandFailed(self.program, 0, "it ended without a word")
        return line

    def finish(self, line):
        """Send it a last ``line`` and wait for it (:meth:`wait`)."""
        self._stdin.write(line + "\n")
        self._stdin.flush()
        return self.wait()

    def abandon(self):
        """End its input, as nothing more is coming; wait for it quietly."""
        if self._ended:
            return
        self._stdin.channel.shutdown_write()
        with contextlib.suppress(OSError):
            self.wait()

    def wait(self):
        """The rest of its output once it exits 0; else CommandFailed."""
        out = self._stdout.read().decode(errors="replace")
        status = self._stdout.channel.recv_exit_status()
        self._ended = True
        if status != 0:
            raise CommandFailed(self.program, status, self._stderr.read(
            ).decode(errors="replace").strip())
        return out


#: What runs :mod:`dtn_paths` on the DTN: its own source, fixed, with
#: ``-I`` (no user site, no PYTHON* variables, no current directory).
_PATHS_ARGV = ("python3", "-I", "-c", inspect.getsource(dtn_paths))


class DtnSession:
    """Files and commands on one DTN over one SSH connection.

    ``root`` is the export: names below it are removed and made by
    :mod:`dtn_paths`, which follows no link below it.
    """

    def __init__(self, client, root="/"):
        self.client = client
        self.root = root
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

    def group_of(self, path):
        return self.sftp.stat(path).st_gid

    def keep_private(self, path, gid):
        """Give a file group ``gid`` and 0640 at most.

        As the store makes images: a GridFTP server creates files 0644
        unless told ``-perms``, and on a shared DTN every local account
        would read the image.  OSError (EPERM) if this account may not
        change them.
        """
        st = self.sftp.stat(path)
        if st.st_gid != gid:
            self.sftp.chown(path, st.st_uid, gid)
        mode = stat.S_IMODE(st.st_mode)
        if mode & ~_PRIVATE_MODE:
            self.sftp.chmod(path, mode & _PRIVATE_MODE)

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

    def make_dir_as_parent(self, path):
        """Make ``path`` as its parent is made: owner, group and mode.

        For a directory another account writes in: a job's staging
        directory at the destination, which GridFTP would have made as
        its own account, made here first.  Made on the DTN relative to
        descriptors, no link followed: an existing ``path`` is accepted
        only if it is a real directory of the parent's owner, and a link
        anywhere below the export is refused (OSError).  Where this
        account may not give it to the parent's owner, it is not made
        (OSError).
        """
        self._paths("mkdir", [path])

    def remove_tree(self, path):
        """Remove ``path`` and all in it, never following a link.

        A link found on the way is removed itself, and what it names is
        left; a link at a component above ``path`` (below the export) is
        refused: CommandFailed, nothing removed.  Returns the links
        removed, for the caller to report.
        """
        [done] = self._paths("remove", [path])
        return done["links"]

    def remove_quietly(self, path):
        """Remove ``path`` if it is there; a missing file is no error.

        As :meth:`remove_tree`: a link is removed, never followed.
        """
        self._paths("remove", [path])

    def remove_image(self, path):
        """Remove an image file and the signature and profile beside it."""
        self._paths("remove", [path, blocks.signature_path(path),
                               profile.profile_path(path)])

    def _paths(self, verb, paths):
        """Run :mod:`dtn_paths` ``verb`` on ``paths``; what it printed."""
        relative = [posixpath.relpath(posixpath.normpath(p), self.root)
                    for p in paths]
        for path, name in zip(paths, relative):
            if name == ".." or name.startswith("../") or name == ".":
                raise ValueError("%s is not below %s" % (path, self.root))
        out = self.run(list(_PATHS_ARGV) + [verb, self.root] + relative)
        return [json.loads(line) for line in out.splitlines()]

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
        """Run ``argv`` on the DTN; its output, or CommandFailed."""
        return self.start(argv).wait()

    def start(self, argv):
        """Start ``argv`` on the DTN, to talk to as it runs."""
        stdin, stdout, stderr = self.client.exec_command(
            " ".join(shlex.quote(a) for a in argv), timeout=3600)
        return RemoteCommand(argv[0], stdin, stdout, stderr)

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


class _UnknownHostKey(paramiko.SSHException):
    """The DTN's host key is not in the known_hosts file: not trusted."""


class _RefuseUnknownHostKeys(paramiko.MissingHostKeyPolicy):
    """paramiko's RejectPolicy, with an error of its own.

    RejectPolicy raises a bare SSHException, as a connection that drops
    does: a retry would not make the key known, so the stage must fail
    for good rather than be retried.
    """

    def missing_host_key(self, client, hostname, key):
        raise _UnknownHostKey("the host key of %s is not in the known "
                              "hosts file (%s %s)" % (
                                  hostname, key.get_name(),
                                  key.get_fingerprint().hex()))


class _PromptSocket:
    """The SSH connection's socket, made not to sit on small messages.

    A command on the DTN is a dozen small SSH messages each way (channel
    open, exec, its status, EOF, close), and paramiko sets no socket
    option: with Nagle's algorithm on one end and delayed ACKs on the
    other, a message waits up to 40 ms for the ACK of the one before.
    Nagle is turned off here (``TCP_NODELAY``), and ACKs are sent at once
    (``TCP_QUICKACK``, which Linux clears as it sees fit, so it is set
    again before each read): logging in and opening SFTP took 0.12 s on
    loopback without them, 0.02 s with.
    """

    def __init__(self, sock):
        self._sock = sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def recv(self, size):
        if _QUICKACK is not None:
            self._sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
        return self._sock.recv(size)

    def __getattr__(self, name):
        return getattr(self._sock, name)


#: Linux only: elsewhere ACKs are left as the system delays them.
_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def open_session(site, image_id, stage):
    """A DtnSession on ``site``'s DTN, for the caller to close.

    StageFailed when it cannot be had: transient, but for a host key or
    an account the DTN refuses.
    """
    client = paramiko.SSHClient()
    sock = None
    try:
        if site.ssh_known_hosts:
            client.load_host_keys(site.ssh_known_hosts)
        client.set_missing_host_key_policy(_RefuseUnknownHostKeys())
        sock = _PromptSocket(socket.create_connection(
            (site.ssh_host, site.ssh_port), timeout=30))
        client.connect(site.ssh_host, site.ssh_port, username=site.ssh_user,
                       key_filename=site.ssh_key_file, look_for_keys=False,
                       allow_agent=False, timeout=30, banner_timeout=30,
                       auth_timeout=30, sock=sock)
        return DtnSession(client, site.dtn_export)
    except (OSError, paramiko.SSHException) as e:
        client.close()
        if sock is not None:
            sock.close()
        raise exceptions.StageFailed(
            stage=stage, image=image_id, transient=not isinstance(
                e, (paramiko.BadHostKeyException, _UnknownHostKey,
                    paramiko.AuthenticationException)),
            reason="cannot reach the DTN of site %s over SSH: %s"
                   % (site.name, _why_not(e)),
            detail="%s:%d: %s" % (site.ssh_host, site.ssh_port, e)) from e


def _why_not(error):
    """Why an SSH session did not start, naming no host or port."""
    if isinstance(error, (paramiko.BadHostKeyException, _UnknownHostKey)):
        return "its host key is not in the known hosts file, or differs"
    if isinstance(error, paramiko.AuthenticationException):
        return "the login was refused"
    return "it does not answer (%s)" % type(error).__name__


@contextlib.contextmanager
def connect(site, image_id, stage):
    """A DtnSession on ``site``'s DTN, closed on the way out."""
    session = open_session(site, image_id, stage)
    try:
        yield session
    finally:
        session.close()
