# SPDX-License-Identifier: Apache-2.0
"""The store's ``get`` reads the file it checked, never one swapped in.

Between the store's ``lstat`` of an image and its open, any writer of
the export can rename a link (or another file) over the image's name.
Each test here performs that swap for real, on a real directory, at the
one moment it matters: after the check, before the open.
"""

import io
import os

from glance_store import exceptions
import pytest

from gvfs_openstack.glance import checked_open
from tests.store_contract import loc
from tests.store_contract import make_store

IMAGE = b"the image's own bytes" * 1000
SECRET = b"another project's image" * 1000


@pytest.fixture
def store(tmp_path):
    datadir = tmp_path / "images"
    datadir.mkdir()
    store = make_store(datadir)
    store.add("mine", io.BytesIO(IMAGE), len(IMAGE), "sha256")
    store.add("theirs", io.BytesIO(SECRET), len(SECRET), "sha256")
    return store


def _link_in_the_store(path, tmp_path):
    """A link to another image of the same store (passes ``realpath``)."""
    os.symlink("theirs", path + ".new")
    os.rename(path + ".new", path)


def _link_out_of_the_store(path, tmp_path):
    host_file = tmp_path / "host-file"
    host_file.write_bytes(SECRET)
    os.symlink(str(host_file), path + ".new")
    os.rename(path + ".new", path)


def _another_file(path, tmp_path):
    with open(path + ".new", "wb") as f:
        f.write(SECRET)
    os.rename(path + ".new", path)


def _fifo(path, tmp_path):
    """A FIFO: a plain open would wait for a writer for ever."""
    os.mkfifo(path + ".new")
    os.rename(path + ".new", path)


SWAPS = [_link_in_the_store, _link_out_of_the_store, _another_file, _fifo]


def _swap_after_the_check(store, monkeypatch, swap, tmp_path):
    """Make the store's next check be followed by ``swap`` of the name."""
    checked = store._existing

    def check_then_swap(location):
        path, st = checked(location)
        swap(path, tmp_path)
        return path, st

    monkeypatch.setattr(store, "_existing", check_then_swap)


@pytest.mark.timeout(10)
@pytest.mark.parametrize("swap", SWAPS, ids=lambda f: f.__name__[1:])
def test_a_name_swapped_between_the_check_and_the_open_is_refused(
        store, monkeypatch, tmp_path, swap):
    _swap_after_the_check(store, monkeypatch, swap, tmp_path)
    with pytest.raises(exceptions.NotFound,
                       match="changed after it was checked"):
        store.get(loc(store, "gvfs://dtn/mine"))


@pytest.mark.timeout(10)
@pytest.mark.parametrize("swap", SWAPS, ids=lambda f: f.__name__[1:])
def test_the_open_refuses_anything_but_the_file_checked(
        store, tmp_path, swap):
    path = os.path.join(store.datadir, "mine")
    checked = os.lstat(path)
    swap(path, tmp_path)
    with pytest.raises(exceptions.NotFound,
                       match="changed after it was checked"):
        checked_open.open_image(path, checked)


def test_a_name_removed_after_the_check_is_not_found(store):
    path = os.path.join(store.datadir, "mine")
    checked = os.lstat(path)
    os.unlink(path)
    with pytest.raises(exceptions.NotFound, match="not found"):
        checked_open.open_image(path, checked)


@pytest.mark.parametrize("target, error", [
    ("theirs", exceptions.NotFound),          # Inside: not a regular file.
    ("/etc/passwd", exceptions.BadStoreUri),  # Leads out of the store.
])
def test_a_link_planted_before_the_check_is_refused(store, target, error):
    os.symlink(target, os.path.join(store.datadir, "planted"))
    with pytest.raises(error):
        store.get(loc(store, "gvfs://dtn/planted"))


def test_an_image_left_alone_is_read_whole_and_in_part(store):
    """The control: the same file as checked is read as ever."""
    chunks, length = store.get(loc(store, "gvfs://dtn/mine"))
    assert length == len(IMAGE) and b"".join(chunks) == IMAGE
    chunks, length = store.get(loc(store, "gvfs://dtn/mine"), offset=7,
                               chunk_size=100)
    assert length == 100 and b"".join(chunks) == IMAGE[7:107]


def test_a_hard_link_to_the_same_file_is_still_that_file(store):
    """Renaming another name of the same inode over it changes nothing."""
    path = os.path.join(store.datadir, "mine")
    checked = os.lstat(path)
    os.link(path, path + ".again")
    os.rename(path + ".again", path)
    fd = checked_open.open_image(path, checked)
    try:
        assert os.pread(fd, len(IMAGE), 0) == IMAGE
    finally:
        os.close(fd)
