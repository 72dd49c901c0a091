# SPDX-License-Identifier: Apache-2.0
"""``[server] read_only_dirs``: which calls change a read-only image."""

import dataclasses

import pytest

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc as P
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.proxy import access
from gvfs_openstack.proxy.handles import Entry
from gvfs_openstack.proxy import read_only

ROOT, SRV, IMAGES, GOLDEN, REFS, PROFILE, OTHER = (
    b"root", b"srv", b"images", b"golden", b"refs", b"profile", b"other")
FILE = nfs3.Fattr(const.FileType.NF3REG, 0o640, 1, 4242, 4242, 1, 1,
                  nfs3.SpecData(0, 0), 1, 7, nfs3.NfsTime(0, 0),
                  nfs3.NfsTime(0, 0), nfs3.NfsTime(0, 0))
DIR = dataclasses.replace(FILE, type=const.FileType.NF3DIR)


def _learned():
    """The export /export, its read-only /export/srv/images, learned."""
    dirs = read_only.ReadOnlyDirs(["/export/srv/images"])
    dirs.learn_root("/export", ROOT)
    dirs.learn_entry(Entry(ROOT, "srv", SRV, DIR))
    dirs.learn_entry(Entry(ROOT, "elsewhere", OTHER, DIR))
    dirs.learn_entry(Entry(SRV, "images", IMAGES, DIR))
    dirs.learn_entry(Entry(IMAGES, "golden", GOLDEN, FILE))
    dirs.learn_entry(Entry(IMAGES, ".gvfs-refs", REFS, DIR))
    dirs.learn_entry(Entry(IMAGES, ".gvfs-meta.golden.profile", PROFILE,
                           FILE))
    dirs.walked = True
    return dirs


def _args(proc, args):
    return P(proc), nfs3.encode_args(proc, args)


CREATE_HOW = nfs3.CreateHow(const.CreateMode.UNCHECKED, nfs3.Sattr())


def _where(directory, name):
    return nfs3.DirOpArgs(directory, name)


REFUSED = [
    _args(P.WRITE, nfs3.WriteArgs(GOLDEN, 0, 4, const.StableHow.UNSTABLE,
                                  b"evil")),
    _args(P.SETATTR, nfs3.SetattrArgs(GOLDEN, nfs3.Sattr(size=0))),
    _args(P.REMOVE, nfs3.RemoveArgs(_where(IMAGES, "golden"))),
    _args(P.CREATE, nfs3.CreateArgs(_where(IMAGES, ".gvfs-meta.golden"),
                                    CREATE_HOW)),
    _args(P.CREATE, nfs3.CreateArgs(_where(IMAGES, "new-image"),
                                    CREATE_HOW)),
    _args(P.SYMLINK, nfs3.SymlinkArgs(_where(IMAGES, "l"), nfs3.Sattr(),
                                      "/etc/shadow")),
    _args(P.RENAME, nfs3.RenameArgs(_where(REFS, "bait"),
                                    _where(IMAGES, "golden"))),
    _args(P.RENAME, nfs3.RenameArgs(_where(IMAGES, "golden"),
                                    _where(REFS, "golden"))),
    _args(P.LINK, nfs3.LinkArgs(GOLDEN, _where(REFS, "again"))),
    _args(P.LINK, nfs3.LinkArgs(OTHER, _where(IMAGES, "planted"))),
]

PASSED = [
    _args(P.READ, nfs3.ReadArgs(GOLDEN, 0, 4096)),
    _args(P.COMMIT, nfs3.CommitArgs(GOLDEN, 0, 0)),
    _args(P.WRITE, nfs3.WriteArgs(PROFILE, 0, 2, const.StableHow.UNSTABLE,
                                  b"{}")),
    _args(P.WRITE, nfs3.WriteArgs(OTHER, 0, 2, const.StableHow.UNSTABLE,
                                  b"ok")),
    _args(P.CREATE, nfs3.CreateArgs(
        _where(IMAGES, ".gvfs-meta.golden.profile.0123456789ab.tmp"),
        CREATE_HOW)),
    _args(P.RENAME, nfs3.RenameArgs(
        _where(IMAGES, ".gvfs-meta.golden.profile.0123456789ab.tmp"),
        _where(IMAGES, ".gvfs-meta.golden.profile"))),
    _args(P.CREATE, nfs3.CreateArgs(_where(REFS, "host~instance~disk"),
                                    CREATE_HOW)),
    _args(P.REMOVE, nfs3.RemoveArgs(_where(REFS, "host~instance~disk"))),
    _args(P.MKDIR, nfs3.MkdirArgs(_where(IMAGES, ".gvfs-refs"),
                                  nfs3.Sattr())),
    _args(P.SETATTR, nfs3.SetattrArgs(REFS, nfs3.Sattr(mode=0o755))),
]


