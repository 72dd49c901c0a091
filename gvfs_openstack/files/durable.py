# SPDX-License-Identifier: Apache-2.0
"""Making what is written whole, and making it survive a crash."""

import contextlib
import os

from gvfs_openstack.files import safe_files


def fsync_path(path):
    """fsync ``path``, a file or a directory, by name.

    A directory's fsync makes the names created or renamed in it
    durable; a file's, on an NFS or GVFS mount, COMMITs its UNSTABLE
    writes on the server.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def pwrite_all(fd, data, offset):
    """Write all of ``data`` at ``offset``; its length.

    ``pwrite`` may write less than it is given (a signal, a file system
    at its limit); the rest must not be dropped.
    """
    view = memoryview(data)
    while view:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done
    return len(data)


def replace_with(target, data, mode=0o644):
    """Make ``target`` hold ``data``, all or nothing.

    Written to a temporary name beside it, fsync'd, then renamed over
    it: a reader sees the old file or the new one, never a part, and a
    crash leaves no half-written file under ``target``'s name (the name
    itself is durable once its directory is fsync'd: :func:`fsync_path`).
    Whatever fails -- the write, the close, the rename -- leaves no
    temporary file behind.  The temporary name is random and made
    exclusively, and the rename replaces a link at ``target`` rather
    than follow it: a link planted beside the target gets nothing.
    """
    fd, tmp = safe_files.create_temporary(target, mode)
    try:
        try:
            pwrite_all(fd, data, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return target
