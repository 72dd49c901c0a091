# SPDX-License-Identifier: Apache-2.0
"""References to golden images, and deletes that respect them."""

import os
import threading

import pytest

from gvfs_openstack.images import golden

IMAGE = "0f9c7d1e-2b3a-4c5d-8e7f-a1b2c3d4e5f6"


@pytest.fixture
def datadir(tmp_path):
    with open(tmp_path / IMAGE, "wb") as f:
        f.write(b"golden bytes")
    return str(tmp_path)


def test_hold_release_round_trip(datadir):
    holder = golden.holder_name("inst-1", "disk", host="compute-1")
    assert golden.hold(datadir, IMAGE, holder) == \
        os.path.join(datadir, IMAGE)
    assert golden.holders(datadir, IMAGE) == [holder]
    golden.hold(datadir, IMAGE, holder)  # Twice is harmless.
    assert golden.holders(datadir, IMAGE) == [holder]
    golden.release(datadir, IMAGE, holder)
    golden.release(datadir, IMAGE, holder)  # So is releasing twice.
    assert golden.holders(datadir, IMAGE) == []
    # The directory stays for the next clone; the image's delete takes it.
    assert os.path.isdir(os.path.join(datadir, golden.REFS_DIR, IMAGE))
    os.unlink(golden.retire(datadir, IMAGE, grace=0))
    assert not os.path.exists(os.path.join(datadir, golden.REFS_DIR))


def test_a_gone_images_empty_reference_directory_is_forgotten(datadir):
    holder = golden.holder_name("inst-1", "disk", host="compute-1")
    golden.hold(datadir, IMAGE, holder)
    golden.release(datadir, IMAGE, holder)
    os.unlink(os.path.join(datadir, IMAGE))
    golden.forget(datadir, IMAGE)
    assert not os.path.exists(os.path.join(datadir, golden.REFS_DIR))
    golden.forget(datadir, IMAGE)   # Nothing to forget: no error.


def test_hold_of_a_missing_image_leaves_no_reference(datadir):
    with pytest.raises(golden.GoldenImageGone):
        golden.hold(datadir, "no-such-image", "h~i~disk")
    assert golden.holders(datadir, "no-such-image") == []
    assert not os.path.exists(os.path.join(datadir, golden.REFS_DIR))


@pytest.mark.parametrize("image_id", ["../etc", "", ".gvfs-refs", "a/b"])
def test_hostile_image_ids_are_refused(datadir, image_id):
    with pytest.raises(ValueError):
        golden.hold(datadir, image_id, "h~i~disk")


def test_holder_names_are_plain_file_names():
    name = golden.holder_name("../../x", "disk/../y", host="evil host/..")
    assert "/" not in name and golden.parse_holder(name) == (
        "evil_host_..", ".._.._x", "disk_.._y", None)
    name = golden.holder_name("i", "disk", host="h", project_id="p/../q")
    assert golden.parse_holder(name) == ("h", "i", "disk", "p_.._q")
    for bad in ("h~i", "h~i~d~p~x"):
        with pytest.raises(ValueError):
            golden.parse_holder(bad)
    with pytest.raises(ValueError):
        golden.hold("/nonexistent", IMAGE, "../escape")


def test_retire_deletes_an_unreferenced_image(datadir):
    aside = golden.retire(datadir, IMAGE, grace=0)
    assert not os.path.exists(os.path.join(datadir, IMAGE))
    assert os.path.exists(aside)
    os.unlink(aside)
    assert not os.path.exists(os.path.join(datadir, golden.REFS_DIR, IMAGE))


def test_retire_keeps_a_referenced_image(datadir):
    holder = golden.holder_name("inst-1", "disk", host="compute-1")
    golden.hold(datadir, IMAGE, holder)
    with pytest.raises(golden.GoldenImageInUse) as raised:
        golden.retire(datadir, IMAGE, grace=0)
    # glance-api answers the deleting user with this text: the count,
    # never whose disks (other projects' hosts and instances).
    assert "1 instance disk(s)" in str(raised.value)
    assert "inst-1" not in str(raised.value)
    assert raised.value.kwargs["holders"] == holder
    with open(os.path.join(datadir, IMAGE), "rb") as f:
        assert f.read() == b"golden bytes"
    assert golden.holders(datadir, IMAGE) == [holder]
    assert not any(n.startswith(golden.RETIRING_PREFIX)
                   for n in os.listdir(datadir))


def test_a_clone_racing_a_delete_either_wins_or_is_refused(datadir):
    """The reference made during the grace period stops the delete."""
    holder = golden.holder_name("inst-1", "disk", host="compute-1")
    took = []

    def clone_during_grace():
        try:
            took.append(golden.hold(datadir, IMAGE, holder))
        except golden.GoldenImageGone:
            took.append(None)

    timer = threading.Timer(0.05, clone_during_grace)
    timer.start()
    try:
        aside = golden.retire(datadir, IMAGE, grace=0.3)
    except golden.GoldenImageInUse:
        aside = None
    timer.join()
    # The clone saw the image renamed aside, so it refused; the delete
    # saw the (already released) reference or nothing: either way no
    # overlay is left over a deleted image.
    assert took == [None]
    assert golden.holders(datadir, IMAGE) == []
    if aside is None:
        assert os.path.exists(os.path.join(datadir, IMAGE))


def test_recover_puts_back_an_interrupted_delete(datadir):
    os.rename(os.path.join(datadir, IMAGE),
              os.path.join(datadir, golden.RETIRING_PREFIX + IMAGE))
    assert golden.recover(datadir) == [IMAGE]
    assert os.path.exists(os.path.join(datadir, IMAGE))
    assert golden.recover(datadir) == []


def test_held_by_host_lists_one_hosts_references(datadir):
    mine = golden.holder_name("inst-1", "disk", host="compute-1")
    theirs = golden.holder_name("inst-2", "disk", host="compute-2")
    golden.hold(datadir, IMAGE, mine)
    golden.hold(datadir, IMAGE, theirs)
    assert golden.held_by_host(datadir, "compute-1") == {
        (IMAGE, mine): ("inst-1", "disk")}
