# SPDX-License-Identifier: Apache-2.0
"""Finding a FUSE mount's fusectl connection and setting its limit.

The real fusectl is written by the functional tests (test_fuse_mount.py);
here a mountinfo file and a connections directory made for the test.
"""

import pytest

from gvfs_openstack.mount import fusectl
from gvfs_openstack.mount import mountinfo

MOUNTINFO = """\
22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw
40 22 0:40 / /srv/gvfs\\040mnt rw,nosuid - fuse.gvfs gvfs:/x rw,user_id=0
41 22 0:300 / /srv/other rw - fuse.gvfs gvfs:/y rw,user_id=0
42 22 8:1 / /srv/disk rw - ext4 /dev/sda1 rw
43 22 0:301 / /srv/other rw - fuse.gvfs gvfs:/z rw,user_id=0
"""


@pytest.fixture
def proc_file(tmp_path):
    path = tmp_path / "proc_file"
    path.write_text(MOUNTINFO)
    return str(path)


def test_the_connection_is_the_kernels_device_number(proc_file):
    # Escaped spaces are undone; the name is major << 20 | minor.
    assert mountinfo.fuse_connection("/srv/gvfs mnt", proc_file) == "40"
    # Of two mounts on one path, the top one counts.
    assert mountinfo.fuse_connection("/srv/other", proc_file) == "301"
    assert mountinfo.fuse_connection("/srv/disk", proc_file) is None
    assert mountinfo.fuse_connection("/nowhere", proc_file) is None


def test_the_mounts_of_a_source_are_found_by_it(proc_file):
    # What the privileged mount takes away if a mount landed elsewhere.
    assert mountinfo.mounts_of("gvfs:/x", proc_file) == {
        ("40", "/srv/gvfs mnt")}
    assert mountinfo.mounts_of("/dev/sda1", proc_file) == {
        ("42", "/srv/disk")}
    assert mountinfo.mounts_of("gvfs:/nothing", proc_file) == set()


def _connection(root, name):
    directory = root / name
    directory.mkdir()
    for entry in ("max_background", "congestion_threshold"):
        (directory / entry).write_text("12\n")
    return directory


def test_the_limit_and_its_congestion_threshold_are_set(
        tmp_path, proc_file):
    directory = _connection(tmp_path, "301")
    assert fusectl.tune("/srv/other", 64, str(tmp_path), proc_file) == "301"
    assert (directory / "max_background").read_text() == "64\n"
    assert (directory / "congestion_threshold").read_text() == "48\n"
    assert fusectl.max_background("301", str(tmp_path)) == 64


def test_what_cannot_be_done_is_said(tmp_path, proc_file):
    with pytest.raises(fusectl.NotMounted):
        fusectl.tune("/srv/disk", 64, str(tmp_path), proc_file)
    with pytest.raises(fusectl.FusectlError, match="fusectl file system "
                                                   "is not mounted"):
        fusectl.tune("/srv/other", 64, str(tmp_path), proc_file)
    directory = tmp_path / "301"
    (directory / "max_background").mkdir(parents=True)
    with pytest.raises(fusectl.FusectlError, match="cannot set"):
        fusectl.tune("/srv/other", 64, str(tmp_path), proc_file)


def test_a_path_is_resolved_without_looking_at_it(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    # The last component is never looked at: it may be a mount whose
    # process is the caller.
    assert mountinfo.resolved(str(tmp_path / "link" / "not-there")) == \
        str(real / "not-there")


def test_read_ahead_is_set_on_the_mounts_backing_device(tmp_path,
                                                        proc_file):
    bdi = tmp_path / "bdi" / "0:301"      # mountinfo's 0:301
    bdi.mkdir(parents=True)
    (bdi / "read_ahead_kb").write_text("128\n")
    assert fusectl.tune_read_ahead("/srv/other", 4096, str(tmp_path / "bdi"),
                                   proc_file) == str(bdi / "read_ahead_kb")
    assert (bdi / "read_ahead_kb").read_text() == "4096\n"
    with pytest.raises(fusectl.FusectlError, match="cannot set"):
        fusectl.tune_read_ahead("/srv/gvfs mnt", 4096,
                                str(tmp_path / "bdi"), proc_file)
    with pytest.raises(fusectl.NotMounted):
        fusectl.tune_read_ahead("/srv/disk", 4096, str(tmp_path / "bdi"),
                                proc_file)
