# SPDX-License-Identifier: Apache-2.0
"""The base copied ahead of its delta, and the rebuild that trusts it.

A prefilled output saves the rebuild most of its copying, but only a
prefill still true may be trusted: one of a base that changed since, or
an output touched since, must be rebuilt from nothing -- and end
byte-identical all the same.  Holes stay holes either way.
"""

import errno
import hashlib
import json
import os
import pathlib
import random

import pytest

from gvfs_openstack.cmd import meta
from gvfs_openstack.delta import apply
from gvfs_openstack.delta import blocks
from gvfs_openstack.delta import make
from gvfs_openstack.delta import prefill

BLOCK = blocks.BLOCK_SIZE
KIB = 1024
MIB = 1024 * KIB


def _put(path, data):
    pathlib.Path(path).write_bytes(data)
    return str(path)


def _read(path):
    return pathlib.Path(path).read_bytes()


@pytest.fixture
def files(tmp_path):
    """A base, a version of it, its delta and where it is rebuilt.

    The version rewrites some blocks, zeroes a region the base has data
    in, moves a region, and is longer than its base.
    """
    rng = random.Random(7)
    base_data = rng.randbytes(MIB + 300)
    new = bytearray(base_data)
    new[100 * KIB:108 * KIB] = rng.randbytes(8 * KIB)
    new[300 * KIB:400 * KIB] = bytes(100 * KIB)
    new[600 * KIB:640 * KIB] = base_data[800 * KIB:840 * KIB]
    new += rng.randbytes(5 * BLOCK)
    files = {"base": _put(tmp_path / "base.img", base_data),
             "new": _put(tmp_path / "new.img", bytes(new)),
             "delta": str(tmp_path / "new.delta"),
             "output": str(tmp_path / "staged.img"),
             "new_data": bytes(new)}
    make.make(files["new"], blocks.ensure(files["base"]), files["delta"])
    return files


def _rebuild(files, **kwargs):
    return apply.apply(files["base"], files["delta"], files["output"],
                       base_signature=blocks.cached(files["base"]),
                       **kwargs)


def _copies(monkeypatch):
    """Record the rebuild's copies: (base offset, offset, length)."""
    made = []
    real = prefill.copy_range

    def recording(source, out, source_offset, offset, length):
        made.append((source_offset, offset, length))
        return real(source, out, source_offset, offset, length)

    monkeypatch.setattr(prefill, "copy_range", recording)
    return made


def _rebuilt_without_the_prefill(files, monkeypatch):
    """The rebuild is right, and copied the base itself."""
    copies = _copies(monkeypatch)
    _rebuild(files)
    assert _read(files["output"]) == files["new_data"]
    assert sum(length for _, _, length in copies) > 800 * KIB


def test_a_prefilled_rebuild_copies_only_what_moved(files, monkeypatch):
    prefill.prefill(files["base"], files["output"])
    assert os.path.exists(prefill.stamp_path(files["output"]))
    copies = _copies(monkeypatch)
    assert _rebuild(files) == len(files["new_data"])
    assert _read(files["output"]) == files["new_data"]
    # The moved region only: what sits where it was is there already.
    assert copies == [(800 * KIB, 600 * KIB, 40 * KIB)]
    assert not os.path.exists(prefill.stamp_path(files["output"]))
    # The rebuilt file's signature is cached, as without a prefill.
    assert blocks.cached(files["output"]).digests == \
        blocks.digests(files["new_data"])


def test_the_same_rebuild_without_a_prefill_copies_it_all(files,
                                                          monkeypatch):
    _rebuilt_without_the_prefill(files, monkeypatch)


def test_a_prefill_checked_by_the_images_hash(files):
    prefill.prefill(files["base"], files["output"])
    apply.apply(files["base"], files["delta"], files["output"], "sha512",
                hashlib.sha512(files["new_data"]).hexdigest())
    assert _read(files["output"]) == files["new_data"]


