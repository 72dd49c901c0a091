# SPDX-License-Identifier: Apache-2.0
"""What the kernel allows a FUSE mount: requests in flight, read-ahead.

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

The same goes for the mount's read-ahead, which the kernel gives every
FUSE mount at 128 KiB and lets a file system's init only lower: raised
through ``/sys/class/bdi/<device>/read_ahead_kb``, a sequential reader of
an image (glance-api sending it, qemu-img converting it) has several
blocks in flight instead of two (cold through a tcp chain on the lab:
172 MB/s at 128 KiB, 336 MB/s at 4 MiB).
"""

import os

from gvfs_openstack.mount import mountinfo

CONNECTIONS = "/sys/fs/fuse/connections"
BDI = "/sys/class/bdi"


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


def _connection(mountpoint, proc):
    try:
        connection = mountinfo.fuse_connection(mountpoint, proc)
    except OSError as e:
        raise FusectlError("cannot read %s: %s" % (proc, e)) from e
    if connection is None:
        raise NotMounted("no FUSE mount at %s" % mountpoint)
    return connection


def tune(mountpoint, requests, root=CONNECTIONS, proc=mountinfo.PROC):
    """Set the limit of the FUSE mount at ``mountpoint`` (FusectlError).

    The mount is found in ``proc`` (see :mod:`mountinfo`): the mount
    process itself calls this before it serves.
    """
    connection = _connection(mountpoint, proc)
    set_max_background(connection, requests, root)
    return connection


def tune_read_ahead(mountpoint, kib, root=BDI, proc=mountinfo.PROC):
    """Set the read-ahead of the FUSE mount at ``mountpoint`` to ``kib``.

    Its backing device is named ``major:minor`` after the connection's
    device number (the kernel's encoding: major << 20 | minor).
    """
    device = int(_connection(mountpoint, proc))
    path = os.path.join(root, "%d:%d" % (device >> 20, device & 0xFFFFF),
                        "read_ahead_kb")
    try:
        with open(path, "w") as f:
            f.write("%d\n" % kib)
    except PermissionError as e:
        raise FusectlError("%s: only root may write it (run gvfs-proxy "
                           "tune-mount as root)" % path) from e
    except OSError as e:
        raise FusectlError("cannot set %s: %s" % (path, e)) from e
    return path


def max_background(connection, root=CONNECTIONS):
    with open(os.path.join(root, connection, "max_background")) as f:
        return int(f.read())