#: Changes of the way down to the read-only directory, or of its own
#: attributes: each puts another directory's files where the images were.
REFUSED_ON_THE_WAY = [
    # ``images`` renamed away, and a directory of one's own renamed,
    # linked or symlinked in as ``images``.
    _args(P.RENAME, nfs3.RenameArgs(_where(SRV, "images"),
                                    _where(OTHER, "old-images"))),
    _args(P.RENAME, nfs3.RenameArgs(_where(OTHER, "mine"),
                                    _where(SRV, "images"))),
    _args(P.SYMLINK, nfs3.SymlinkArgs(_where(SRV, "images"), nfs3.Sattr(),
                                      "../elsewhere")),
    _args(P.LINK, nfs3.LinkArgs(OTHER, _where(SRV, "images"))),
    _args(P.MKDIR, nfs3.MkdirArgs(_where(SRV, "images"), nfs3.Sattr())),
    _args(P.MKNOD, nfs3.MknodArgs(_where(SRV, "images"), nfs3.MknodData(
        const.FileType.NF3FIFO, nfs3.Sattr()))),
    _args(P.CREATE, nfs3.CreateArgs(_where(SRV, "images"), CREATE_HOW)),
    _args(P.REMOVE, nfs3.RemoveArgs(_where(SRV, "images"))),
    _args(P.RMDIR, nfs3.RemoveArgs(_where(SRV, "images"))),
    # The same one level up: ``srv`` leads down to it too.
    _args(P.RENAME, nfs3.RenameArgs(_where(ROOT, "srv"),
                                    _where(ROOT, "old-srv"))),
    _args(P.RMDIR, nfs3.RemoveArgs(_where(ROOT, "srv"))),
    _args(P.SYMLINK, nfs3.SymlinkArgs(_where(ROOT, "srv"), nfs3.Sattr(),
                                      "elsewhere")),
    # Its attributes, and its parents' (mode=000 hides every image).
    _args(P.SETATTR, nfs3.SetattrArgs(IMAGES, nfs3.Sattr(mode=0))),
    _args(P.SETATTR, nfs3.SetattrArgs(SRV, nfs3.Sattr(mode=0))),
    _args(P.SETATTR, nfs3.SetattrArgs(ROOT, nfs3.Sattr(mode=0))),
    # Directories in it, but the references' own.
    _args(P.MKDIR, nfs3.MkdirArgs(_where(IMAGES, "new-image"),
                                  nfs3.Sattr())),
    _args(P.RMDIR, nfs3.RemoveArgs(_where(IMAGES, "golden"))),
    _args(P.RENAME, nfs3.RenameArgs(_where(IMAGES, ".gvfs-refs"),
                                    _where(OTHER, "refs"))),
]

PASSED_ON_THE_WAY = [
    # Other names beside the way down, and the references' directory.
    _args(P.MKDIR, nfs3.MkdirArgs(_where(SRV, "instances"), nfs3.Sattr())),
    _args(P.RMDIR, nfs3.RemoveArgs(_where(SRV, "instances"))),
    _args(P.RENAME, nfs3.RenameArgs(_where(ROOT, "a"), _where(SRV, "b"))),
    _args(P.CREATE, nfs3.CreateArgs(_where(ROOT, "images"), CREATE_HOW)),
    _args(P.SYMLINK, nfs3.SymlinkArgs(_where(OTHER, "images"),
                                      nfs3.Sattr(), "x")),
    _args(P.SETATTR, nfs3.SetattrArgs(OTHER, nfs3.Sattr(mode=0o700))),
    _args(P.RMDIR, nfs3.RemoveArgs(_where(IMAGES, ".gvfs-refs"))),
    _args(P.MKDIR, nfs3.MkdirArgs(_where(REFS, "image-id"), nfs3.Sattr())),
    _args(P.RMDIR, nfs3.RemoveArgs(_where(REFS, "image-id"))),
]


