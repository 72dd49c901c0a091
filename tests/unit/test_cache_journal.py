# SPDX-License-Identifier: Apache-2.0
"""The write-back journal: append, replay, torn tails, corruption."""

import asyncio
import os

import pytest

from gvfs_openstack.proxy.cache import journal as journal_mod
from gvfs_openstack.proxy.cache.journal import Journal

CRED = (1, b"\x00\x00\x00\x01cred")


def _records(directory):
    j = Journal(directory)
    records = list(j.replay())
    data = [j.read(r.segment, r.position, r.length) for r in records]
    return j, records, data


def test_appended_writes_replay_in_order(tmp_path):
    j = Journal(str(tmp_path))
    j.append(b"fh-a", CRED, 0, b"hello")
    j.append(b"fh-b", (0, b""), 4096, b"x" * 10000)
    j.append(b"fh-a", CRED, 2, b"LL")
    j.close()
    again, records, data = _records(str(tmp_path))
    assert [(r.fh, r.cred, r.offset, r.length) for r in records] == [
        (b"fh-a", CRED, 0, 5), (b"fh-b", (0, b""), 4096, 10000),
        (b"fh-a", CRED, 2, 2)]
    assert data == [b"hello", b"x" * 10000, b"LL"]
    assert again.report.records == 3 and again.report.corrupt_records == 0
    # Record ids keep growing across a restart.
    assert len({r.record for r in records}) == 3
    segment, _, record = again.append(b"fh-c", CRED, 0, b"new")
    assert record > max(r.record for r in records)
    assert segment > max(r.segment for r in records), \
        "a restarted journal must not append to old segments"


def test_a_torn_tail_is_cut_and_counted(tmp_path):
    j = Journal(str(tmp_path))
    j.append(b"fh", CRED, 0, b"a" * 100)
    j.append(b"fh", CRED, 100, b"b" * 100)
    path = os.path.join(str(tmp_path), "journal-00000001.log")
    j.close()
    size = os.path.getsize(path)
    os.truncate(path, size - 30)  # The second record lost its end.
    again, records, data = _records(str(tmp_path))
    assert data == [b"a" * 100]
    assert again.report.lost_bytes == size - 30 - (size // 2)
    assert again.report.corrupt_records == 0


def test_corrupt_data_is_skipped_not_replayed(tmp_path):
    j = Journal(str(tmp_path))
    _, first_at, _ = j.append(b"fh", CRED, 0, b"a" * 100)
    j.append(b"fh", CRED, 100, b"b" * 100)
    j.close()
    path = os.path.join(str(tmp_path), "journal-00000001.log")
    with open(path, "r+b") as f:
        f.seek(first_at + 10)
        f.write(b"Z")
    again, records, data = _records(str(tmp_path))
    assert data == [b"b" * 100], "the corrupt record must not be replayed"
    assert again.report.corrupt_records == 1


def test_a_corrupt_header_ends_the_segment(tmp_path):
    j = Journal(str(tmp_path))
    j.append(b"fh", CRED, 0, b"a" * 100)
    j.close()
    path = os.path.join(str(tmp_path), "journal-00000001.log")
    with open(path, "r+b") as f:
        f.seek(12)  # Inside the offset field, covered by the header CRC.
        f.write(b"\xff")
    again, records, _ = _records(str(tmp_path))
    assert records == []
    assert again.report.lost_bytes == os.path.getsize(path)


def test_garbage_segments_never_raise(tmp_path):
    path = os.path.join(str(tmp_path), "journal-00000001.log")
    with open(path, "wb") as f:
        f.write(os.urandom(10000))
    with open(os.path.join(str(tmp_path), "notes.txt"), "w") as f:
        f.write("not a segment")
    again, records, _ = _records(str(tmp_path))
    assert records == []
    assert again.report.lost_bytes == 10000


def test_segments_rotate_and_release_frees_them(tmp_path):
    j = Journal(str(tmp_path), segment_size=500)
    placed = [j.append(b"fh", CRED, i * 600, b"x" * 600)[0]
              for i in range(4)]
    assert placed == [1, 2, 3, 4]
    j.release(keep={3})
    assert j.segments() == [3]
    assert sorted(os.listdir(str(tmp_path))) == ["journal-00000003.log"]
    assert j.size == os.path.getsize(os.path.join(str(tmp_path),
                                                  "journal-00000003.log"))
    # The active segment went too: the next write starts a new one.
    assert j.append(b"fh", CRED, 0, b"y")[0] == 4


@pytest.mark.asyncio
async def test_sync_is_shared_by_concurrent_callers(tmp_path, monkeypatch):
    calls = []
    real = journal_mod._fdatasync_all

    def counting(fds):
        calls.append(len(fds))
        real(fds)

    monkeypatch.setattr(journal_mod, "_fdatasync_all", counting)
    j = Journal(str(tmp_path))
    j.append(b"fh", CRED, 0, b"a")
    await asyncio.gather(*(j.sync() for _ in range(10)))
    await j.sync()  # Nothing new: no second fdatasync.
    assert calls == [1]


def test_a_refused_append_leaves_the_journal_as_it_was(tmp_path,
                                                       monkeypatch):
    j = Journal(str(tmp_path))
    j.append(b"fh", CRED, 0, b"a" * 10)
    size = j.size

    def full(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(journal_mod.os, "pwritev", full)
    with pytest.raises(OSError):
        j.append(b"fh", CRED, 10, b"b" * 10)
    monkeypatch.undo()
    assert j.size == size
    j.close()
    _, records, data = _records(str(tmp_path))
    assert data == [b"a" * 10]
