# SPDX-License-Identifier: Apache-2.0
"""The lab's hypervisor: libvirtd and virtlogd from Debian, QEMU with TCG.

A privileged libvirtd insists on system paths that no option moves: it
reads ``/etc/libvirt/qemu.conf``, keeps domain state in ``/run/libvirt``,
``/var/lib/libvirt``, ``/var/cache/libvirt`` and ``/var/log/libvirt``,
and QEMU's driver reaches virtlogd only at
``/run/libvirt/virtlogd-sock``.  So the lab runs both daemons in a mount
namespace of their own (``unshare --mount``) in which lab directories are
bound over those paths: nothing outside the lab directory is written,
the lab's ``qemu.conf`` applies (QEMU as root, no relabelling or
chowning of images, no cgroups), two labs do not meet, and every process
in that namespace -- the daemons and the QEMUs they start -- is the
lab's.  Clients reach libvirtd on the socket in ``unix_sock_dir`` (a lab
path, in both namespaces) through :attr:`Libvirt.uri`, which is what
Nova's ``[libvirt] connection_uri`` takes.

libvirtd probes QEMU (about 8 s here) when its capabilities cache is
empty: the lab copies that cache from :mod:`gvfs_lab.cache` at start and
back at stop; libvirtd checks it against the QEMU and libvirt binaries
before using it.

The namespace's mounts are a copy of the machine's when the lab starts.
Mounts made later show in it only under :attr:`Libvirt.mounts_dir`, a
shared mount point the namespace follows: a GVFS FUSE mount holding a
backing file for a guest must be made there.
"""

import os
import shutil
import signal
import subprocess

from gvfs_lab import cache
from gvfs_lab import hostns
from gvfs_lab import process

#: Paths a privileged libvirt fixes, and the lab directory bound over
#: each inside its namespace.  All of ``/run``: ``/run/libvirt`` need not
#: exist (systemd-tmpfiles makes it) and a bind needs a target; the
#: daemons and QEMU need nothing else there.
SYSTEM_PATHS = {"/etc/libvirt": "etc", "/run": "run",
                "/var/lib/libvirt": "lib", "/var/cache/libvirt": "cache",
                "/var/log/libvirt": "log"}

_LIBVIRTD_CONF = """\
unix_sock_dir = "{sock_dir}"
unix_sock_rw_perms = "0700"
unix_sock_ro_perms = "0700"
unix_sock_admin_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
"""

# QEMU as root with no relabelling: images (the cached golden one, files
# on a FUSE mount) keep their owners.  stdio_handler "logd": a domain's
# QEMU log and its serial <log file=...> go through virtlogd, as Nova
# expects.  No cgroups and no per-QEMU /dev namespace: neither is needed
# for TCG and both depend on the host's setup.
_QEMU_CONF = """\
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
namespaces = [ ]
cgroup_controllers = [ ]
stdio_handler = "logd"
"""

_VIRTLOGD_CONF = """\
max_size = 4194304
max_backups = 1
"""

TOOLS = {"libvirtd": "libvirt-daemon-system", "virtlogd":
         "libvirt-daemon-system", "virsh": "libvirt-clients",
         "qemu-system-x86_64": "qemu-system-x86", "unshare": "util-linux",
         "nsenter": "util-linux"}


def mount_namespaces_work():
    """Whether this kernel or container lets the lab's libvirtd run.

    It runs in a mount namespace of its own (``unshare --mount``).
    """
    return subprocess.run(["unshare", "--mount", "true"],
                          capture_output=True).returncode == 0


def missing_tools():
    """``tool (package)`` for each program this module needs and lacks."""
    return ["%s (%s)" % (tool, package) for tool, package in TOOLS.items()
            if not shutil.which(tool) and
            not os.path.exists(os.path.join("/usr/sbin", tool))]


def _tool(name):
    return shutil.which(name) or os.path.join("/usr/sbin", name)


