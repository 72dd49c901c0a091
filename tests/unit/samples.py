# SPDX-License-Identifier: Apache-2.0
"""Sample arguments and results for every MOUNTv3 and NFSv3 procedure."""

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import FileType
from gvfs_openstack.nfs.const import MountProc as M
from gvfs_openstack.nfs.const import Nfs3Proc as P
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3

FH = b"\x01\x02handle\xff"
T = nfs3.NfsTime(1700000000, 5)
ATTR = nfs3.Fattr(FileType.NF3REG, 0o644, 1, 4242, 4242, 1 << 33, 4096,
                  nfs3.SpecData(0, 0), 77, 1234, T, T, T)
WCC = nfs3.WccData(nfs3.WccAttr(10, T, T), ATTR)
DIROP = nfs3.DirOpArgs(FH, "name with ünicode")
SATTR = nfs3.Sattr(mode=0o600, uid=1, gid=2, size=0,
                   atime=const.TimeHow.SET_TO_SERVER_TIME, mtime=T)
OK = 0
FAIL = const.NfsStat.NFS3ERR_ACCES
R = nfs3.Result

NFS_ARGS = {
    P.NULL: None,
    P.GETATTR: nfs3.GetattrArgs(FH),
    P.SETATTR: nfs3.SetattrArgs(FH, SATTR, T),
    P.LOOKUP: nfs3.LookupArgs(DIROP),
    P.ACCESS: nfs3.AccessArgs(FH, 0x3F),
    P.READLINK: nfs3.ReadlinkArgs(FH),
    P.READ: nfs3.ReadArgs(FH, 1 << 40, 65536),
    P.WRITE: nfs3.WriteArgs(FH, 3, 5, const.StableHow.FILE_SYNC, b"hello"),
    P.CREATE: nfs3.CreateArgs(DIROP, nfs3.CreateHow(
        const.CreateMode.EXCLUSIVE, verf=b"12345678")),
    P.MKDIR: nfs3.MkdirArgs(DIROP, nfs3.Sattr()),
    P.SYMLINK: nfs3.SymlinkArgs(DIROP, nfs3.Sattr(mode=0o777), "../target"),
    P.MKNOD: nfs3.MknodArgs(DIROP, nfs3.MknodData(
        FileType.NF3CHR, nfs3.DeviceData(nfs3.Sattr(), nfs3.SpecData(1, 3)))),
    P.REMOVE: nfs3.RemoveArgs(DIROP),
    P.RMDIR: nfs3.RemoveArgs(DIROP),
    P.RENAME: nfs3.RenameArgs(DIROP, nfs3.DirOpArgs(FH, "other")),
    P.LINK: nfs3.LinkArgs(FH, DIROP),
    P.READDIR: nfs3.ReaddirArgs(FH, 0, b"\0" * 8, 4096),
    P.READDIRPLUS: nfs3.ReaddirplusArgs(FH, 7, b"verf0001", 1024, 8192),
    P.FSSTAT: nfs3.FsrootArgs(FH),
    P.FSINFO: nfs3.FsrootArgs(FH),
    P.PATHCONF: nfs3.FsrootArgs(FH),
    P.COMMIT: nfs3.CommitArgs(FH, 0, 0),
}

NEWOBJ = nfs3.NewObjOk(FH, ATTR, WCC)
NFS_RESULTS = {
    P.NULL: [None],
    P.GETATTR: [R(OK, nfs3.GetattrOk(ATTR)), R(FAIL)],
    P.SETATTR: [R(OK, nfs3.WccBody(WCC)), R(FAIL, nfs3.WccBody(WCC))],
    P.LOOKUP: [R(OK, nfs3.LookupOk(FH, ATTR, None)),
               R(const.NfsStat.NFS3ERR_NOENT, nfs3.AttrBody(ATTR))],
    P.ACCESS: [R(OK, nfs3.AccessOk(ATTR, 1)), R(FAIL, nfs3.AttrBody(None))],
    P.READLINK: [R(OK, nfs3.ReadlinkOk(None, "/x/y"))],
    P.READ: [R(OK, nfs3.ReadOk(ATTR, 3, True, b"abc")),
             R(FAIL, nfs3.AttrBody(ATTR))],
    P.WRITE: [R(OK, nfs3.WriteOk(WCC, 5, const.StableHow.UNSTABLE,
                                 b"verifier")),
              R(const.NfsStat.NFS3ERR_NOSPC, nfs3.WccBody(WCC))],
    P.CREATE: [R(OK, NEWOBJ), R(FAIL, nfs3.WccBody(nfs3.WccData()))],
    P.MKDIR: [R(OK, nfs3.NewObjOk(None, None, WCC))],
    P.SYMLINK: [R(OK, NEWOBJ)],
    P.MKNOD: [R(OK, NEWOBJ)],
    P.REMOVE: [R(OK, nfs3.WccBody(WCC))],
    P.RMDIR: [R(const.NfsStat.NFS3ERR_NOTEMPTY, nfs3.WccBody(WCC))],
    P.RENAME: [R(OK, nfs3.RenameBody(WCC, WCC))],
    P.LINK: [R(OK, nfs3.LinkBody(ATTR, WCC))],
    P.READDIR: [R(OK, nfs3.ReaddirOk(ATTR, b"cookie!!", (
        nfs3.DirEntry(1, ".", 1), nfs3.DirEntry(2, "file", 2)), True))],
    P.READDIRPLUS: [R(OK, nfs3.ReaddirplusOk(None, b"cookie!!", (
        nfs3.DirEntryPlus(3, "a", 1, ATTR, FH),
        nfs3.DirEntryPlus(4, "b", 2, None, None)), False))],
    P.FSSTAT: [R(OK, nfs3.FsstatOk(ATTR, 1, 2, 3, 4, 5, 6, 0))],
    P.FSINFO: [R(OK, nfs3.FsinfoOk(ATTR, 1 << 20, 1 << 20, 4096, 1 << 20,
                                   1 << 20, 4096, 8192, 1 << 62,
                                   nfs3.NfsTime(0, 1), 0x1B))],
    P.PATHCONF: [R(OK, nfs3.PathconfOk(ATTR, 32000, 255, True, True, False,
                                       True))],
    P.COMMIT: [R(OK, nfs3.CommitOk(WCC, b"verifier"))],
}

MOUNT_ARGS = {
    M.NULL: None, M.MNT: mount3.MntArgs("/srv/images"), M.DUMP: None,
    M.UMNT: mount3.MntArgs("/srv/images"), M.UMNTALL: None, M.EXPORT: None,
}
MOUNT_RESULTS = {
    M.NULL: [None],
    M.MNT: [R(OK, mount3.MntOk(FH, (1,))),
            R(const.MountStat.MNT3ERR_ACCES)],
    M.DUMP: [mount3.MountList((mount3.MountEntry("host", "/srv"),))],
    M.UMNT: [None],
    M.UMNTALL: [None],
    M.EXPORT: [mount3.ExportList((mount3.ExportNode("/srv", ("*", "a")),
                                  mount3.ExportNode("/tmp", ())))],
}
