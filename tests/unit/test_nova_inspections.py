# SPDX-License-Identifier: Apache-2.0
"""Golden images are inspected once per file, not once per clone."""

import os

import pytest

from gvfs_openstack.nova import inspections


class Inspector:
    def __init__(self):
        self.asked = []

    def __call__(self, path):
        self.asked.append(path)
        with open(path, "rb") as f:
            return "qcow2" if f.read(4) == b"QFI\xfb" else "raw"


def written(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def test_the_same_file_is_inspected_once(tmp_path):
    path = written(tmp_path / "golden", b"QFI\xfb" + bytes(100))
    inspect = Inspector()
    found = inspections.Inspections(inspect)
    assert [found.format_of(path) for _ in range(5)] == ["qcow2"] * 5
    assert len(inspect.asked) == 1


def test_a_file_replaced_or_touched_is_inspected_again(tmp_path):
    path = written(tmp_path / "golden", b"QFI\xfb" + bytes(100))
    inspect = Inspector()
    found = inspections.Inspections(inspect)
    assert found.format_of(path) == "qcow2"
    # Same size, same name, other bytes: a new file renamed over it.
    os.rename(written(path + ".new", bytes(104)), path)
    assert found.format_of(path) == "raw"
    # Written in place, with its times put back but for ctime.
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(b"QFI\xfb")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert found.format_of(path) == "qcow2"
    assert len(inspect.asked) == 3


def test_a_refusal_is_not_kept(tmp_path):
    path = str(tmp_path / "golden")
    with open(path, "wb") as f:
        f.write(bytes(10))
    calls = []

    def refuse(p):
        calls.append(p)
        raise ValueError("two formats at once")

    found = inspections.Inspections(refuse)
    for _ in range(2):
        with pytest.raises(ValueError):
            found.format_of(path)
    assert len(calls) == 2


def test_a_file_changed_while_inspected_is_not_kept(tmp_path):
    path = str(tmp_path / "golden")
    with open(path, "wb") as f:
        f.write(bytes(10))

    def inspect_while_written(p):
        with open(p, "ab") as f:
            f.write(b"more")
        return "raw"

    found = inspections.Inspections(inspect_while_written)
    found.format_of(path)
    found.format_of(path)
    assert os.path.getsize(path) == 18


def test_the_least_recently_used_files_go_first(tmp_path, monkeypatch):
    monkeypatch.setattr(inspections, "MAX_ENTRIES", 2)
    paths = []
    for name in "abc":
        paths.append(str(tmp_path / name))
        with open(paths[-1], "wb") as f:
            f.write(bytes(10))
    inspect = Inspector()
    found = inspections.Inspections(inspect)
    for path in paths[:2]:
        found.format_of(path)
    found.format_of(paths[0])       # b is now the oldest.
    found.format_of(paths[2])
    found.format_of(paths[0])
    found.format_of(paths[1])
    assert [os.path.basename(p) for p in inspect.asked] == \
        ["a", "b", "c", "b"]
