# SPDX-License-Identifier: Apache-2.0
"""A ``gvfs-proxy mount`` process: the lab's mounted path.

Started with the configuration file of the proxy it mounts from, waited
for until the kernel shows the mount, stopped by PID with SIGTERM (the
mount unmounts itself) and lazily unmounted if it died without doing so.
"""

import configparser
import contextlib
import os
import subprocess
import sys

from gvfs_lab import process
from gvfs_openstack.mount import fusectl
from gvfs_openstack.mount import mounter


def write_mount_config(path, options=None):
    """A configuration file of ``[mount]`` ``options`` at ``path``; path.

    Given to ``gvfs-proxy mount`` after the proxy's own file, or to
    Nova's and Glance's mounts as ``mount_config``.
    """
    conf = configparser.ConfigParser()
    conf["mount"] = {k: str(v) for k, v in (options or {}).items()}
    with open(path, "w") as f:
        conf.write(f)
    return path


class FuseMount:
    def __init__(self, workdir, name, config, export, mountpoint,
                 options=None, host=None):
        """Mount ``export`` through the proxy of ``config``.

        ``options`` go to the ``[mount]`` section of a second
        configuration file.  ``host`` (a :class:`lan.Host`) runs the
        mount in that host's network namespace, beside its proxy; the
        mount itself is seen by every process.
        """
        self.mountpoint = os.path.realpath(mountpoint)
        os.makedirs(self.mountpoint, exist_ok=True)
        mount_config = write_mount_config(
            os.path.join(workdir, name + ".conf"), options)
        argv = [sys.executable, "-m", "gvfs_openstack.cmd.proxy",
                "--config-file", config, "--config-file", mount_config,
                "mount", "--export", export, self.mountpoint]
        self.log_path = os.path.join(workdir, name + ".log")
        if host is not None:
            argv = host.enter(argv)
        self.process = process.ManagedProcess(name, argv, self.log_path)
        if not mounter.wait_for_mount(self.mountpoint, self.process, 30.0):
            self.stop()
            raise process.LabError(
                "gvfs-proxy mount of %s did not come up (log: %s)"
                % (export, self.log_path))

    def stop(self):
        status = self.process.stop(timeout=30.0)
        if mounter.is_mounted(self.mountpoint):
            mounter.detach_fuse(self.mountpoint)
        return status


@contextlib.contextmanager
def fusectl_mounted():
    """The fusectl file system, where systemd mounts it at boot.

    Containers often go without it; then the lab mounts it for the run and
    unmounts it after, so mounts get their ``[mount] max_background``.
    """
    root = fusectl.CONNECTIONS
    if os.path.ismount(root) or not os.path.isdir(root):
        yield
        return
    subprocess.run(["mount", "-t", "fusectl", "none", root], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", root], check=False)
