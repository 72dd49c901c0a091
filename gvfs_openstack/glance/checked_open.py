# SPDX-License-Identifier: Apache-2.0
"""Opening an image the store has checked, and only that file.

The store checks an image's name with ``lstat`` (a regular file, not a
link) before it reads it.  Every writer of the export (a compute node
through its proxies, the file account on the DTN) can rename a link or
another file over that name between the check and the open: a plain
``open`` would then follow the link and hand Glance's client whatever
it names (another project's image, a file of the host).  So the open
never follows a link (``O_NOFOLLOW``), never waits on a FIFO
(``O_NONBLOCK``), and the file it got must be the one checked: same
device and inode, and a regular file.
"""

import errno
import fcntl
import os
import stat

from glance_store import exceptions
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _swapped(path):
    LOG.warning("refusing to read %s: it was replaced by a link or "
                "another file after it was checked", path)
    return exceptions.NotFound(
        message="image %s changed after it was checked (a link or "
                "another file in its place): refused" % path)


def open_image(path, checked):
    """A read-only descriptor of ``path``, the file ``checked`` describes.

    ``checked`` is the ``lstat`` result the caller made its decisions
    on.  Raises glance_store's NotFound if the name is gone or is now
    something else, BackendException for another error of the export.
    """
    try:
        fd = os.open(path, _FLAGS)
    except FileNotFoundError:
        raise exceptions.NotFound(image=path) from None
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise _swapped(path) from None
        raise exceptions.BackendException(
            "cannot read image %s: %s" % (path, e)) from e
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or \
                (opened.st_dev, opened.st_ino) != \
                (checked.st_dev, checked.st_ino):
            raise _swapped(path)
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd
