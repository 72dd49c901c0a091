# SPDX-License-Identifier: Apache-2.0
"""How many requests the kernel keeps in flight to a FUSE mount.

The kernel sends a FUSE connection at most ``max_background`` asynchronous
requests at once -- 12 unless told otherwise -- and the guest reads that
qemu submits together (``aio``, O_DIRECT with Nova's ``cache=none``) are
such requests.  Over a WAN that is at most 12 blocks per round trip: a
guest booting from a golden image on the mount waited on the latency, not
the link (5% of a 512 MiB image's 64 KiB blocks, read cold over a 50 ms
link: 2.4 s with 12, 1.0 s with 64).

libfuse sets the limit only from a file system's init callback, which
pyfuse3 does not expose; the kernel also takes it through the fusectl
file system, ``/sys/fs/fuse/connections/<device>/max_background``, which
only root may write.  The mount process sets it there when it can; when
it runs unprivileged, ``gvfs-proxy tune-mount`` does it as root (the
systemd unit runs it after the mount is up).
"""

import os

from gvfs_openstack.mount import mountinfo

CONNECTIONS = "/sys/fs/fuse/connections"


class FusectlError(Exception):
    """The limit cannot be set (why, and what to do, in the message)."""


class NotMounted(FusectlError):
    """No FUSE mount at the path (yet)."""


def set_max_background(connection, requests, root=CONNECTIONS):
    """Let ``requests`` asynchronous requests be outstanding at once.

    The congestion threshold (where the kernel starts to hold back
    read-ahead and write-back) follows at three quarters, as the kernel
    sets it for its own default.
    """
    directory = os.path.join(root, connection)
    if not os.path.isdir(directory):
        raise FusectlError(
            "%s does not exist: the fusectl file system is not mounted "
            "(mount -t fusectl none %s)" % (directory, root))
    try:
        for name, value in (("max_background", requests),
                            ("congestion_threshold",
                             max(1, requests * 3 // 4))):
            with open(os.path.join(directory, name), "w") as f:
                f.write("%d\n" % value)
    except PermissionError as e:
        raise FusectlError("%s: only root may write it (run gvfs-proxy "
                           "tune-mount as root)" % e.filename) from e
    except OSError as e:
        raise FusectlError("cannot set %s: %s" % (directory, e)) from e


def tune(mountpoint, requests, root=CONNECTIONS, proc=mountinfo.PROC):
    """Set the limit of the FUSE mount at ``mountpoint`` (FusectlError).

    The mount is found in ``proc`` (see :mod:`mountinfo`): the mount
    process itself calls this before it serves.
    """
    try:
        connection = mountinfo.fuse_connection(mountpoint, proc)
    except OSError as e:
        raise FusectlError("cannot read %s: %s" % (proc, e)) from e
    if connection is None:
        raise NotMounted("no FUSE mount at %s" % mountpoint)
    set_max_background(connection, requests, root)
    return connection


def max_background(connection, root=CONNECTIONS):
    with open(os.path.join(root, connection, "max_background")) as f:
        return int(f.read())
