"""The gvfs glance_store driver through glance_store's own API."""

import hashlib
import io
import os

from glance_store import exceptions
from glance_store import location
from oslo_config import cfg
import pytest
from stevedore import driver as stevedore_driver

from gvfs_openstack.glance import store as gvfs_store
from gvfs_openstack.meta import format as meta_format
from gvfs_openstack.meta import scan

MIB = 1024 * 1024


def make_store(datadir, **options):
    conf = cfg.ConfigOpts()
    conf([], project="glance")
    store = gvfs_store.Store(conf, backend="dtn")
    conf.set_override("gvfs_store_datadir", str(datadir), group="dtn")
    for name, value in options.items():
        conf.set_override(name, value, group="dtn")
    store.configure(re_raise_bsc=True)
    return store


@pytest.fixture
def store(tmp_path):
    datadir = tmp_path / "images"
    datadir.mkdir()
    return make_store(datadir)


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


def test_the_driver_loads_by_its_scheme():
    manager = stevedore_driver.DriverManager("glance_store.drivers", "gvfs")
    assert manager.driver is gvfs_store.Store


def test_add_get_delete_round_trip(store):
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


def test_the_sidecar_describes_the_image(store):
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


def test_an_iso_is_marked_for_whole_file_transfer(store):
    data = bytearray(os.urandom(MIB))
    data[32769:32774] = b"CD001"
    store.add("installer", io.BytesIO(bytes(data)), len(data), "sha256")
    path = os.path.join(store.datadir, "installer")
    with open(scan.sidecar_path(path), "rb") as f:
        sidecar = meta_format.parse(f.read())
    assert (sidecar.action, sidecar.compression) == ("whole_file", "zstd")


def test_duplicates_are_refused_and_nothing_is_left(store):
    store.add("dup", io.BytesIO(b"x" * 100), 100, "sha256")
    with pytest.raises(exceptions.Duplicate):
        store.add("dup", io.BytesIO(b"y" * 100), 100, "sha256")
    assert sorted(os.listdir(store.datadir)) == [".gvfs-meta.dup", "dup"]
    with open(os.path.join(store.datadir, "dup"), "rb") as f:
        assert f.read() == b"x" * 100


@pytest.mark.parametrize("upload, size, error", [
    (io.BytesIO(b"x" * 100), 99, exceptions.Invalid),
    (Failing(b"x" * 5 * MIB), 10 * MIB, IOError),
])
def test_a_failed_upload_leaves_no_file(store, upload, size, error):
    with pytest.raises(error):
        store.add("broken", upload, size, "sha256")
    assert os.listdir(store.datadir) == []


@pytest.mark.parametrize("uri", [
    "gvfs://dtn/../../etc/passwd", "gvfs://dtn/a/b", "gvfs://dtn/",
    "gvfs://dtn/.gvfs-meta.x", "gvfs://dtn/..", "gvfs://dtn/x?y=1",
    "gvfs:///x", "file:///etc/passwd", "gvfs://dtn/%2e%2e",
    "gvfs://dtn/a%2fb",
])
def test_locations_never_leave_the_store(store, uri):
    with pytest.raises(exceptions.BadStoreUri):
        store.get_size(loc(store, uri))


@pytest.mark.parametrize("image_id", ["../x", "a/b", ".hidden", "", "..",
                                      "x" * 300])
def test_hostile_image_ids_are_refused(store, image_id):
    with pytest.raises(exceptions.BadStoreUri):
        store.add(image_id, io.BytesIO(b"x"), 1, "sha256")
    assert os.listdir(store.datadir) == []


def test_a_symlink_out_of_the_store_is_refused(store, tmp_path):
    secret = tmp_path / "secret"
    secret.write_bytes(b"not an image")
    os.symlink(str(secret), os.path.join(store.datadir, "evil"))
    with pytest.raises(exceptions.BadStoreUri):
        store.get(loc(store, "gvfs://dtn/evil"))


@pytest.mark.parametrize("datadir, reason", [
    ("", "not set"), ("relative/dir", "not absolute"),
    ("/nonexistent/gvfs", "not a directory"),
])
def test_a_bad_configuration_is_refused(datadir, reason):
    conf = cfg.ConfigOpts()
    conf([], project="glance")
    store = gvfs_store.Store(conf, backend="dtn")
    conf.set_override("gvfs_store_datadir", datadir, group="dtn")
    with pytest.raises(exceptions.BadStoreConfiguration, match=reason):
        store.configure(re_raise_bsc=True)


def test_without_thin_provisioning_zeros_are_written(tmp_path):
    datadir = tmp_path / "fat"
    datadir.mkdir()
    store = make_store(datadir, gvfs_store_thin_provisioning=False)
    store.add("fat", io.BytesIO(bytes(8 * MIB)), 8 * MIB, "sha256")
    assert os.stat(os.path.join(store.datadir, "fat")).st_blocks * 512 \
        >= 8 * MIB


def test_disk_formats_are_recognised_by_their_first_bytes():
    iso = bytearray(gvfs_store.SNIFF_BYTES)
    iso[32769:32774] = b"CD001"
    assert gvfs_store.disk_format_of(bytes(iso)) == "iso"
    assert gvfs_store.disk_format_of(b"QFI\xfb" + bytes(100)) == "qcow2"
    assert gvfs_store.disk_format_of(b"KDMV") == "vmdk"
    assert gvfs_store.disk_format_of(b"vhdxfile") == "vhdx"
    assert gvfs_store.disk_format_of(bytes(10)) == "raw"
