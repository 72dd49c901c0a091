# SPDX-License-Identifier: Apache-2.0
"""Files of incompressible data for the benchmarks."""

import os

#: Written a piece at a time: a GiB file is not held in memory.
PIECE = 16 * 1024 * 1024


def random_file(path, size):
    """``size`` random bytes: no codec, hole or cache shortcut helps."""
    with open(path, "wb") as f:
        left = size
        while left:
            piece = min(PIECE, left)
            f.write(os.urandom(piece))
            left -= piece


def image_files(directory, pattern, count, size, write=random_file):
    """``count`` files named ``pattern % n`` in ``directory``, by ``write``.

    The directory is opened to all (the lab's GridFTP servers run as an
    unprivileged user and read the files from it).
    """
    os.chmod(directory, 0o755)
    paths = [os.path.join(directory, pattern % n) for n in range(count)]
    for path in paths:
        write(path, size)
    return paths