def test_an_output_touched_after_its_prefill_is_rebuilt_whole(
        files, monkeypatch):
    prefill.prefill(files["base"], files["output"])
    with open(files["output"], "r+b") as f:
        f.seek(700 * KIB)
        f.write(b"\x55" * BLOCK)
    _rebuilt_without_the_prefill(files, monkeypatch)


def test_a_base_changed_after_the_prefill_is_not_trusted(files,
                                                         monkeypatch):
    prefill.prefill(files["base"], files["output"])
    # Same bytes, touched: the stamp no longer names this base.
    os.utime(files["base"], ns=(5, 5))
    blocks.ensure(files["base"])
    _rebuilt_without_the_prefill(files, monkeypatch)


@pytest.mark.parametrize("stamp", [b"", b"not json", b"[1, 2]",
                                   b'{"base": 1}'])
def test_a_damaged_stamp_is_not_trusted(files, monkeypatch, stamp):
    prefill.prefill(files["base"], files["output"])
    _put(prefill.stamp_path(files["output"]), stamp)
    _rebuilt_without_the_prefill(files, monkeypatch)
    assert not os.path.exists(prefill.stamp_path(files["output"]))


def test_a_stamp_vouches_for_one_rebuild(files, monkeypatch):
    prefill.prefill(files["base"], files["output"])
    _rebuild(files)
    _rebuilt_without_the_prefill(files, monkeypatch)


def test_a_rejected_rebuild_leaves_neither_output_nor_stamp(files):
    prefill.prefill(files["base"], files["output"])
    data = bytearray(_read(files["delta"]))
    data[200] ^= 1
    _put(files["delta"], bytes(data))
    with pytest.raises(apply.Rejected):
        _rebuild(files)
    assert not os.path.exists(files["output"])
    assert not os.path.exists(prefill.stamp_path(files["output"]))


def _sparse(path, pieces, size):
    """A file of ``size`` bytes with data only at ``pieces``."""
    with open(path, "wb") as f:
        f.truncate(size)
        for offset, data in pieces:
            f.seek(offset)
            f.write(data)
    return str(path)


def _allocated(path):
    return os.stat(path).st_blocks * 512


def test_holes_of_the_base_stay_holes(tmp_path):
    data = os.urandom(64 * KIB)
    base = _sparse(tmp_path / "base.img",
                   [(0, data), (60 * MIB, data)], 64 * MIB)
    if _allocated(base) > 4 * MIB:
        pytest.skip("this file system keeps no holes")
    new = bytearray(_read(base))
    new[8 * KIB:12 * KIB] = os.urandom(4 * KIB)
    _put(tmp_path / "new.img", bytes(new))
    make.make(str(tmp_path / "new.img"), blocks.ensure(base),
              str(tmp_path / "new.delta"))
    output = str(tmp_path / "staged.img")
    assert prefill.prefill(base, output) == 64 * MIB
    assert _allocated(output) < 4 * MIB
    apply.apply(base, str(tmp_path / "new.delta"), output,
                base_signature=blocks.cached(base))
    assert _read(output) == bytes(new)
    # The base's zeros were not written over its holes either.
    assert _allocated(output) < 4 * MIB


def test_a_base_that_changes_during_the_copy_leaves_nothing(
        files, monkeypatch):
    real = prefill.copy_range

    def growing(source, out, source_offset, offset, length):
        with open(files["base"], "ab") as f:
            f.write(b"more")
        return real(source, out, source_offset, offset, length)

    monkeypatch.setattr(prefill, "copy_range", growing)
    with pytest.raises(prefill.BaseChanged, match="changed while it was "
                       "copied"):
        prefill.prefill(files["base"], files["output"])
    assert not os.path.exists(files["output"])
    assert not os.path.exists(prefill.stamp_path(files["output"]))


def test_a_file_system_without_seek_data_copies_it_all(tmp_path,
                                                       monkeypatch):
    data = os.urandom(3 * BLOCK)
    base = _put(tmp_path / "base.img", data)
    real = os.lseek

    def no_seek_data(fd, offset, how):
        if how in (os.SEEK_DATA, os.SEEK_HOLE):
            raise OSError(errno.EINVAL, "not here")
        return real(fd, offset, how)

    monkeypatch.setattr(os, "lseek", no_seek_data)
    prefill.prefill(base, str(tmp_path / "out.img"))
    assert _read(tmp_path / "out.img") == data


