# SPDX-License-Identifier: Apache-2.0
"""What is mounted where, read from ``/proc/self/mountinfo``.

Read, never found by looking at the path: a stat of a mount point calls
into its file system, which hangs with a hung mount -- and, in a FUSE
process before it serves its own mount, waits on itself for ever.
"""

import os

PROC = "/proc/self/mountinfo"


def resolved(path):
    """``path`` without symlinks, resolving its parents only.

    ``os.path.realpath`` would look at ``path`` itself, the mount point.
    """
    path = os.path.abspath(path)
    return os.path.join(os.path.realpath(os.path.dirname(path)),
                        os.path.basename(path))


def _unescape(field):
    """The kernel escapes space, tab, newline and backslash in paths."""
    return field.replace("\\040", " ").replace("\\011", "\t") \
        .replace("\\012", "\n").replace("\\134", "\\")


def fields_of(path, mountinfo=PROC):
    """The mountinfo fields of the mount at ``path``, or None.

    Of a stack of mounts on one path, the top one (the last listed).
    """
    path = resolved(path)
    found = None
    with open(mountinfo) as f:
        for line in f:
            fields = line.split()
            if len(fields) > 4 and _unescape(fields[4]) == path:
                found = fields
    return found


def mounts_of(source, mountinfo=PROC):
    """``(mount id, mount point)`` of every mount of ``source``."""
    found = set()
    with open(mountinfo) as f:
        for line in f:
            fields = line.split()
            if "-" not in fields:
                continue
            at = fields.index("-") + 2      # fstype, then the source
            if at < len(fields) and fields[at] == source:
                found.add((fields[0], _unescape(fields[4])))
    return found


def fuse_connection(path, mountinfo=PROC):
    """The fusectl name of the FUSE mount at ``path``, or None.

    The kernel's device number of the mount (``major << 20 | minor``),
    the name of its directory under ``/sys/fs/fuse/connections``.
    """
    fields = fields_of(path, mountinfo)
    if fields is None or "-" not in fields:
        return None
    if not fields[fields.index("-") + 1].startswith("fuse"):
        return None
    major, minor = (int(n) for n in fields[2].split(":"))
    return str(major << 20 | minor)
