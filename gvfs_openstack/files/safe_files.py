# SPDX-License-Identifier: Apache-2.0
"""Writing files where others may plant links: never through one.

The DTN-side tools (``gvfs-meta``: sidecars, signatures, profiles,
deltas, rebuilds) write in directories of an export that clients of the
export can write too.  A link planted under a name such a tool writes to
-- a predictable temporary name, a staging output -- would make it write
an image's bytes into whatever the link names with the file account's
rights (its ``authorized_keys``, say).  So every file those tools write
is opened here: temporary files are created under a random name that
must not exist yet, and an output that may exist is opened without
following a link and used only if it is a regular file of this account.
"""

import errno
import fcntl
import os
import secrets
import stat

#: Never follow a link in the last component; never block on a FIFO.
_NO_LINK = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class UnsafeFile(OSError):
    """A name that is not a regular file of this account."""

    def __init__(self, path, what):
        super().__init__(errno.EPERM, "refusing to write through %s: %s"
                         % (path, what))

    def __str__(self):
        return self.strerror


def _blocking(fd):
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    return fd


def create_new(path, mode, flags=os.O_WRONLY):
    """A descriptor of ``path``, a file created now by this call.

    Fails with FileExistsError if anything has the name, a link included
    (``O_EXCL`` never follows one).
    """
    return _blocking(os.open(path, flags | os.O_CREAT | os.O_EXCL |
                             _NO_LINK, mode))


def create_temporary(target, mode, flags=os.O_WRONLY):
    """``(descriptor, name)`` of a new file beside ``target``.

    The name has 64 random bits, so nobody can plant anything under it
    in advance.
    """
    for _ in range(8):
        name = "%s.tmp-%s" % (target, secrets.token_hex(8))
        try:
            return create_new(name, mode, flags), name
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name beside %s"
                          % target)


def open_output(path, mode, truncate=True, create=True):
    """A writable descriptor of ``path``, created if it does not exist.

    An existing name must be a regular file owned by this account; a
    link, a FIFO, a device or another account's file is refused with
    :class:`UnsafeFile` and left as it is.  ``truncate`` empties it once
    it is known to be ours; without ``create`` it must exist.
    """
    flags = os.O_WRONLY | _NO_LINK | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, flags, mode)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EMLINK):
            raise UnsafeFile(path, "it is a symbolic link") from None
        if e.errno == errno.ENXIO:
            raise UnsafeFile(path, "it is a FIFO") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnsafeFile(path, "it is not a regular file")
        if st.st_uid != os.geteuid():
            raise UnsafeFile(path, "it belongs to uid %d" % st.st_uid)
        if truncate:
            os.ftruncate(fd, 0)
        return _blocking(fd)
    except BaseException:
        os.close(fd)
        raise


def private_directory(path):
    """Make ``path`` a directory that only this account may enter.

    A proxy's cache holds the blocks of every image its users read, and
    its journal their unwritten data: any account that can list them can
    read images the mount would refuse it.  Created 0700; an existing
    one open to others is closed (the bits removed are returned, for a
    warning), and one owned by another account is refused.
    """
    os.makedirs(path, mode=0o700, exist_ok=True)
    found = os.stat(path)
    if found.st_uid != os.geteuid():
        raise UnsafeFile(path, "a directory of uid %d" % found.st_uid)
    loose = stat.S_IMODE(found.st_mode) & 0o077
    if loose:
        os.chmod(path, stat.S_IMODE(found.st_mode) & ~0o077)
    return loose
