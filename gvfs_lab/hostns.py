# SPDX-License-Identifier: Apache-2.0
"""A compute host's own view of the machine's files: a mount namespace.

Nova takes every compute host's ``[DEFAULT] instances_path`` to be the
same path: a cold migration or resize to another host makes the
instance's directory and copies its disks (``ssh mkdir``, ``scp``) to
the very path they had on the source, and a live migration gives the
destination's QEMU the source's disk paths.  Two compute hosts on one
machine each need that path to be their own directory, so the second
host's nova-compute, its sshd and its libvirtd see their own directory
bound there, in namespaces of their own (libvirtd's is
:class:`gvfs_lab.libvirt.Libvirt`'s; :meth:`Libvirt.bind` binds it
there too).

This namespace keeps the machine's mount propagation (``--propagation
unchanged``): what nova-compute mounts under a libvirt lab's shared
``mounts_dir`` (its GVFS mount) reaches the machine and that host's
libvirtd, as a host's mounts would.  Each bound path is first made a
private mount point of its own on the machine, so the bind over it in
here propagates nowhere.
"""

import os
import shutil
import subprocess

from gvfs_lab import process


def mount_ns(pid):
    """The mount namespace of process ``pid``, as the kernel names it."""
    return os.readlink("/proc/%d/ns/mnt" % pid)


def hold_namespace(name, unshare, log_path, what):
    """A ``sleep`` that holds the namespaces ``unshare`` made for it.

    ``unshare``: the ``unshare`` command line without the program to
    run.  Returned once ``sleep`` runs in a mount namespace other than
    ours: before that the namespace's mounts may still propagate back.
    Stopped again if it never gets there.
    """
    sleep = os.path.realpath(shutil.which("sleep"))
    holder = process.ManagedProcess(name, unshare + [sleep, "infinity"],
                                    log_path)
    mine = mount_ns(os.getpid())
    try:
        process.wait_until(
            lambda: os.path.realpath("/proc/%d/exe" % holder.pid) == sleep
            and mount_ns(holder.pid) != mine, what, process=holder)
    except BaseException:
        holder.stop()
        raise
    return holder


class HostNamespace:
    """A mount namespace in which ``binds`` ({path: lab dir}) are bound.

    :meth:`command` runs a program in it; :meth:`stop` ends the process
    holding it and unmounts what it mounted on the machine.
    """

    def __init__(self, workdir, binds):
        self.workdir = os.path.abspath(workdir)
        os.makedirs(self.workdir, exist_ok=True)
        self.holder = None
        self._private = []
        try:
            self._start(binds)
        except BaseException:
            self.stop()
            raise

    def _start(self, binds):
        for path in binds:
            subprocess.run(["mount", "--bind", path, path], check=True,
                           capture_output=True)
            self._private.append(path)
            subprocess.run(["mount", "--make-private", path], check=True,
                           capture_output=True)
        self.holder = hold_namespace(
            "host-namespace", ["unshare", "--mount", "--propagation",
                               "unchanged"],
            os.path.join(self.workdir, "namespace.log"),
            "a mount namespace for a compute host")
        for path, local in binds.items():
            os.makedirs(local, exist_ok=True)
            subprocess.run(self.command(["mount", "--bind", local, path]),
                           check=True, capture_output=True)

    def command(self, argv):
        """``argv`` run in the namespace (nsenter execs it: same PID)."""
        return ["nsenter", "--target", str(self.holder.pid), "--mount",
                "--"] + list(argv)

    def stop(self):
        if self.holder is not None:
            self.holder.stop()
            self.holder = None
        while self._private:
            subprocess.run(["umount", "--lazy", self._private.pop()],
                           check=False, capture_output=True)