def test_copy_without_copy_file_range_goes_through_memory(tmp_path,
                                                          monkeypatch):
    data = os.urandom(3 * BLOCK + 5)
    base = _put(tmp_path / "base.img", data)

    def unsupported(*args):
        raise OSError(errno.EXDEV, "not between these")

    monkeypatch.setattr(os, "copy_file_range", unsupported)
    prefill.prefill(base, str(tmp_path / "out.img"))
    assert _read(tmp_path / "out.img") == data


def test_the_stamp_is_a_dot_file_beside_the_output():
    assert prefill.stamp_path("/srv/staging/job/abc") == \
        "/srv/staging/job/.gvfs-meta.abc.prefill"


def test_the_stamp_names_base_and_output(files):
    prefill.prefill(files["base"], files["output"])
    stamp = json.loads(_read(prefill.stamp_path(files["output"])))
    base, output = os.stat(files["base"]), os.stat(files["output"])
    assert stamp == {
        "base": [base.st_dev, base.st_ino, base.st_size, base.st_mtime_ns],
        "output": [output.st_dev, output.st_ino, output.st_size,
                   output.st_mtime_ns]}


def test_meta_prefill_then_patch(files, capsys):
    assert meta.main(["prefill", "--base", files["base"], "--output",
                      files["output"]]) == 0
    assert meta.main(["patch", "--base", files["base"], "--delta",
                      files["delta"], "--output", files["output"]]) == 0
    assert _read(files["output"]) == files["new_data"]


def test_meta_prefill_of_a_missing_base_fails(tmp_path, capsys):
    output = str(tmp_path / "out.img")
    assert meta.main(["prefill", "--base", str(tmp_path / "missing"),
                      "--output", output]) == 1
    assert "gvfs-meta: prefill of %s:" % output in capsys.readouterr().err
    assert not os.path.exists(output)


def test_zeros_the_signature_knows_are_not_copied_and_stay_holes(tmp_path):
    """A base written whole (as GridFTP writes it) keeps its zeros as data.

    Its signature says which blocks are zeros: the prefill leaves them
    out, and the zeros the new version has where the base had data are
    punched out, so the rebuilt file is as sparse as one made afresh.
    """
    data = os.urandom(4 * MIB)
    base_data = data[:2 * MIB] + bytes(16 * MIB) + data[2 * MIB:]
    base = _put(tmp_path / "base.img", base_data)
    assert _allocated(base) >= len(base_data)
    new = bytearray(base_data)
    new[MIB:2 * MIB] = bytes(MIB)
    _put(tmp_path / "new.img", bytes(new))
    make.make(str(tmp_path / "new.img"), blocks.ensure(base),
              str(tmp_path / "new.delta"))
    output = str(tmp_path / "staged.img")
    prefill.prefill(base, output)
    if _allocated(output) > 5 * MIB:
        pytest.skip("this file system keeps no holes")
    apply.apply(base, str(tmp_path / "new.delta"), output,
                base_signature=blocks.cached(base))
    assert _read(output) == bytes(new)
    assert _allocated(output) <= 3 * MIB + 64 * KIB


def test_zeros_are_written_where_holes_cannot_be_punched(files,
                                                         monkeypatch):
    monkeypatch.setattr(prefill, "_fallocate", None)
    prefill.prefill(files["base"], files["output"])
    _rebuild(files)
    assert _read(files["output"]) == files["new_data"]


def test_zero_runs_of_a_signature():
    one = os.urandom(BLOCK)
    data = one + bytes(2 * BLOCK) + one + bytes(BLOCK - 10)
    signature = blocks.Signature(len(data), 0, blocks.digests(data))
    assert signature.zero_runs() == [(BLOCK, 2 * BLOCK),
                                     (4 * BLOCK, BLOCK - 10)]
    assert blocks.Signature(BLOCK, 0, blocks.digests(one)).zero_runs() == []
