# SPDX-License-Identifier: Apache-2.0
"""Links planted in a staging directory do not steer the conductor's
clean-up (issue 61, item 3).

Export clients write in the destination DTN's staging directory and,
through the proxies, in the export's root above it.  Removed by path over
SFTP, a job's staging directory planted as ``<job> -> ../images`` emptied
the destination's ``images/``: every DR copy.  Each test plants a link at
one component -- the job's directory, the staging directory itself, a
directory or a file inside the job's -- and runs the conductor's own
clean-up (``cleanup._remove_destination``, as the job's end runs it)
against a real sshd standing for the DTN, then checks that what the
links name is untouched and that the links are removed or the clean-up
refused, saying why.  The control case: a real staging directory with
files and subdirectories goes entirely.
"""

import dataclasses
import logging
import os
import types

import pytest

from gvfs_lab import drlab
from gvfs_lab import sshd as sshd_lab
from gvfs_openstack.migration import cleanup
from gvfs_openstack.migration import dtnssh
from gvfs_openstack.migration import sites

JOB = "job-61"
GOLDEN = b"a DR copy other projects boot from"
KEYS = b"ssh-ed25519 AAAA the file account's key\n"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = sshd_lab.Sshd(str(tmp_path_factory.mktemp("sshd")))
    yield server
    server.stop()


@pytest.fixture
def dtn(tmp_path):
    """The destination's export, laid out as the DR lab's; a victim."""
    export = tmp_path / "export"
    images = export / drlab.IMAGES_DIR
    images.mkdir(parents=True)
    (images / "golden").write_bytes(GOLDEN)
    (export / drlab.STAGING_DIR).mkdir()
    home = tmp_path / "home"
    home.mkdir()
    (home / "authorized_keys").write_bytes(KEYS)
    return types.SimpleNamespace(export=export, images=images,
                                 staging=export / drlab.STAGING_DIR,
                                 job=export / drlab.STAGING_DIR / JOB,
                                 keys=home / "authorized_keys")


def _ctx(sshd, dtn):
    """What the clean-up reads of a job: its id and its destination."""
    values = {f.name: None for f in dataclasses.fields(sites.Site)}
    values.update(name="west", dtn_export=str(dtn.export),
                  dtn_images_dir=drlab.IMAGES_DIR,
                  dtn_staging_dir=drlab.STAGING_DIR, ssh_host="127.0.0.1",
                  ssh_port=sshd.port, ssh_user=sshd.user,
                  ssh_key_file=sshd.key, ssh_known_hosts=sshd.known_hosts)
    return types.SimpleNamespace(destination=sites.Site(**values),
                                 job_id=JOB)


def _untouched(dtn):
    assert os.listdir(dtn.images) == ["golden"]
    assert (dtn.images / "golden").read_bytes() == GOLDEN
    assert dtn.keys.read_bytes() == KEYS


def test_a_real_staging_directory_is_removed_entirely(sshd, dtn):
    (dtn.job / "delta" / "parts").mkdir(parents=True)
    (dtn.job / "image-a").write_bytes(os.urandom(4096))
    (dtn.job / ".gvfs-pack.tar.zst").write_bytes(b"archive")
    (dtn.job / "delta" / "parts" / "0").write_bytes(b"part")
    cleanup._remove_destination(_ctx(sshd, dtn))
    assert not dtn.job.exists()
    assert dtn.staging.is_dir()
    cleanup._remove_destination(_ctx(sshd, dtn))    # Gone: nothing to do.
    _untouched(dtn)


def test_a_job_directory_linked_to_the_images_loses_only_the_link(
        sshd, dtn, caplog):
    dtn.job.symlink_to("../" + drlab.IMAGES_DIR)
    with caplog.at_level(logging.WARNING, "gvfs_openstack.migration"):
        cleanup._remove_destination(_ctx(sshd, dtn))
    _untouched(dtn)
    assert not os.path.lexists(dtn.job)
    assert "job %s: %s/%s at site west was a symbolic link, planted in " \
        "its staging directory: removed, not followed" % (
            JOB, drlab.STAGING_DIR, JOB) in caplog.text


def test_links_inside_a_job_directory_are_removed_not_followed(
        sshd, dtn, caplog):
    (dtn.job / "sub").mkdir(parents=True)
    (dtn.job / "staged-image").write_bytes(b"staged")
    (dtn.job / "sub" / "images").symlink_to("../../../images")
    (dtn.job / "golden").symlink_to(dtn.images / "golden")
    (dtn.job / "keys").symlink_to(dtn.keys)
    with caplog.at_level(logging.WARNING, "gvfs_openstack.migration"):
        cleanup._remove_destination(_ctx(sshd, dtn))
    _untouched(dtn)
    assert not os.path.lexists(dtn.job)
    for link in ("golden", "keys", "sub/images"):
        assert "%s/%s/%s at site west was a symbolic link" % (
            drlab.STAGING_DIR, JOB, link) in caplog.text


def test_a_linked_staging_directory_is_refused_and_nothing_removed(
        sshd, dtn):
    dtn.staging.rmdir()
    dtn.staging.symlink_to(drlab.IMAGES_DIR)
    (dtn.images / JOB).mkdir()
    (dtn.images / JOB / "kept").write_bytes(b"kept")
    with pytest.raises(dtnssh.CommandFailed,
                       match="refusing %s: it is a symbolic link or not a "
                             "directory; not followed" % drlab.STAGING_DIR):
        cleanup._remove_destination(_ctx(sshd, dtn))
    assert (dtn.images / JOB / "kept").read_bytes() == b"kept"
    assert (dtn.images / "golden").read_bytes() == GOLDEN
    assert dtn.staging.is_symlink()


@pytest.mark.parametrize("plant", ["job", "staging"])
def test_a_job_directory_is_not_made_through_a_planted_link(
        sshd, dtn, plant):
    if plant == "job":
        dtn.job.symlink_to("../" + drlab.IMAGES_DIR)
    else:
        dtn.staging.rmdir()
        dtn.staging.symlink_to(drlab.IMAGES_DIR)
    site = _ctx(sshd, dtn).destination
    with dtnssh.connect(site, "image", "a stage") as session:
        with pytest.raises(dtnssh.CommandFailed,
                           match="symbolic link or not a directory"):
            session.make_dir_as_parent(site.export_path(
                site.staging_dir(JOB)))
    _untouched(dtn)
