# SPDX-License-Identifier: Apache-2.0
"""Links planted in an export do not redirect what ``gvfs-meta`` writes.

Export clients can write in the directories where the DTN's tools write
sidecars, signatures, profiles, deltas and rebuilt images (a job's
staging directory among them).  Each test plants something under a name
the real ``gvfs-meta`` is about to write -- a link to the file account's
``authorized_keys``, a FIFO, another account's file -- runs the command
as the conductor does, and checks that the planted target is untouched
and the command says why it refused (issue 43, item 3).
"""

import os
import subprocess
import sys

import pytest

KEYS = b"ssh-ed25519 AAAA the file account's only key\n"
BLOCK = 4096


def _meta(*args, stdin=None):
    program = os.path.join(os.path.dirname(sys.executable), "gvfs-meta")
    return subprocess.run([program, *args], input=stdin, capture_output=True,
                          timeout=120, text=True)


@pytest.fixture
def dtn(tmp_path):
    """An export with a base, a new version of it, and a victim file."""
    export = tmp_path / "export"
    export.mkdir()
    base = os.urandom(64 * BLOCK)
    new = bytearray(base)
    new[5 * BLOCK:6 * BLOCK] = os.urandom(BLOCK)
    (export / "base.img").write_bytes(base)
    (export / "new.img").write_bytes(bytes(new))
    home = tmp_path / "home" / ".ssh"
    home.mkdir(parents=True)
    keys = home / "authorized_keys"
    keys.write_bytes(KEYS)
    return {"export": export, "keys": keys, "new": bytes(new)}


def _delta(dtn):
    export = dtn["export"]
    assert _meta("blocks", str(export / "base.img")).returncode == 0
    made = _meta("delta", "--base", str(export / "base.img"), "--output",
                 str(export / "new.delta"), str(export / "new.img"))
    assert made.returncode == 0, made.stderr
    return str(export / "new.delta")


def test_a_patch_output_linked_elsewhere_is_refused(dtn):
    delta = _delta(dtn)
    output = dtn["export"] / "staged.img"
    output.symlink_to(dtn["keys"])
    done = _meta("patch", "--base", str(dtn["export"] / "base.img"),
                 "--delta", delta, "--output", str(output))
    assert done.returncode == 1
    assert "refusing to write through" in done.stderr
    assert "symbolic link" in done.stderr
    assert dtn["keys"].read_bytes() == KEYS
    assert output.is_symlink()


def test_a_rebuild_output_linked_elsewhere_is_refused(dtn):
    """The destination's side: the copy ahead and the rebuild."""
    delta = _delta(dtn)
    output = dtn["export"] / "staged.img"
    output.symlink_to(dtn["keys"])
    done = _meta("rebuild", "--base", str(dtn["export"] / "base.img"),
                 "--output", str(output), stdin=delta + "\n")
    assert done.returncode == 1
    assert "not copied ahead: refusing to write through" in done.stderr
    assert dtn["keys"].read_bytes() == KEYS


def test_a_fifo_or_another_accounts_file_as_output_is_refused(dtn):
    delta = _delta(dtn)
    fifo = dtn["export"] / "fifo.img"
    os.mkfifo(fifo)
    done = _meta("patch", "--base", str(dtn["export"] / "base.img"),
                 "--delta", delta, "--output", str(fifo))
    assert done.returncode == 1
    assert "FIFO" in done.stderr
    theirs = dtn["export"] / "theirs.img"
    theirs.write_bytes(b"another account's bytes")
    os.chown(theirs, os.geteuid() + 1, -1)
    done = _meta("patch", "--base", str(dtn["export"] / "base.img"),
                 "--delta", delta, "--output", str(theirs))
    assert done.returncode == 1
    assert "belongs to uid %d" % (os.geteuid() + 1) in done.stderr
    assert theirs.read_bytes() == b"another account's bytes"


def test_the_same_patch_into_a_fresh_name_works(dtn):
    """The control: nothing planted, the output is the new version."""
    delta = _delta(dtn)
    output = dtn["export"] / "staged.img"
    done = _meta("patch", "--base", str(dtn["export"] / "base.img"),
                 "--delta", delta, "--output", str(output))
    assert done.returncode == 0, done.stderr
    assert output.read_bytes() == dtn["new"]


def test_files_made_by_rename_replace_a_planted_link(dtn):
    """Sidecars, signatures and deltas: the link goes, its target stays."""
    export = dtn["export"]
    planted = [export / ".gvfs-meta.new.img", export / "new.delta"]
    for name in planted:
        name.symlink_to(dtn["keys"])
    assert _meta("generate", str(export / "new.img")).returncode == 0
    _delta(dtn)
    for name in planted:
        assert not name.is_symlink() and name.is_file()
    assert dtn["keys"].read_bytes() == KEYS
