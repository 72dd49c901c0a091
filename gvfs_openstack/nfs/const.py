# SPDX-License-Identifier: Apache-2.0
"""Numbers of ONC-RPC (RFC 5531), MOUNTv3 and NFSv3 (RFC 1813)."""

import enum

RPC_VERSION = 2

# RFC 5531 section 9 and appendix A.
NFS_PROGRAM = 100003
NFS_V3 = 3
MOUNT_PROGRAM = 100005
MOUNT_V3 = 3


class MsgType(enum.IntEnum):
    CALL = 0
    REPLY = 1


class ReplyStat(enum.IntEnum):
    MSG_ACCEPTED = 0
    MSG_DENIED = 1


class AcceptStat(enum.IntEnum):
    SUCCESS = 0
    PROG_UNAVAIL = 1
    PROG_MISMATCH = 2
    PROC_UNAVAIL = 3
    GARBAGE_ARGS = 4
    SYSTEM_ERR = 5


class RejectStat(enum.IntEnum):
    RPC_MISMATCH = 0
    AUTH_ERROR = 1


class AuthStat(enum.IntEnum):
    AUTH_OK = 0
    AUTH_BADCRED = 1
    AUTH_REJECTEDCRED = 2
    AUTH_BADVERF = 3
    AUTH_REJECTEDVERF = 4
    AUTH_TOOWEAK = 5
    AUTH_INVALIDRESP = 6
    AUTH_FAILED = 7


class AuthFlavor(enum.IntEnum):
    AUTH_NONE = 0
    AUTH_SYS = 1
    AUTH_SHORT = 2
    AUTH_DH = 3
    RPCSEC_GSS = 6


class Nfs3Proc(enum.IntEnum):
    """RFC 1813 section 3: the 22 NFSv3 procedures."""

    NULL = 0
    GETATTR = 1
    SETATTR = 2
    LOOKUP = 3
    ACCESS = 4
    READLINK = 5
    READ = 6
    WRITE = 7
    CREATE = 8
    MKDIR = 9
    SYMLINK = 10
    MKNOD = 11
    REMOVE = 12
    RMDIR = 13
    RENAME = 14
    LINK = 15
    READDIR = 16
    READDIRPLUS = 17
    FSSTAT = 18
    FSINFO = 19
    PATHCONF = 20
    COMMIT = 21


#: Procedures whose replay after a lost reply may do something different
#: the second time (RFC 1813 section 4.4 and the classic duplicate request
#: cache argument).  These are never re-sent blindly.
NON_IDEMPOTENT = frozenset({
    Nfs3Proc.SETATTR, Nfs3Proc.CREATE, Nfs3Proc.MKDIR, Nfs3Proc.SYMLINK,
    Nfs3Proc.MKNOD, Nfs3Proc.REMOVE, Nfs3Proc.RMDIR, Nfs3Proc.RENAME,
    Nfs3Proc.LINK,
})


class MountProc(enum.IntEnum):
    """RFC 1813 section 5.2: MOUNTv3 procedures."""

    NULL = 0
    MNT = 1
    DUMP = 2
    UMNT = 3
    UMNTALL = 4
    EXPORT = 5


class MountStat(enum.IntEnum):
    MNT3_OK = 0
    MNT3ERR_PERM = 1
    MNT3ERR_NOENT = 2
    MNT3ERR_IO = 5
    MNT3ERR_ACCES = 13
    MNT3ERR_NOTDIR = 20
    MNT3ERR_INVAL = 22
    MNT3ERR_NAMETOOLONG = 63
    MNT3ERR_NOTSUPP = 10004
    MNT3ERR_SERVERFAULT = 10006


class NfsStat(enum.IntEnum):
    """RFC 1813 section 2.6: nfsstat3."""

    NFS3_OK = 0
    NFS3ERR_PERM = 1
    NFS3ERR_NOENT = 2
    NFS3ERR_IO = 5
    NFS3ERR_NXIO = 6
    NFS3ERR_ACCES = 13
    NFS3ERR_EXIST = 17
    NFS3ERR_XDEV = 18
    NFS3ERR_NODEV = 19
    NFS3ERR_NOTDIR = 20
    NFS3ERR_ISDIR = 21
    NFS3ERR_INVAL = 22
    NFS3ERR_FBIG = 27
    NFS3ERR_NOSPC = 28
    NFS3ERR_ROFS = 30
    NFS3ERR_MLINK = 31
    NFS3ERR_NAMETOOLONG = 63
    NFS3ERR_NOTEMPTY = 66
    NFS3ERR_DQUOT = 69
    NFS3ERR_STALE = 70
    NFS3ERR_REMOTE = 71
    NFS3ERR_BADHANDLE = 10001
    NFS3ERR_NOT_SYNC = 10002
    NFS3ERR_BAD_COOKIE = 10003
    NFS3ERR_NOTSUPP = 10004
    NFS3ERR_TOOSMALL = 10005
    NFS3ERR_SERVERFAULT = 10006
    NFS3ERR_BADTYPE = 10007
    NFS3ERR_JUKEBOX = 10008


class FileType(enum.IntEnum):
    NF3REG = 1
    NF3DIR = 2
    NF3BLK = 3
    NF3CHR = 4
    NF3LNK = 5
    NF3SOCK = 6
    NF3FIFO = 7


class StableHow(enum.IntEnum):
    UNSTABLE = 0
    DATA_SYNC = 1
    FILE_SYNC = 2


class CreateMode(enum.IntEnum):
    UNCHECKED = 0
    GUARDED = 1
    EXCLUSIVE = 2


class TimeHow(enum.IntEnum):
    DONT_CHANGE = 0
    SET_TO_SERVER_TIME = 1
    SET_TO_CLIENT_TIME = 2


# RFC 1813 section 2.5 / 5.1 size limits.
NFS3_FHSIZE = 64
NFS3_COOKIEVERFSIZE = 8
NFS3_CREATEVERFSIZE = 8
NFS3_WRITEVERFSIZE = 8
MNTPATHLEN = 1024
MNTNAMLEN = 255

# ACCESS3 bits (section 3.3.4).
ACCESS3_READ = 0x0001
ACCESS3_LOOKUP = 0x0002
ACCESS3_MODIFY = 0x0004
ACCESS3_EXTEND = 0x0008
ACCESS3_DELETE = 0x0010
ACCESS3_EXECUTE = 0x0020


def status_name(status: int) -> str:
    """A readable name for an nfsstat3 or mountstat3 value."""
    for enum_type in (NfsStat, MountStat):
        try:
            return enum_type(status).name
        except ValueError:
            continue
    return "UNKNOWN_STATUS"
