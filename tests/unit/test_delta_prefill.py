# SPDX-License-Identifier: Apache-2.0
"""The base copied ahead of its delta, and the rebuild that uses it.

A prefilled output saves the rebuild most of its copying, but only a
copy of the base as it still is may be used: one of a base that changed
since must be rebuilt from nothing -- and end byte-identical all the
same.  Holes stay holes either way.  ``gvfs-meta rebuild`` does both in
one process, told the delta's path on its standard input.
"""

import errno
import hashlib
import os
import pathlib
import random
import sys

import pytest

from gvfs_openstack.cmd import meta
from gvfs_openstack.delta import apply
from gvfs_openstack.delta import blocks
from gvfs_openstack.delta import make
from gvfs_openstack.delta import prefill
from gvfs_openstack.delta import statuses

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


def _rebuild(files, prefilled_from=None, **kwargs):
    return apply.apply(files["base"], files["delta"], files["output"],
                       base_signature=blocks.cached(files["base"]),
                       prefilled_from=prefilled_from, **kwargs)


def _copies(monkeypatch):
    """Record the rebuild's copies: (base offset, offset, length)."""
    made = []
    real = prefill.copy_range

    def recording(source, out, source_offset, offset, length):
        made.append((source_offset, offset, length))
        return real(source, out, source_offset, offset, length)

    monkeypatch.setattr(prefill, "copy_range", recording)
    return made


def _rebuilt_without_the_prefill(files, monkeypatch, prefilled_from=None):
    """The rebuild is right, and copied the base itself."""
    copies = _copies(monkeypatch)
    _rebuild(files, prefilled_from)
    assert _read(files["output"]) == files["new_data"]
    assert sum(length for _, _, length in copies) > 800 * KIB


def test_a_prefilled_rebuild_copies_only_what_moved(files, monkeypatch):
    base = prefill.prefill(files["base"], files["output"])
    assert base == prefill.identity(os.stat(files["base"]))
    copies = _copies(monkeypatch)
    assert _rebuild(files, base) == len(files["new_data"])
    assert _read(files["output"]) == files["new_data"]
    # The moved region only: what sits where it was is there already.
    assert copies == [(800 * KIB, 600 * KIB, 40 * KIB)]
    # The rebuilt file's signature is cached, as without a prefill.
    assert blocks.cached(files["output"]).digests == \
        blocks.digests(files["new_data"])


def test_the_same_rebuild_without_a_prefill_copies_it_all(files,
                                                          monkeypatch):
    _rebuilt_without_the_prefill(files, monkeypatch)


def test_a_prefill_checked_by_the_images_hash(files):
    base = prefill.prefill(files["base"], files["output"])
    _rebuild(files, base, hash_algo="sha512",
             expected=hashlib.sha512(files["new_data"]).hexdigest())
    assert _read(files["output"]) == files["new_data"]


def test_a_base_changed_after_the_prefill_is_not_trusted(files,
                                                         monkeypatch):
    base = prefill.prefill(files["base"], files["output"])
    # Same bytes, touched: no longer the base the copy was made of.
    os.utime(files["base"], ns=(5, 5))
    blocks.ensure(files["base"])
    _rebuilt_without_the_prefill(files, monkeypatch, base)


def test_a_rejected_rebuild_of_a_prefill_leaves_no_output(files):
    base = prefill.prefill(files["base"], files["output"])
    data = bytearray(_read(files["delta"]))
    data[200] ^= 1
    _put(files["delta"], bytes(data))
    with pytest.raises(apply.Rejected):
        _rebuild(files, base)
    assert not os.path.exists(files["output"])


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
    copied = prefill.prefill(base, output)
    assert os.path.getsize(output) == 64 * MIB
    assert _allocated(output) < 4 * MIB
    apply.apply(base, str(tmp_path / "new.delta"), output,
                base_signature=blocks.cached(base), prefilled_from=copied)
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


def _pipe(text):
    """A pipe holding ``text``, then the end of input, as a text file."""
    read, write = os.pipe()
    os.write(write, text.encode())
    os.close(write)
    return os.fdopen(read)


