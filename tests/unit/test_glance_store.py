# SPDX-License-Identifier: Apache-2.0
"""The gvfs glance_store driver through glance_store's own API, on a
plain directory."""

import errno
import hashlib
import io
import os

from glance_store import exceptions
from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from oslo_config import cfg
import pytest
from stevedore import driver as stevedore_driver

from gvfs_openstack.delta import blocks
from gvfs_openstack.glance import store as gvfs_store
from tests.store_contract import make_store
from tests.store_contract import MIB
from tests.store_contract import StoreContract


class TestOnADirectory(StoreContract):
    @pytest.fixture
    def store(self, tmp_path):
        datadir = tmp_path / "images"
        datadir.mkdir()
        return make_store(datadir)


def test_the_driver_loads_by_its_scheme():
    manager = stevedore_driver.DriverManager("glance_store.drivers", "gvfs")
    assert manager.driver is gvfs_store.Store


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


def test_without_block_signatures_none_is_written(tmp_path):
    datadir = tmp_path / "unsigned"
    datadir.mkdir()
    store = make_store(datadir, gvfs_store_block_signatures=False)
    store.add("plain", io.BytesIO(os.urandom(MIB)), MIB, "sha256")
    assert sorted(os.listdir(datadir)) == [".gvfs-meta.plain", "plain"]


def test_disk_formats_are_recognised_by_their_first_bytes():
    iso = bytearray(gvfs_store.SNIFF_BYTES)
    iso[32769:32774] = b"CD001"
    assert gvfs_store.disk_format_of(bytes(iso)) == "iso"
    assert gvfs_store.disk_format_of(b"QFI\xfb" + bytes(100)) == "qcow2"
    assert gvfs_store.disk_format_of(b"KDMV") == "vmdk"
    assert gvfs_store.disk_format_of(b"vhdxfile") == "vhdx"
    assert gvfs_store.disk_format_of(bytes(10)) == "raw"


@pytest.mark.parametrize("options, reason", [
    ({"gvfs_store_export": None}, "absolute path"),
    ({"gvfs_store_export": "srv/images"}, "absolute path"),
    ({"gvfs_store_proxy": "no-port"}, "not host:port"),
    ({"gvfs_store_datadir": "../../etc"}, "stay inside"),
    ({"gvfs_store_datadir": "/abs"}, "relative to the export"),
    ({"gvfs_store_proxy": "127.0.0.1:1"}, "Cannot mount"),
])
def test_a_bad_mount_configuration_is_refused(tmp_path, options, reason):
    conf = cfg.ConfigOpts()
    conf([], project="glance")
    store = gvfs_store.Store(conf, backend="dtn")
    values = {"gvfs_store_mount_type": "fuse",
              "gvfs_store_export": "/srv/images",
              "gvfs_store_proxy": "127.0.0.1:1",
              "gvfs_store_mount_point_base": str(tmp_path),
              "gvfs_store_io_timeout": 2.0}
    values.update(options)
    for name, value in values.items():
        conf.set_override(name, value, group="dtn")
    with pytest.raises(exceptions.BadStoreConfiguration, match=reason):
        store.configure(re_raise_bsc=True)


def test_glance_tells_the_stores_locations_by_their_prefix(tmp_path):
    """Glance matches a registered location to a store by ``url_prefix``."""
    store = make_store(tmp_path)
    assert store.url_prefix == "gvfs://dtn/"


class _Upload(io.BytesIO):
    """A request body that counts what was read of it."""

    def __init__(self, size):
        super().__init__(bytes(1) * size)
        self.size = size


@pytest.mark.parametrize("size, read", [
    (24 * MIB, 24 * MIB),
    # Past the limit the rest is left unread.
    (gvfs_store.DRAIN_LIMIT + 16 * MIB, gvfs_store.DRAIN_LIMIT + 8 * MIB)])
def test_a_full_store_reads_the_rest_of_the_upload_so_the_client_sees_413(
        tmp_path, monkeypatch, size, read):
    store = make_store(tmp_path, gvfs_store_thin_provisioning=False)
    real_write = gvfs_store._write_chunk

    def full_after_one_chunk(fd, chunk, offset, thin, builder):
        if offset > 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, chunk, offset, thin, builder)

    monkeypatch.setattr(gvfs_store, "_write_chunk", full_after_one_chunk)
    upload = _Upload(size)
    with pytest.raises(exceptions.StorageFull):
        store.add("full", upload, size, "sha256")
    # The 4 MiB chunk written, the one refused, then the rest up to the
    # limit.
    assert upload.tell() == read
    assert os.listdir(store.datadir) == []


@given(st.lists(st.binary(max_size=9000), max_size=12),
       st.integers(min_value=1, max_value=3))
@settings(max_examples=60, deadline=None)
def test_parallel_hashes_equal_hashing_in_order(chunks, depth):
    md5, sha512 = hashlib.md5(), hashlib.sha512()
    signature = blocks.SignatureBuilder()
    hashes = gvfs_store.ParallelHashes(md5, sha512, signature, depth=depth)
    try:
        for chunk in chunks:
            hashes.update(chunk)
        hashes.wait()
    finally:
        hashes.close()
    whole = b"".join(chunks)
    assert md5.hexdigest() == hashlib.md5(whole).hexdigest()
    assert sha512.hexdigest() == hashlib.sha512(whole).hexdigest()
    assert signature.finish(7) == blocks.Signature(len(whole), 7,
                                                   blocks.digests(whole))


def test_an_upload_of_reused_buffers_is_hashed_as_sent(tmp_path):
    """A reader may hand out one buffer again and again.

    The chunks being hashed on other threads must not change meanwhile.
    """
    store = make_store(tmp_path, gvfs_store_chunk_size=64 * 1024)
    data = os.urandom(3 * MIB)

    class ReusingReader:
        def __init__(self):
            self.at = 0
            self.buffer = bytearray(64 * 1024)

        def read(self, size):
            piece = data[self.at:self.at + min(size, len(self.buffer))]
            self.at += len(piece)
            self.buffer[:len(piece)] = piece
            return memoryview(self.buffer)[:len(piece)]

    _, size, md5, multihash, _ = store.add("reused", ReusingReader(),
                                           len(data), "sha512")
    assert (size, md5, multihash) == (
        len(data), hashlib.md5(data).hexdigest(),
        hashlib.sha512(data).hexdigest())
