# SPDX-License-Identifier: Apache-2.0
"""The base copied ahead by reflink, on a real XFS.

A DTN's staging file system is often XFS, whose reflinks let the copy of
a base (``gvfs-meta rebuild``'s first step) share the base's blocks
instead of writing them.  The test makes a small XFS with reflinks on a
loop device and checks that the copy is right and took no space.
"""

import os
import random
import shutil
import subprocess

import pytest

from gvfs_openstack.delta import prefill

MIB = 1024 * 1024


@pytest.fixture
def xfs(tmp_path):
    """A mounted XFS with reflinks, on a loop device."""
    if shutil.which("mkfs.xfs") is None:
        pytest.skip("no mkfs.xfs (xfsprogs, in bindep.txt)")
    image = tmp_path / "xfs.img"
    mountpoint = tmp_path / "xfs"
    mountpoint.mkdir()
    with open(image, "wb") as f:
        f.truncate(320 * MIB)
    subprocess.run(["mkfs.xfs", "-q", "-m", "reflink=1", str(image)],
                   check=True)
    mounted = subprocess.run(["mount", "-o", "loop", str(image),
                              str(mountpoint)], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip("cannot mount a loop device here: %s"
                    % mounted.stderr.strip())
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", str(mountpoint)], check=True)


def _free(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def test_the_copy_ahead_shares_the_bases_blocks(xfs):
    rng = random.Random(3)
    base = xfs / "base.img"
    with open(base, "wb") as f:
        f.write(rng.randbytes(40 * MIB + 123))
        f.seek(60 * MIB)
        f.write(rng.randbytes(20 * MIB))
    os.sync()
    free = _free(xfs)
    output = xfs / "staged.img"
    prefill.prefill(str(base), str(output))
    os.sync()
    assert output.read_bytes() == base.read_bytes()
    # 60 MiB of data copied, under 1 MiB of space taken.
    assert free - _free(xfs) < MIB
