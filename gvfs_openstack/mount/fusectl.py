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

CONNECTIONS = "/sys/fs/fuse/connections"


class FusectlError(Exception):
    """The limit cannot be set (why, and what to do, in the message)."""


class NotMounted(FusectlError):
    """No FUSE mount at the path (yet)."""


def _unescape(field):
    """A mountinfo path: spaces, tabs, newlines and ``\\`` are octal."""
    return field.encode().decode("unicode_escape").encode(
        "latin-1").decode("utf-8", "surrogateescape")


def resolved(path):
    """``path`` without symlinks, touching its parents only.

    ``os.path.realpath`` would look at ``path`` itself, which is the
    mount: a call into the file system the caller may be serving.
    """
    path = os.path.abspath(path)
    return os.path.join(os.path.realpath(os.path.dirname(path)),
                        os.path.basename(path))


def connection_of(mountpoint, mountinfo="/proc/self/mountinfo"):
    """The fusectl name of the FUSE mount at ``mountpoint``, or None.

    Read from ``mountinfo``, not by stat: the mount process itself must
    not call into its own file system before it serves it (that waits on
    itself for ever).  So ``mountpoint`` must be as the kernel shows it,
    absolute with no symlinks (see :func:`resolved`).  The name is the
    kernel's device number (``major << 20 | minor``).
    """
    mountpoint = os.path.normpath(mountpoint)
    found = None
    with open(mountinfo) as f:
        for line in f:
            fields = line.split()
            try:
                separator = fields.index("-")
            except ValueError:
                continue
            if _unescape(fields[4]) != mountpoint or \
                    not fields[separator + 1].startswith("fuse"):
                continue
            major, minor = (int(n) for n in fields[2].split(":"))
            # The last one is the top of a stack of mounts.
            found = str(major << 20 | minor)
    return found


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


def tune(mountpoint, requests, root=CONNECTIONS,
         mountinfo="/proc/self/mountinfo"):
    """Set the limit of the FUSE mount at ``mountpoint`` (FusectlError)."""
    try:
        connection = connection_of(mountpoint, mountinfo)
    except OSError as e:
        raise FusectlError("cannot read %s: %s" % (mountinfo, e)) from e
    if connection is None:
        raise NotMounted("no FUSE mount at %s" % mountpoint)
    set_max_background(connection, requests, root)
    return connection


def max_background(connection, root=CONNECTIONS):
    with open(os.path.join(root, connection, "max_background")) as f:
        return int(f.read())
