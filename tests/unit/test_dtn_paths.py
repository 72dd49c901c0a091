# SPDX-License-Identifier: Apache-2.0
"""Removing and making names below an export without following a link.

The module the conductor runs on a DTN (issue 61, item 3), run here on
real directories: links planted at every component are removed as links
or refused, and what they name is untouched.
"""

import os

import pytest

from gvfs_openstack.files import dtn_paths


@pytest.fixture
def export(tmp_path):
    """An export with images and a victim outside it."""
    root = tmp_path / "export"
    (root / "images").mkdir(parents=True)
    (root / "images" / "golden").write_bytes(b"every DR copy")
    (root / "staging").mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keys").write_bytes(b"ssh-ed25519 AAAA\n")
    return root


def _untouched(export):
    assert (export / "images" / "golden").read_bytes() == b"every DR copy"
    assert (export.parent / "outside" / "keys").read_bytes() == \
        b"ssh-ed25519 AAAA\n"


def test_a_real_tree_is_removed(export):
    job = export / "staging" / "job"
    (job / "sub" / "deeper").mkdir(parents=True)
    (job / "img").write_bytes(b"x")
    (job / "sub" / "deeper" / "delta").write_bytes(b"y")
    done = dtn_paths.remove(str(export), "staging/job")
    assert done == {"path": "staging/job", "removed": 5, "links": []}
    assert os.listdir(export / "staging") == []
    # Gone already: nothing to do, no error.
    assert dtn_paths.remove(str(export), "staging/job")["removed"] == 0


def test_a_job_linked_to_the_images_loses_the_link_only(export):
    (export / "staging" / "job").symlink_to("../images")
    done = dtn_paths.remove(str(export), "staging/job")
    assert done["links"] == ["staging/job"]
    assert not os.path.lexists(export / "staging" / "job")
    _untouched(export)


def test_links_inside_a_job_are_removed_not_followed(export):
    job = export / "staging" / "job"
    (job / "sub").mkdir(parents=True)
    (job / "sub" / "images").symlink_to("../../../images")
    (job / "keys").symlink_to(export.parent / "outside" / "keys")
    (job / "golden").symlink_to("../../images/golden")
    done = dtn_paths.remove(str(export), "staging/job")
    assert sorted(done["links"]) == ["staging/job/golden",
                                     "staging/job/keys",
                                     "staging/job/sub/images"]
    assert not job.exists()
    _untouched(export)


def test_a_linked_staging_directory_is_refused(export):
    (export / "staging").rmdir()
    (export / "staging").symlink_to("images")
    (export / "images" / "job").mkdir()
    (export / "images" / "job" / "kept").write_bytes(b"k")
    with pytest.raises(dtn_paths.Refused,
                       match="refusing staging: it is a symbolic link"):
        dtn_paths.remove(str(export), "staging/job")
    assert (export / "images" / "job" / "kept").exists()
    _untouched(export)


def test_names_that_leave_the_root_are_refused(export):
    for name in ("..", "staging/../..", "", "/"):
        with pytest.raises(dtn_paths.Refused, match="not a name below"):
            dtn_paths.remove(str(export), name)
    _untouched(export)


def test_a_directory_is_made_as_its_parent(export):
    os.chmod(export / "staging", 0o2750)
    assert dtn_paths.make_dir(str(export), "staging/job") == {
        "path": "staging/job", "made": True}
    made, like = os.stat(export / "staging" / "job"), os.stat(
        export / "staging")
    assert (made.st_uid, made.st_gid, made.st_mode) == (
        like.st_uid, like.st_gid, like.st_mode)
    assert not dtn_paths.make_dir(str(export), "staging/job")["made"]


@pytest.mark.parametrize("plant", ["link", "file", "linked-parent"])
def test_making_through_anything_but_a_real_directory_is_refused(
        export, plant):
    job = export / "staging" / "job"
    if plant == "link":
        job.symlink_to("../images")
    elif plant == "file":
        job.write_bytes(b"")
    else:
        (export / "staging").rmdir()
        (export / "staging").symlink_to("images")
    with pytest.raises(dtn_paths.Refused, match="symbolic link or not a "
                       "directory"):
        dtn_paths.make_dir(str(export), "staging/job")
    assert sorted(os.listdir(export / "images")) == ["golden"]


@pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root")
def test_another_accounts_directory_is_refused(export):
    (export / "staging" / "job").mkdir()
    os.chown(export / "staging" / "job", 65534, 65534)
    with pytest.raises(dtn_paths.Refused, match="belongs to uid 65534"):
        dtn_paths.make_dir(str(export), "staging/job")


def test_main_prints_json_and_says_why_it_refused(export, capsys):
    (export / "staging" / "job").symlink_to("../images")
    assert dtn_paths.main(["remove", str(export), "staging/job"]) == 0
    assert '"links": ["staging/job"]' in capsys.readouterr().out
    assert dtn_paths.main(["mkdir", str(export), "images/golden/x"]) == 1
    assert "refusing images/golden: it is a symbolic link or not a " \
        "directory" in capsys.readouterr().err
    assert dtn_paths.main(["chmod", str(export), "x"]) == 2
