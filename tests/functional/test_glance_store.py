# SPDX-License-Identifier: Apache-2.0
"""The gvfs glance_store driver on real file systems: the FUSE mount of
the proxy chain, and disks that refuse writes."""

import io
import os
import subprocess
import uuid

from glance_store import exceptions
import pytest

from gvfs_openstack.mount import mounter
from tests.store_contract import loc
from tests.store_contract import make_store
from tests.store_contract import StoreContract

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp", cache={"capacity_mb": 128})


@pytest.fixture(scope="module")
def mount_base(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("glance-mounts"))
    yield base
    mounter.FuseMounter(base).unmount_all()


def fuse_store(lab, mount_base):
    """A store that mounts the lab's export itself.

    Its images go to a fresh directory of the export.
    """
    options = lab.gvfs_store_options("images-" + uuid.uuid4().hex[:8],
                                     mount_base, gvfs_store_io_timeout=10.0)
    return make_store(options.pop("gvfs_store_datadir"), **options)


class TestOnTheFuseMount(StoreContract):
    """The contract on the FUSE mount.

    gvfs-proxy mount -> client proxy -> server proxy -> NFS-Ganesha.
    """

    @pytest.fixture
    def store(self, lab, mount_base):
        return fuse_store(lab, mount_base)


def test_images_land_on_the_export_and_a_lost_mount_comes_back(
        lab, mount_base):
    store = fuse_store(lab, mount_base)
    data = os.urandom(3 * MIB) + bytes(8 * MIB)
    uri = store.add("on-export", io.BytesIO(data), len(data), "sha256")[0]
    on_export = os.path.join(lab.export, os.path.basename(store.datadir),
                             "on-export")
    with open(on_export, "rb") as f:
        assert f.read() == data
    assert os.path.exists(os.path.join(os.path.dirname(on_export),
                                       ".gvfs-meta.on-export"))
    # Sparse on the export too: the holes went through NFS as holes.
    assert os.stat(on_export).st_blocks * 512 < 5 * MIB
    # The mount goes away; the next call finds out and mounts again.
    mount_point = os.path.dirname(store.datadir)
    subprocess.run(["fusermount3", "-u", "-z", mount_point], check=True)
    assert not mounter.is_mounted(mount_point)
    chunks, size = store.get(loc(store, uri))
    assert size == len(data) and b"".join(chunks) == data
    assert mounter.is_mounted(mount_point)


def test_a_full_disk_is_storage_full_and_leaves_nothing(tiny_disk):
    datadir = tiny_disk(4)
    store = make_store(datadir)
    data = os.urandom(8 * MIB)
    with pytest.raises(exceptions.StorageFull):
        store.add("too-big", io.BytesIO(data), len(data), "sha256")
    assert os.listdir(datadir) == []
    # What fits still goes in.
    store.add("fits", io.BytesIO(data[:MIB]), MIB, "sha256")
    assert sorted(os.listdir(datadir)) == [
        ".gvfs-meta.fits", ".gvfs-meta.fits.blocks", "fits"]


def test_a_disk_full_before_the_signature_leaves_nothing(tiny_disk):
    """The image fits, its block signature does not: no half-made image."""
    datadir = tiny_disk(4)
    store = make_store(datadir)
    size = 4 * MIB - 8192
    with pytest.raises(exceptions.StorageFull):
        store.add("just-fits", io.BytesIO(os.urandom(size)), size, "sha256")
    assert os.listdir(datadir) == []
    # The image and its sidecar alone fit: it was the signature.
    unsigned = make_store(datadir, gvfs_store_block_signatures=False)
    unsigned.add("just-fits", io.BytesIO(os.urandom(size)), size, "sha256")
    assert sorted(os.listdir(datadir)) == [".gvfs-meta.just-fits",
                                           "just-fits"]


def test_a_read_only_export_is_storage_write_denied(tiny_disk):
    datadir = tiny_disk(4)
    store = make_store(datadir)
    subprocess.run(["mount", "-o", "remount,ro", datadir], check=True)
    try:
        with pytest.raises(exceptions.StorageWriteDenied):
            store.add("denied", io.BytesIO(b"x" * 100), 100, "sha256")
    finally:
        subprocess.run(["mount", "-o", "remount,rw", datadir], check=True)
    assert os.listdir(datadir) == []