@pytest.mark.parametrize("proc,args", REFUSED_ON_THE_WAY)
def test_a_change_of_the_way_down_is_refused(proc, args):
    assert _learned().refuses(proc, args)


@pytest.mark.parametrize("proc,args", PASSED_ON_THE_WAY)
def test_other_names_beside_the_way_down_pass(proc, args):
    assert _learned().refuses(proc, args) is None


def test_a_read_only_directory_inside_another_is_followed():
    """Its parent is read-only and on the way down at once."""
    dirs = read_only.ReadOnlyDirs(["/export/images",
                                   "/export/images/archive"])
    dirs.learn_root("/export", ROOT)
    dirs.learn_entry(Entry(ROOT, "images", IMAGES, DIR))
    dirs.learn_entry(Entry(IMAGES, "archive", SRV, DIR))
    dirs.learn_entry(Entry(SRV, "golden", GOLDEN, FILE))
    assert dirs.refuses(*REFUSED[0])
    assert dirs.refuses(*_args(P.RMDIR, nfs3.RemoveArgs(
        _where(IMAGES, "archive"))))
    assert dirs.refuses(*_args(P.SETATTR, nfs3.SetattrArgs(
        SRV, nfs3.Sattr(mode=0))))


@pytest.mark.parametrize("proc,args", REFUSED)
def test_a_change_of_a_read_only_image_is_refused(proc, args):
    assert _learned().refuses(proc, args)


@pytest.mark.parametrize("proc,args", PASSED)
def test_reads_references_and_profiles_pass(proc, args):
    assert _learned().refuses(proc, args) is None


def test_a_bulk_write_of_an_image_is_refused():
    dirs = _learned()

    def write(fh):
        return bulk.encode_args(bulk.BulkProc.WRITE, bulk.WriteArgs(
            fh, 0, 4, bulk.Codec.NONE, b"evil"))

    assert dirs.refuses_bulk_write(write(GOLDEN))
    assert dirs.refuses_bulk_write(write(OTHER)) is None


def test_a_mounted_subdirectory_or_file_is_known_too():
    dirs = read_only.ReadOnlyDirs(["/export/images"])
    dirs.learn_root("/export/images/", IMAGES)
    dirs.learn_root("/export/images/golden", GOLDEN)
    proc, args = REFUSED[0]
    assert dirs.refuses(proc, args)
    assert dirs.refuses(*_args(P.REMOVE, nfs3.RemoveArgs(
        _where(IMAGES, "golden"))))


def test_nothing_is_known_on_the_way_down_elsewhere():
    """Only names under the read-only path's own ancestors are followed."""
    dirs = read_only.ReadOnlyDirs(["/export/srv/images"])
    dirs.learn_root("/export", ROOT)
    dirs.learn_entry(Entry(ROOT, "images", OTHER, DIR))
    dirs.learn_entry(Entry(OTHER, "golden", GOLDEN, FILE))
    assert dirs.refuses(*REFUSED[0]) is None


def test_changes_wait_for_the_first_walk():
    dirs = read_only.ReadOnlyDirs(["/export/images"])
    assert dirs.needs_walk(P.WRITE) and dirs.needs_walk(P.SETATTR)
    assert not dirs.needs_walk(P.READ) and not dirs.needs_walk(P.CREATE)
    dirs.walked = True
    assert not dirs.needs_walk(P.WRITE)


@pytest.mark.parametrize("name,profile", [
    (".gvfs-meta.golden.profile", True),
    (".gvfs-meta.golden.profile.0123456789ab.tmp", True),
    (".gvfs-meta.golden", False),
    ("golden.profile", False),
    (".gvfs-meta.golden.tmp", False),
    ("golden", False),
])
def test_which_names_are_profiles(name, profile):
    assert read_only.names_a_profile(name) is profile


def test_read_only_dirs_outside_the_exports_are_refused():
    exports = access.ExportAllowlist(["/export"])
    assert exports.inside(["/export/images/"]) == ["/export/images"]
    for path in ("/srv/images", "images", "/export/../etc"):
        with pytest.raises(ValueError, match="inside an allowed export"):
            exports.inside([path])
