"""The gvfs glance_store driver on real file systems that refuse writes."""

import io
import os
import subprocess

from glance_store import exceptions
import pytest

from tests.unit.test_glance_store import make_store

MIB = 1024 * 1024


def test_a_full_disk_is_storage_full_and_leaves_nothing(tiny_disk):
    datadir = tiny_disk(4)
    store = make_store(datadir)
    data = os.urandom(8 * MIB)
    with pytest.raises(exceptions.StorageFull):
        store.add("too-big", io.BytesIO(data), len(data), "sha256")
    assert os.listdir(datadir) == []
    # What fits still goes in.
    store.add("fits", io.BytesIO(data[:MIB]), MIB, "sha256")
    assert sorted(os.listdir(datadir)) == [".gvfs-meta.fits", "fits"]


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
