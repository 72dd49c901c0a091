# SPDX-License-Identifier: Apache-2.0
"""What every gvfs glance_store backing must do, whatever is under it.

``StoreContract`` is run by the unit tests on a plain directory and by
the functional tests on the FUSE mount of the real proxy chain; a
subclass provides the ``store`` fixture (a configured store in backend
group ``dtn``).
"""

import hashlib
import io
import os

from glance_store import exceptions
from glance_store import location
from oslo_config import cfg
import pytest

from gvfs_openstack.delta import blocks
from gvfs_openstack.glance import store as gvfs_store
from gvfs_openstack.images import golden
from gvfs_openstack.sidecar import format as meta_format
from gvfs_openstack.sidecar import scan

MIB = 1024 * 1024


def make_store(datadir, **options):
    conf = cfg.ConfigOpts()
    conf([], project="glance")
    store = gvfs_store.Store(conf, backend="dtn")
    conf.set_override("gvfs_store_datadir", str(datadir), group="dtn")
    # No compute node caches names here: nothing to wait for on delete.
    options.setdefault("gvfs_store_delete_grace", 0.0)
    for name, value in options.items():
        conf.set_override(name, value, group="dtn")
    store.configure(re_raise_bsc=True)
    return store


def loc(store, uri):
    return location.Location("gvfs", gvfs_store.StoreLocation, store.conf,
                             uri=uri, backend="dtn")


def image(*parts):
    return b"".join(parts)


class Failing(io.RawIOBase):
    """An upload whose client goes away after some bytes."""

    def __init__(self, good):
        self.good = good

    def read(self, n=-1):
        if self.good:
            data, self.good = self.good[:n], self.good[n:]
            return data
        raise IOError("client went away")


