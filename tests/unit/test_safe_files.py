# SPDX-License-Identifier: Apache-2.0
"""Files written where others may plant links (``files.safe_files``)."""

import os

import pytest

from gvfs_openstack.files import durable
from gvfs_openstack.files import safe_files


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim"
    path.write_bytes(b"keep me")
    return path


def test_an_output_through_a_link_is_refused(tmp_path, victim):
    output = tmp_path / "out"
    output.symlink_to(victim)
    with pytest.raises(safe_files.UnsafeFile, match="symbolic link"):
        safe_files.open_output(str(output), 0o640)
    assert victim.read_bytes() == b"keep me"


def test_a_dangling_link_is_not_created_through(tmp_path):
    output = tmp_path / "out"
    output.symlink_to(tmp_path / "would-be-created")
    with pytest.raises(safe_files.UnsafeFile):
        safe_files.open_output(str(output), 0o640)
    assert not (tmp_path / "would-be-created").exists()


def test_a_fifo_is_refused_without_waiting_for_a_reader(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(safe_files.UnsafeFile, match="FIFO"):
        safe_files.open_output(str(fifo), 0o640)


def test_another_accounts_file_is_refused_and_kept(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.write_bytes(b"theirs")
    if os.geteuid() != 0:
        pytest.skip("needs root to give a file to another account")
    os.chown(theirs, os.geteuid() + 1, -1)
    with pytest.raises(safe_files.UnsafeFile, match="belongs to uid"):
        safe_files.open_output(str(theirs), 0o640)
    assert theirs.read_bytes() == b"theirs"


def test_an_own_file_is_emptied_or_kept_as_asked(tmp_path):
    mine = tmp_path / "mine"
    mine.write_bytes(b"old bytes")
    fd = safe_files.open_output(str(mine), 0o640, truncate=False)
    os.pwrite(fd, b"new", 0)
    os.close(fd)
    assert mine.read_bytes() == b"new bytes"
    fd = safe_files.open_output(str(mine), 0o640)
    os.close(fd)
    assert mine.read_bytes() == b""
    with pytest.raises(FileNotFoundError):
        safe_files.open_output(str(tmp_path / "absent"), 0o640,
                               create=False)


def test_a_temporary_name_planted_in_advance_is_passed_over(
        tmp_path, victim, monkeypatch):
    target = str(tmp_path / "sidecar")
    names = iter(["aaaa", "bbbb"])
    monkeypatch.setattr(safe_files.secrets, "token_hex",
                        lambda n: next(names))
    # The attacker guessed the first name.
    os.symlink(victim, target + ".tmp-aaaa")
    durable.replace_with(target, b"sidecar bytes", mode=0o640)
    assert victim.read_bytes() == b"keep me"
    assert open(target, "rb").read() == b"sidecar bytes"
    assert os.stat(target).st_mode & 0o777 == 0o640
    assert not os.path.exists(target + ".tmp-bbbb")


def test_replace_with_replaces_a_link_at_the_target(tmp_path, victim):
    target = tmp_path / "signature"
    target.symlink_to(victim)
    durable.replace_with(str(target), b"signature")
    assert not target.is_symlink()
    assert target.read_bytes() == b"signature"
    assert victim.read_bytes() == b"keep me"


def test_a_private_directory_is_created_0700(tmp_path):
    where = tmp_path / "cache" / "blocks"
    assert safe_files.private_directory(str(where)) == 0
    assert os.stat(where).st_mode & 0o777 == 0o700


def test_a_private_directory_open_to_others_is_closed(tmp_path):
    where = tmp_path / "cache"
    where.mkdir()
    where.chmod(0o755)
    assert safe_files.private_directory(str(where)) == 0o055
    assert os.stat(where).st_mode & 0o777 == 0o700


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_a_private_directory_of_another_account_is_refused(tmp_path):
    where = tmp_path / "cache"
    where.mkdir(mode=0o700)
    os.chown(where, 2004, 2004)
    with pytest.raises(safe_files.UnsafeFile, match="uid 2004"):
        safe_files.private_directory(str(where))