def _meta_rebuild(files, monkeypatch, stdin):
    """gvfs-meta rebuild with ``stdin`` already waiting on its input."""
    with _pipe(stdin) as given:
        monkeypatch.setattr(sys, "stdin", given)
        return meta.main(["rebuild", "--base", files["base"], "--output",
                          files["output"]])


def _direct_io(directory):
    """Whether the file system of ``directory`` takes direct I/O."""
    try:
        os.close(os.open(os.path.join(directory, "probe"),
                         os.O_WRONLY | os.O_CREAT | os.O_DIRECT))
    except OSError:
        return False
    return True


def test_meta_rebuild_says_the_base_copies_it_and_applies_the_delta(
        files, monkeypatch, capsys):
    ahead = []
    real = prefill.Copier.copy

    def recording(copier, offset, length):
        ahead.append((offset, length))
        return real(copier, offset, length)

    monkeypatch.setattr(prefill.Copier, "copy", recording)
    copies = _copies(monkeypatch)
    assert _meta_rebuild(files, monkeypatch, files["delta"] + "\n") == 0
    assert capsys.readouterr().out.split() == [
        blocks.cached(files["base"]).identity().hex(),
        blocks.signature_path(files["base"])]
    assert _read(files["output"]) == files["new_data"]
    # The base copied once whole ahead (no signature of zeros to skip):
    # by direct I/O but for its last 300 bytes, where the file system
    # takes it; then the moved region by the rebuild.
    size = os.path.getsize(files["base"])
    assert ahead == [(0, size)]
    buffered = [(MIB, MIB, 300)] if _direct_io(os.path.dirname(
        files["output"])) else [(0, 0, size)]
    assert copies == buffered + [(800 * KIB, 600 * KIB, 40 * KIB)]


def _copied(tmp_path, offset, length, times=1):
    """The Copier that copied a base's ``length`` bytes at ``offset``.

    Into an empty file, ``times`` over; the bytes are checked.
    """
    data = os.urandom(offset + length + 7)
    base = _put(tmp_path / "base.img", data)
    output = str(tmp_path / "out.img")
    source = os.open(base, os.O_RDONLY)
    out = os.open(output, os.O_WRONLY | os.O_CREAT)
    try:
        with prefill.Copier(source, out) as copier:
            for _ in range(times):
                copier.copy(offset, length)
    finally:
        os.close(out)
        os.close(source)
    expected = bytes(offset) + data[offset:offset + length]
    assert _read(output) == expected
    return copier


def test_the_copy_goes_by_direct_io_where_the_file_system_takes_it(
        tmp_path):
    if not _direct_io(tmp_path):
        pytest.skip("this file system refuses direct I/O")
    copier = _copied(tmp_path, 1000, 3 * prefill.READ_SIZE // 2 + 123)
    assert copier.direct is not None


def test_a_file_system_without_reflinks_is_asked_once(tmp_path,
                                                      monkeypatch):
    asked = []

    def no_reflinks(fd, request, arg):
        asked.append(request)
        raise OSError(errno.EOPNOTSUPP, "no reflinks here")

    monkeypatch.setattr(prefill.fcntl, "ioctl", no_reflinks)
    copier = _copied(tmp_path, 0, 5 * BLOCK, times=2)
    assert asked == [prefill._FICLONERANGE]
    assert not copier.reflinks


def test_direct_io_refused_goes_through_the_page_cache(tmp_path,
                                                       monkeypatch):
    real = os.open

    def no_direct_io(path, flags, *args):
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "no direct I/O here")
        return real(path, flags, *args)

    monkeypatch.setattr(os, "open", no_direct_io)
    copier = _copied(tmp_path, BLOCK, 3 * prefill.READ_SIZE // 2)
    assert copier.direct is None


def test_a_direct_write_refused_midway_goes_on_buffered(tmp_path,
                                                        monkeypatch):
    if not _direct_io(tmp_path):
        pytest.skip("this file system refuses direct I/O")
    real = os.pwritev
    writes = []

    def refusing_the_second(fd, buffers, offset):
        writes.append(offset)
        if len(writes) == 2:
            raise OSError(errno.EINVAL, "not this one")
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "pwritev", refusing_the_second)
    copier = _copied(tmp_path, 0, 3 * prefill.READ_SIZE)
    assert writes == [0, prefill.READ_SIZE]
    assert copier.direct is None