class StoreContract:
    def test_an_image_an_instance_disk_is_made_of_is_not_deleted(
            self, store):
        data = os.urandom(3 * 65536)
        uri = store.add("img-held", io.BytesIO(data), len(data),
                        "sha512")[0]
        holder = golden.holder_name("instance-1", "disk", host="compute-1")
        golden.hold(store.datadir, "img-held", holder)
        where = loc(store, uri)
        with pytest.raises(exceptions.InUseByStore) as raised:
            store.delete(where)
        # glance-api returns this text to the deleting user: how many
        # disks, never whose (their hosts, instances and projects).
        assert "1 instance disk(s)" in str(raised.value)
        assert "instance-1" not in str(raised.value)
        assert "compute-1" not in str(raised.value)
        chunks, _ = store.get(where)
        assert b"".join(chunks) == data
        golden.release(store.datadir, "img-held", holder)
        store.delete(where)
        with pytest.raises(exceptions.NotFound):
            store.get(where)
        assert sorted(os.listdir(store.datadir)) == []

    def test_a_delete_cut_short_is_undone_at_the_next_start(self, store):
        data = os.urandom(65536)
        uri = store.add("img-cut", io.BytesIO(data), len(data), "md5")[0]
        golden.retire(store.datadir, "img-cut", grace=0)  # Then "crash".
        with pytest.raises(exceptions.NotFound):
            store.get(loc(store, uri))
        store.configure_add()  # The next start of glance-api.
        chunks, _ = store.get(loc(store, uri))
        assert b"".join(chunks) == data
        store.delete(loc(store, uri))

    def test_add_get_delete_round_trip(self, store):
        data = image(os.urandom(MIB + 100), bytes(8 * MIB), os.urandom(5000))
        uri, size, md5, multihash, meta = store.add(
            "img-1", io.BytesIO(data), len(data), "sha512")
        assert uri == "gvfs://dtn/img-1" and size == len(data)
        assert md5 == hashlib.md5(data).hexdigest()
        assert multihash == hashlib.sha512(data).hexdigest()
        assert meta == {"store": "dtn"}
        path = os.path.join(store.datadir, "img-1")
        with open(path, "rb") as f:
            assert f.read() == data
        # Thin: the 8 MiB of zeros take no space.
        assert os.stat(path).st_blocks * 512 < 3 * MIB
        where = loc(store, uri)
        assert store.get_size(where) == len(data)
        chunks, length = store.get(where)
        assert length == len(data) and b"".join(chunks) == data
        chunks, length = store.get(where, offset=MIB, chunk_size=300)
        assert length == 300 and b"".join(chunks) == data[MIB:MIB + 300]
        store.delete(where)
        assert os.listdir(store.datadir) == []
        with pytest.raises(exceptions.NotFound):
            store.get_size(where)
        with pytest.raises(exceptions.NotFound):
            store.delete(where)

    def test_the_sidecar_describes_the_image(self, store):
        data = image(bytes(2 * MIB), os.urandom(MIB))
        store.add("img-2", io.BytesIO(data), len(data), "sha256")
        path = os.path.join(store.datadir, "img-2")
        with open(scan.sidecar_path(path), "rb") as f:
            sidecar = meta_format.parse(f.read())
        st = os.stat(path)
        assert sidecar.matches(st.st_size, st.st_mtime_ns)
        assert sidecar.zeros.extents() == [[0, 2 * MIB]]
        assert sidecar.digest == hashlib.sha256(data[2 * MIB:]).hexdigest()
        assert sidecar.action == "on_demand"

    def test_the_block_signature_describes_the_image(self, store):
        """Written as the upload went by: a delta transfer reads only it."""
        data = image(os.urandom(5000), bytes(2 * MIB), os.urandom(MIB + 7))
        store.add("img-3", io.BytesIO(data), len(data), "sha256")
        path = os.path.join(store.datadir, "img-3")
        assert blocks.cached(path) == blocks.compute(path)
        assert blocks.cached(path).digests == blocks.digests(data)

    def test_an_iso_is_marked_for_whole_file_transfer(self, store):
        data = bytearray(os.urandom(MIB))
        data[32769:32774] = b"CD001"
        store.add("installer", io.BytesIO(bytes(data)), len(data), "sha256")
        path = os.path.join(store.datadir, "installer")
        with open(scan.sidecar_path(path), "rb") as f:
            sidecar = meta_format.parse(f.read())
        assert (sidecar.action, sidecar.compression) == ("whole_file", "zstd")

    def test_duplicates_are_refused_and_nothing_is_left(self, store):
        store.add("dup", io.BytesIO(b"x" * 100), 100, "sha256")
        with pytest.raises(exceptions.Duplicate):
            store.add("dup", io.BytesIO(b"y" * 100), 100, "sha256")
        assert sorted(os.listdir(store.datadir)) == [
            ".gvfs-meta.dup", ".gvfs-meta.dup.blocks", "dup"]
        with open(os.path.join(store.datadir, "dup"), "rb") as f:
            assert f.read() == b"x" * 100

    @pytest.mark.parametrize("upload, size, error", [
        (io.BytesIO(b"x" * 100), 99, exceptions.Invalid),
        (Failing(b"x" * 5 * MIB), 10 * MIB, IOError),
    ])
    def test_a_failed_upload_leaves_no_file(self, store, upload, size, error):
        with pytest.raises(error):
            store.add("broken", upload, size, "sha256")
        assert os.listdir(store.datadir) == []

    @pytest.mark.parametrize("uri", [
        "gvfs://dtn/../../etc/passwd", "gvfs://dtn/a/b", "gvfs://dtn/",
        "gvfs://dtn/.gvfs-meta.x", "gvfs://dtn/..", "gvfs://dtn/x?y=1",
        "gvfs:///x", "file:///etc/passwd", "gvfs://dtn/%2e%2e",
        "gvfs://dtn/a%2fb",
    ])
    def test_locations_never_leave_the_store(self, store, uri):
        with pytest.raises(exceptions.BadStoreUri):
            store.get_size(loc(store, uri))

    @pytest.mark.parametrize("image_id", ["../x", "a/b", ".hidden", "", "..",
                                          "x" * 300])
    def test_hostile_image_ids_are_refused(self, store, image_id):
        with pytest.raises(exceptions.BadStoreUri):
            store.add(image_id, io.BytesIO(b"x"), 1, "sha256")
        assert os.listdir(store.datadir) == []

    def test_a_symlink_out_of_the_store_is_refused(self, store, tmp_path):
        secret = tmp_path / "secret"
        secret.write_bytes(b"not an image")
        os.symlink(str(secret), os.path.join(store.datadir, "evil"))
        with pytest.raises(exceptions.BadStoreUri):
            store.get(loc(store, "gvfs://dtn/evil"))
