# SPDX-License-Identifier: Apache-2.0
"""One mount interface for the Glance store and the Nova backend.

``Mounter.ensure(share)`` returns a local path where the share (an export
of the DTN, reached through the node's client proxy) is mounted and
answering, mounting it first if needed and remounting it if it hangs or
died -- the stuck NFS mount being the classic way an NFS-backed Glance
or Nova hangs for good.  Two kinds:

``nfs``
    A kernel NFSv3 mount of the proxy, at the mount point os-brick's
    ``RemoteFsClient`` would choose (where Nova's and Cinder's other NFS
    users put theirs), with the root-only step behind the narrow privsep
    entry points of :mod:`gvfs_openstack.mount.privileged`.  The mount
    itself is two lines, owned here: driving os-brick for them meant
    parsing its private ``mount`` argv back, which any release adding a
    flag would break, and a dependency of dozens of packages.
``fuse``
    ``gvfs-proxy mount``, started detached, for hosts without a kernel
    NFS client.
"""

import dataclasses
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import threading
import time

from oslo_log import log as logging

from gvfs_openstack import exceptions
from gvfs_openstack.mount import fusectl
from gvfs_openstack.mount import mountinfo

LOG = logging.getLogger(__name__)

KINDS = ("nfs", "fuse")


@dataclasses.dataclass(frozen=True)
class Share:
    """An export of the DTN as served by a client proxy."""

    proxy_host: str
    proxy_port: int
    export: str

    @property
    def name(self):
        """``host:/export``, the form ``mount -t nfs`` and os-brick use."""
        return "%s:%s" % (self.proxy_host, self.export)


def parse_address(text):
    """``(host, port)`` of a proxy given as ``host:port`` (``[v6]:port``).

    Raises ValueError for anything else.
    """
    host, _, port = text.rpartition(":")
    if not host.strip("[]") or not port.isdigit():
        raise ValueError("%r is not host:port" % text)
    return host.strip("[]"), int(port)


def is_mounted(path):
    return mountinfo.fields_of(path) is not None


def wait_for_mount(path, child, timeout):
    """Wait until ``path`` is mounted; True if it is.

    False if ``child`` (the process that should mount it) exits first or
    ``timeout`` seconds pass.
    """
    deadline = time.monotonic() + timeout
    while not is_mounted(path):
        if child.poll() is not None or time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def detach_fuse(path):
    """Lazily unmount a FUSE mount; its process sees the session end."""
    subprocess.run(["fusermount3", "-u", "-z", path], check=False,
                   capture_output=True)


_probes = {}
_probes_lock = threading.Lock()


def check_health(path, timeout):
    """Raise MountUnhealthy unless ``path`` answers ``statvfs`` in time.

    The probe runs in a thread because a call into a hung mount cannot be
    interrupted; while one probe of a path is stuck, later checks report
    the hang at once instead of stacking up more stuck threads.
    """
    with _probes_lock:
        stuck = _probes.get(path)
        if stuck is not None and stuck.is_alive():
            raise exceptions.MountUnhealthy(
                path=path, state="is still hung (an earlier check has not "
                                 "returned)")
        outcome = {}

        def probe():
            try:
                os.statvfs(path)
            except OSError as e:
                outcome["error"] = e

        thread = threading.Thread(target=probe, daemon=True,
                                  name="gvfs-mount-probe")
        _probes[path] = thread
        thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise exceptions.MountUnhealthy(
            path=path, state="did not answer within %.0fs (hung)" % timeout)
    if "error" in outcome:
        raise exceptions.MountUnhealthy(
            path=path, state="is dead: %s" % outcome["error"])


