# SPDX-License-Identifier: Apache-2.0
"""Making what is already written survive a crash."""

import os


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