def test_a_base_shorter_than_its_extents_is_a_changed_base(tmp_path):
    if not _direct_io(tmp_path):
        pytest.skip("this file system refuses direct I/O")
    base = _put(tmp_path / "base.img", os.urandom(2 * BLOCK))
    output = str(tmp_path / "out.img")
    source = os.open(base, os.O_RDONLY)
    out = os.open(output, os.O_WRONLY | os.O_CREAT)
    try:
        with prefill.Copier(source, out) as copier, \
                pytest.raises(prefill.BaseChanged):
            copier.copy(0, 4 * BLOCK)
    finally:
        os.close(out)
        os.close(source)


def test_meta_rebuild_without_a_delta_leaves_nothing(files, monkeypatch,
                                                     capsys):
    copied = []
    monkeypatch.setattr(prefill.Copier, "copy",
                        lambda copier, *run: copied.append(run))
    assert _meta_rebuild(files, monkeypatch, "") == 0
    assert not os.path.exists(files["output"])
    # The end of input was there before the copy began: none was made.
    assert copied == []


def test_a_copy_told_to_stop_midway_leaves_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(prefill, "SLICE", 2 * BLOCK)
    base = _put(tmp_path / "base.img", os.urandom(5 * BLOCK))
    output = str(tmp_path / "out.img")
    answers = iter([True, True, False])
    asked = []

    def going_on():
        asked.append(os.path.getsize(output))
        return next(answers)

    with pytest.raises(prefill.Stopped):
        prefill.prefill(base, output, going_on=going_on)
    # Asked before each slice: two were copied when it said stop.
    assert asked == [0, 2 * BLOCK, 4 * BLOCK]
    assert not os.path.exists(output)


def test_meta_rebuild_of_a_damaged_delta_is_rejected(files, monkeypatch,
                                                     capsys):
    data = bytearray(_read(files["delta"]))
    data[-1] ^= 1
    _put(files["delta"], bytes(data))
    assert _meta_rebuild(files, monkeypatch, files["delta"] + "\n") == \
        statuses.REJECTED
    assert "delta rejected" in capsys.readouterr().err
    assert not os.path.exists(files["output"])


def test_meta_rebuild_of_a_missing_base_fails_before_a_word(
        tmp_path, monkeypatch, capsys):
    files = {"base": str(tmp_path / "missing"),
             "output": str(tmp_path / "out.img")}
    assert _meta_rebuild(files, monkeypatch, "x\n") == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "gvfs-meta: rebuild from %s:" % files["base"] in captured.err
    assert not os.path.exists(files["output"])


def test_meta_rebuild_goes_on_without_the_copy_ahead(files, monkeypatch,
                                                     capsys, tmp_path):
    """A copy that cannot be made only costs the rebuild its time."""
    def refused(*args, **kwargs):
        raise PermissionError(13, "not here")

    monkeypatch.setattr(prefill, "prefill", refused)
    assert _meta_rebuild(files, monkeypatch, files["delta"] + "\n") == 0
    assert "the base is not copied ahead: " in capsys.readouterr().err
    assert _read(files["output"]) == files["new_data"]


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
    copied = prefill.prefill(base, output)
    if _allocated(output) > 5 * MIB:
        pytest.skip("this file system keeps no holes")
    apply.apply(base, str(tmp_path / "new.delta"), output,
                base_signature=blocks.cached(base), prefilled_from=copied)
    assert _read(output) == bytes(new)
    assert _allocated(output) <= 3 * MIB + 64 * KIB


def test_zeros_are_written_where_holes_cannot_be_punched(files,
                                                         monkeypatch):
    monkeypatch.setattr(prefill, "_fallocate", None)
    _rebuild(files, prefill.prefill(files["base"], files["output"]))
    assert _read(files["output"]) == files["new_data"]


def test_zero_runs_of_a_signature():
    one = os.urandom(BLOCK)
    data = one + bytes(2 * BLOCK) + one + bytes(BLOCK - 10)
    signature = blocks.Signature(len(data), 0, blocks.digests(data))
    assert signature.zero_runs() == [(BLOCK, 2 * BLOCK),
                                     (4 * BLOCK, BLOCK - 10)]
    assert blocks.Signature(BLOCK, 0, blocks.digests(one)).zero_runs() == []