def lab_path(workdir, system_path):
    """Where ``system_path`` of the namespace is in lab ``workdir``."""
    for system, local in SYSTEM_PATHS.items():
        if system_path == system or system_path.startswith(system + "/"):
            return os.path.join(workdir, local,
                                os.path.relpath(system_path, system))
    raise ValueError("%s is not a path libvirt keeps in the lab"
                     % system_path)


def _copy_files(src, dst):
    """Copy the files of ``src`` into ``dst``, each by one rename."""
    if not os.path.isdir(src):
        return
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        path = os.path.join(src, name)
        if os.path.isfile(path):
            partial = os.path.join(dst, ".%s.%d" % (name, os.getpid()))
            shutil.copyfile(path, partial)
            os.replace(partial, os.path.join(dst, name))


class Libvirt:
    """libvirtd and virtlogd of one lab, in its own mount namespace."""

    #: In the namespace: libvirtd's cache of QEMU's capabilities.
    CAPABILITIES = "/var/cache/libvirt/qemu/capabilities"

    def __init__(self, workdir, capabilities_cache=None, hostname=None):
        if os.geteuid() != 0:
            raise process.LabError("the lab's libvirtd runs as root")
        missing = missing_tools()
        if missing:
            raise process.LabError("missing %s: run tools/install-deps.sh"
                                   % ", ".join(missing))
        self.workdir = os.path.abspath(workdir)
        self.sock_dir = os.path.join(self.workdir, "sock")
        self.mounts_dir = os.path.join(self.workdir, "mounts")
        self.socket = os.path.join(self.sock_dir, "libvirt-sock")
        #: Nova's ``[libvirt] connection_uri``; virsh's ``-c``.
        self.uri = "qemu+unix:///system?socket=" + self.socket
        #: The host name libvirtd reports (Nova's hypervisor host name and
        #: Placement's resource provider): None keeps the machine's, a
        #: name gives the namespace a UTS namespace of its own, so that
        #: two labs on one machine are two compute nodes.
        self.hostname = hostname
        self.holder = self.virtlogd = self.libvirtd = None
        self.namespace = None
        self._shared = self._saved = False
        self.capabilities_cache = capabilities_cache or cache.directory(
            "libvirt-qemu-capabilities")
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def path(self, system_path):
        """Where ``system_path`` (under a bound path) is, seen from here.

        E.g. ``/var/log/libvirt/qemu/NAME.log``, a domain's QEMU log.
        """
        return lab_path(self.workdir, system_path)

    def _start(self):
        for local in list(SYSTEM_PATHS.values()) + ["sock", "mounts"]:
            os.makedirs(os.path.join(self.workdir, local), exist_ok=True)
        for name, text in (("libvirtd.conf", _LIBVIRTD_CONF),
                           ("qemu.conf", _QEMU_CONF),
                           ("virtlogd.conf", _VIRTLOGD_CONF)):
            with open(os.path.join(self.workdir, "etc", name), "w") as f:
                f.write(text.format(sock_dir=self.sock_dir))
        _copy_files(self.capabilities_cache, self.path(self.CAPABILITIES))
        self._share_mounts_dir()
        self._enter_namespace()
        conf = os.path.join(self.workdir, "etc")
        self.virtlogd = self._daemon(
            "virtlogd", ["-f", os.path.join(conf, "virtlogd.conf"),
                         "-p", os.path.join(self.workdir, "virtlogd.pid")])
        process.wait_until(
            lambda: os.path.exists(self.path("/run/libvirt/virtlogd-sock")),
            "virtlogd's socket", process=self.virtlogd)
        self.libvirtd = self._daemon(
            "libvirtd", ["-f", os.path.join(conf, "libvirtd.conf"),
                         "-p", os.path.join(self.workdir, "libvirtd.pid")])
        process.wait_until(self._answers, "libvirtd answering on %s"
                           % self.socket, timeout=60, process=self.libvirtd,
                           interval=0.2)

    def _share_mounts_dir(self):
        """Make ``mounts_dir`` a shared mount the namespace will follow."""
        subprocess.run(["mount", "--bind", self.mounts_dir,
                        self.mounts_dir], check=True, capture_output=True)
        self._shared = True
        subprocess.run(["mount", "--make-shared", self.mounts_dir],
                       check=True, capture_output=True)

    def _enter_namespace(self):
        """A process holding the namespace, with the lab's paths bound.

        ``--propagation slave``: mounts made here later under a shared
        mount point (``mounts_dir``) reach the namespace; nothing done in
        it reaches the machine.  Paths are bound only once ``unshare`` has
        run ``sleep``: before that the namespace's mounts may still
        propagate back.
        """
        uts = ["--uts"] if self.hostname else []
        self.holder = hostns.hold_namespace(
            "libvirt-namespace",
            [_tool("unshare"), "--mount"] + uts + ["--propagation", "slave"],
            os.path.join(self.workdir, "namespace.log"),
            "a mount namespace for libvirt")
        self.namespace = hostns.mount_ns(self.holder.pid)
        if self.hostname:
            self._in_namespace(["hostname", self.hostname])
        for system, local in SYSTEM_PATHS.items():
            if not os.path.isdir(system):
                raise process.LabError("%s is missing: is libvirt-daemon-"
                                       "system installed?" % system)
            self._in_namespace(["mount", "--bind",
                                os.path.join(self.workdir, local), system])

    def bind(self, path, local):
        """Bind lab directory ``local`` over ``path`` in the namespace.

        What a compute host whose own directory must be at a path every
        host shares (``[DEFAULT] instances_path``) needs its QEMUs to
        see (:mod:`gvfs_lab.hostns`).  Before any domain starts.
        """
        os.makedirs(local, exist_ok=True)
        self._in_namespace(["mount", "--bind", local, path])

    def _nsenter(self):
        return [_tool("nsenter"), "--target", str(self.holder.pid),
                "--mount"] + (["--uts"] if self.hostname else []) + ["--"]

    def _in_namespace(self, argv):
        subprocess.run(self._nsenter() + argv, check=True,
                       capture_output=True)

    def _daemon(self, name, args):
        # nsenter joins the namespace and execs: the PID is the daemon's.
        return process.ManagedProcess(
            name, self._nsenter() + [_tool(name)] + args,
            os.path.join(self.workdir, name + ".log"))

    def _answers(self):
        if not os.path.exists(self.socket):
            return False
        return self.virsh("version", check=False).returncode == 0

    def virsh(self, *args, check=True, timeout=60):
        """``virsh -c URI ARGS``; LabError with its output if it fails."""
        result = subprocess.run(["virsh", "-q", "-c", self.uri] + list(args),
                                capture_output=True, text=True,
                                timeout=timeout)
        if check and result.returncode != 0:
            raise process.LabError("virsh %s: %s" % (
                " ".join(args), (result.stderr or result.stdout).strip()))
        return result

    def domains(self):
        """Names of the running domains."""
        return self.virsh("list", "--name").stdout.split()

    def pids(self):
        """PIDs of every process in the lab's namespace (ours, all)."""
        pids = []
        if self.namespace is None:
            return pids
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    if hostns.mount_ns(int(name)) == self.namespace:
                        pids.append(int(name))
                except OSError:
                    continue
        return pids

    def stop(self):
        """Destroy running domains, stop the daemons, leave no process.

        libvirtd leaves QEMUs running when it stops, by design; the lab
        destroys its domains first, then stops what it started by PID,
        then kills any process still in its namespace (only the lab's
        can be there).
        """
        if self.libvirtd is not None and self.libvirtd.poll() is None:
            listed = self.virsh("list", "--name", check=False)
            for name in listed.stdout.split():
                self.virsh("destroy", name, check=False)
        for part in (self.libvirtd, self.virtlogd, self.holder):
            if part is not None:
                part.stop()
        for pid in self.pids():
            os.kill(pid, signal.SIGKILL)
        if self.libvirtd is not None and not self._saved:
            _copy_files(self.path(self.CAPABILITIES),
                        self.capabilities_cache)
            self._saved = True
        if self._shared:
            subprocess.run(["umount", "--lazy", self.mounts_dir],
                           check=False, capture_output=True)
            self._shared = False