class Mounter:
    """Mounts shares under ``base``, one directory per share."""

    kind = None

    def __init__(self, base, io_timeout=60.0):
        self.base = os.path.realpath(base)
        self.io_timeout = io_timeout
        #: Seconds a passed health check stands for: a caller doing many
        #: operations in a row (a clone) need not probe before each one.
        self.recheck_after = 0.0
        self._checked = {}

    def mount_point(self, share):
        # os-brick's layout (RemoteFsClient.get_mount_point): the md5 of
        # the share name under the base.
        return os.path.join(self.base, hashlib.md5(
            share.name.encode(), usedforsecurity=False).hexdigest())

    def ensure(self, share):
        """The path of ``share``, mounted and answering.

        Several processes (glance-api workers, nova-compute) may ask at
        once: a lock file beside the mount point makes one of them mount
        and the others find the mount made.
        """
        path = self.mount_point(share)
        os.makedirs(self.base, exist_ok=True)
        with open(path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._ensure_locked(share, path)

    def _ensure_locked(self, share, path):
        if is_mounted(path):
            if time.monotonic() - self._checked.get(path, -1e9) < \
                    self.recheck_after:
                return path
            try:
                check_health(path, self.io_timeout)
                self._checked[path] = time.monotonic()
                return path
            except exceptions.MountUnhealthy as e:
                LOG.warning("%s; remounting %s", e, share.name)
                self.unmount(path)
        self._checked.pop(path, None)
        self.mount(share, path)
        check_health(path, self.io_timeout)
        self._checked[path] = time.monotonic()
        LOG.info("mounted %s (%s) at %s", share.name, self.kind, path)
        return path

    def mount(self, share, path):
        raise NotImplementedError

    def unmount(self, path):
        raise NotImplementedError


class NfsMounter(Mounter):
    """Kernel NFSv3; needs a kernel NFS client.

    ``options`` are the operator's extra ``mount -o`` options; ``softerr``
    with ``timeo``/``retrans`` derived from ``io_timeout`` makes I/O on a
    dead proxy fail with ETIMEDOUT instead of hanging (give ``hard`` to
    get the kernel's default).  ``mount_nfs`` and ``unmount_nfs`` are the
    privileged steps, injectable so that tests can record them on a
    machine without a kernel NFS client.
    """

    kind = "nfs"

    def __init__(self, base, io_timeout=60.0, options=(),
                 rsize=1024 * 1024, wsize=1024 * 1024, mount_nfs=None,
                 unmount_nfs=None):
        super().__init__(base, io_timeout)
        self.extra_options = list(options)
        self.rsize = rsize
        self.wsize = wsize
        if mount_nfs is None or unmount_nfs is None:
            from gvfs_openstack.mount import privileged
            mount_nfs = mount_nfs or privileged.mount_nfs
            unmount_nfs = unmount_nfs or privileged.unmount
        self._mount_nfs = mount_nfs
        self._unmount_nfs = unmount_nfs

    def options(self, share):
        """The ``-o`` value: what the proxy needs, then the operator's."""
        retrans = 2
        options = ["vers=3", "proto=tcp", "port=%d" % share.proxy_port,
                   "mountport=%d" % share.proxy_port, "mountproto=tcp",
                   "nolock", "nosuid", "nodev", "rsize=%d" % self.rsize,
                   "wsize=%d" % self.wsize]
        if "hard" not in self.extra_options:
            deciseconds = max(int(self.io_timeout * 10 / (retrans + 1)), 1)
            options += ["softerr", "timeo=%d" % deciseconds,
                        "retrans=%d" % retrans]
        return ",".join(options + self.extra_options)

    def mount(self, share, path):
        try:
            os.makedirs(path, exist_ok=True)
            self._mount_nfs(share.name, path, self.options(share))
        except exceptions.MountFailed:
            raise
        except Exception as e:
            raise exceptions.MountFailed(share=share.name, path=path,
                                         reason=str(e)) from e

    def unmount(self, path):
        self._unmount_nfs(path)


class FuseMounter(Mounter):
    """``gvfs-proxy mount`` processes, detached, one per share.

    ``config_file`` is handed to them for the ``[mount]`` options (and
    logging); each logs to ``<mount point>.log`` beside its mount point.
    """

    kind = "fuse"

    def __init__(self, base, io_timeout=60.0, config_file=None,
                 start_timeout=30.0):
        super().__init__(base, io_timeout)
        self.config_file = config_file
        self.start_timeout = start_timeout
        #: mount point -> the gvfs-proxy mount process this object started
        self.processes = {}

    def command(self, share, path):
        program = shutil.which("gvfs-proxy")
        argv = [program] if program else [
            sys.executable, "-m", "gvfs_openstack.cmd.proxy"]
        if self.config_file:
            argv += ["--config-file", self.config_file]
        return argv + ["mount", "--proxy", "%s:%d" % (
            share.proxy_host, share.proxy_port), "--export", share.export,
            "--io-timeout", str(self.io_timeout), path]

    def mount(self, share, path):
        os.makedirs(path, exist_ok=True)
        log_path = path + ".log"
        with open(log_path, "ab") as log:
            child = subprocess.Popen(
                self.command(share, path), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        self.processes[path] = child
        if not wait_for_mount(path, child, self.start_timeout):
            if child.poll() is None:
                child.terminate()
            raise exceptions.MountFailed(
                share=share.name, path=path, reason=_tail(log_path))

    def unmount(self, path):
        # Abort the FUSE connection first (where fusectl is mounted), so
        # callers stuck in a hung mount get ENOTCONN; then detach lazily:
        # the FUSE process sees its session end and exits.
        connection = mountinfo.fuse_connection(path)
        if connection is not None:
            abort = os.path.join(fusectl.CONNECTIONS, connection, "abort")
            if os.path.exists(abort):
                with open(abort, "w") as f:
                    f.write("1")
        detach_fuse(path)
        child = self.processes.pop(path, None)
        if child is not None and child.poll() is None:
            # Ours and being replaced: a hung one would never exit.
            child.kill()
            child.wait(10)

    def unmount_all(self):
        """Unmount every mount under the base (stacked ones included)."""
        if not os.path.isdir(self.base):
            return
        for name in os.listdir(self.base):
            path = os.path.join(self.base, name)
            while is_mounted(path):
                self.unmount(path)


def _tail(log_path, lines=5):
    with open(log_path, errors="replace") as f:
        return " | ".join(f.read().strip().splitlines()[-lines:]) or \
            "gvfs-proxy mount exited without a message"


def make(kind, base, io_timeout=60.0, options=(), config_file=None):
    """The mounter for ``kind`` (one of KINDS)."""
    if kind == "nfs":
        return NfsMounter(base, io_timeout, options)
    if kind == "fuse":
        return FuseMounter(base, io_timeout, config_file)
    raise ValueError("unknown mount kind %r (one of %s)"
                     % (kind, ", ".join(KINDS)))
