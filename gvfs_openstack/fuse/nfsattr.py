# SPDX-License-Identifier: Apache-2.0
"""Between NFSv3 attributes and statuses and their POSIX counterparts."""

import errno
import os
import stat

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import nfs3

S = const.NfsStat

#: RFC 1813 section 2.6; most values are Linux errnos already, but not
#: all (NAMETOOLONG is 63 in NFS and 36 in Linux), so every one is named.
ERRNO = {
    S.NFS3ERR_PERM: errno.EPERM,
    S.NFS3ERR_NOENT: errno.ENOENT,
    S.NFS3ERR_IO: errno.EIO,
    S.NFS3ERR_NXIO: errno.ENXIO,
    S.NFS3ERR_ACCES: errno.EACCES,
    S.NFS3ERR_EXIST: errno.EEXIST,
    S.NFS3ERR_XDEV: errno.EXDEV,
    S.NFS3ERR_NODEV: errno.ENODEV,
    S.NFS3ERR_NOTDIR: errno.ENOTDIR,
    S.NFS3ERR_ISDIR: errno.EISDIR,
    S.NFS3ERR_INVAL: errno.EINVAL,
    S.NFS3ERR_FBIG: errno.EFBIG,
    S.NFS3ERR_NOSPC: errno.ENOSPC,
    S.NFS3ERR_ROFS: errno.EROFS,
    S.NFS3ERR_MLINK: errno.EMLINK,
    S.NFS3ERR_NAMETOOLONG: errno.ENAMETOOLONG,
    S.NFS3ERR_NOTEMPTY: errno.ENOTEMPTY,
    S.NFS3ERR_DQUOT: errno.EDQUOT,
    S.NFS3ERR_STALE: errno.ESTALE,
    S.NFS3ERR_REMOTE: errno.EREMOTE,
    S.NFS3ERR_BADHANDLE: errno.ESTALE,
    S.NFS3ERR_NOT_SYNC: errno.EIO,
    S.NFS3ERR_BAD_COOKIE: errno.EINVAL,
    S.NFS3ERR_NOTSUPP: errno.EOPNOTSUPP,
    S.NFS3ERR_TOOSMALL: errno.EINVAL,
    S.NFS3ERR_SERVERFAULT: errno.EIO,
    S.NFS3ERR_BADTYPE: errno.EINVAL,
    S.NFS3ERR_JUKEBOX: errno.EAGAIN,
}

_FORMAT = {
    const.FileType.NF3REG: stat.S_IFREG,
    const.FileType.NF3DIR: stat.S_IFDIR,
    const.FileType.NF3BLK: stat.S_IFBLK,
    const.FileType.NF3CHR: stat.S_IFCHR,
    const.FileType.NF3LNK: stat.S_IFLNK,
    const.FileType.NF3SOCK: stat.S_IFSOCK,
    const.FileType.NF3FIFO: stat.S_IFIFO,
}

#: What MKNOD makes, by the S_IFMT bits of mknod(2)'s mode.
MKNOD_TYPES = {
    stat.S_IFIFO: const.FileType.NF3FIFO,
    stat.S_IFSOCK: const.FileType.NF3SOCK,
    stat.S_IFCHR: const.FileType.NF3CHR,
    stat.S_IFBLK: const.FileType.NF3BLK,
}

_NS = 1_000_000_000


def errno_of(status):
    """The errno for an nfsstat3; EIO for one RFC 1813 does not define."""
    return ERRNO.get(status, errno.EIO)


def stat_fields(fattr, ino, blksize):
    """``st_*`` fields of a fattr3, for inode number ``ino``."""
    return {
        "st_ino": ino,
        "st_mode": _FORMAT.get(fattr.type, stat.S_IFREG)
        | stat.S_IMODE(fattr.mode),
        "st_nlink": fattr.nlink,
        "st_uid": fattr.uid,
        "st_gid": fattr.gid,
        "st_rdev": os.makedev(fattr.rdev.major, fattr.rdev.minor),
        "st_size": fattr.size,
        "st_blocks": (fattr.used + 511) // 512,
        "st_blksize": blksize,
        "st_atime_ns": fattr.atime.nanoseconds,
        "st_mtime_ns": fattr.mtime.nanoseconds,
        "st_ctime_ns": fattr.ctime.nanoseconds,
    }


class NotRepresentable(OverflowError):
    """A value NFSv3 cannot carry (a time outside its 32-bit seconds)."""


#: nfstime3 seconds are an unsigned 32-bit count (RFC 1813 section 2.5):
#: 1970 to early 2106.
_NFS_TIME_MAX_NS = (1 << 32) * _NS - 1


def nfs_time(ns):
    """``ns`` since the epoch as an nfstime3.

    Raises NotRepresentable for a time the protocol cannot carry (before
    1970, from 2106 on) instead of sending a wrapped one.
    """
    if not 0 <= ns <= _NFS_TIME_MAX_NS:
        raise NotRepresentable("time %d ns is outside what NFSv3 carries"
                               % ns)
    return nfs3.NfsTime(ns // _NS, ns % _NS)


def sattr(fields, attrs):
    """The sattr3 for a FUSE setattr.

    ``fields`` names what changes (``mode``, ``size`` ...), ``attrs``
    holds the new ``st_*`` values.
    """
    return nfs3.Sattr(
        mode=stat.S_IMODE(attrs["st_mode"]) if fields["mode"] else None,
        uid=attrs["st_uid"] if fields["uid"] else None,
        gid=attrs["st_gid"] if fields["gid"] else None,
        size=attrs["st_size"] if fields["size"] else None,
        atime=nfs_time(attrs["st_atime_ns"]) if fields["atime"] else None,
        mtime=nfs_time(attrs["st_mtime_ns"]) if fields["mtime"] else None)
