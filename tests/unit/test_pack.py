# SPDX-License-Identifier: Apache-2.0
"""``--pack tar``: the archive commands the DTNs run, run here for real.

The argv the conductor sends over SSH is run with this machine's GNU tar
and zstd: images from two directories (a staging directory and a gvfs
store) come out whole, sparse ones sparse, and only the named members are
extracted.
"""

import os
import subprocess

import pytest

from gvfs_openstack.migration import pack

MIB = 1024 * 1024


@pytest.fixture
def images(tmp_path):
    staging = tmp_path / "export" / "staging" / "job"
    store = tmp_path / "export" / "images"
    staging.mkdir(parents=True)
    store.mkdir(parents=True)
    sparse = staging / "img-sparse"
    with open(sparse, "wb") as f:
        f.truncate(64 * MIB)
        f.seek(32 * MIB)
        f.write(os.urandom(MIB))
    dense = store / "img-dense"
    dense.write_bytes(os.urandom(3 * MIB + 17))
    return [str(sparse), str(dense)]


def _run(argv):
    subprocess.run(argv, check=True, capture_output=True, timeout=120)


def test_a_pack_unpacks_to_the_same_images(images, tmp_path):
    archive = str(tmp_path / "export" / "staging" / "job" / ".pack")
    _run(pack.pack_command(archive, images))
    # The zero megabytes are not in the archive.
    assert os.path.getsize(archive) < 6 * MIB
    received = tmp_path / "west"
    received.mkdir()
    _run(pack.unpack_command(archive, str(received),
                             ["img-sparse", "img-dense"]))
    for path in images:
        with open(path, "rb") as original, \
                open(received / os.path.basename(path), "rb") as copy:
            assert copy.read() == original.read()
    unpacked = os.stat(received / "img-sparse")
    assert unpacked.st_blocks * 512 < 8 * MIB


def test_only_the_named_images_are_unpacked(images, tmp_path):
    archive = str(tmp_path / "archive")
    _run(pack.pack_command(archive, images))
    received = tmp_path / "west"
    received.mkdir()
    _run(pack.unpack_command(archive, str(received), ["img-dense"]))
    assert sorted(os.listdir(received)) == ["img-dense"]
    with pytest.raises(subprocess.CalledProcessError):
        _run(pack.unpack_command(archive, str(received), ["not-there"]))


def test_names_starting_with_a_dash_stay_names():
    argv = pack.unpack_command("/a", "/d", ["-rf"])
    assert argv[-2:] == ["--", "-rf"]
