# SPDX-License-Identifier: Apache-2.0
"""NFSv3 data types and the arguments and results of all 22 procedures.

Each type is a frozen dataclass paired with its XDR layout from RFC 1813
(section numbers next to each group).  ``encode_args`` / ``decode_args`` /
``encode_res`` / ``decode_res`` map a procedure number to its codecs;
decoding raises only :class:`ProtocolError` whatever the bytes.
"""

from collections.abc import Callable
from collections.abc import Mapping
import dataclasses
import struct
from typing import Any
from typing import TypeAlias

from gvfs_openstack.nfs import codec as c
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc as P
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs.errors import XdrError
from gvfs_openstack.nfs.xdr import BytesLike
from gvfs_openstack.nfs.xdr import Packer
from gvfs_openstack.nfs.xdr import Unpacker

# --- basic data types (section 2.5) -----------------------------------------

FH = c.opaque(const.NFS3_FHSIZE)          # nfs_fh3
FILENAME = c.name()                        # filename3: no NUL, no /
NFSPATH = c.string()                       # nfspath3
COOKIEVERF = c.fixed_opaque(const.NFS3_COOKIEVERFSIZE)
CREATEVERF = c.fixed_opaque(const.NFS3_CREATEVERFSIZE)
WRITEVERF = c.fixed_opaque(const.NFS3_WRITEVERFSIZE)
STATUS = c.INT32                           # nfsstat3, kept as a plain int


@c.xdr_struct(c.UINT32, c.UINT32)
class NfsTime(c.XdrStruct):
    seconds: int
    nseconds: int = 0

    @property
    def nanoseconds(self) -> int:
        """The time in nanoseconds since the epoch, as ``st_mtime_ns``."""
        return self.seconds * 1_000_000_000 + self.nseconds


@c.xdr_struct(c.UINT32, c.UINT32)
class SpecData(c.XdrStruct):
    major: int = 0
    minor: int = 0


@c.xdr_struct(c.enum(const.FileType), c.UINT32, c.UINT32, c.UINT32,
              c.UINT32, c.UINT64, c.UINT64, SpecData.CODEC, c.UINT64,
              c.UINT64, NfsTime.CODEC, NfsTime.CODEC, NfsTime.CODEC)
class Fattr(c.XdrStruct):
    """fattr3 (section 2.5)."""

    type: const.FileType
    mode: int
    nlink: int
    uid: int
    gid: int
    size: int
    used: int
    rdev: SpecData
    fsid: int
    fileid: int
    atime: NfsTime
    mtime: NfsTime
    ctime: NfsTime


class _FattrCodec(c.Codec[Fattr]):
    """fattr3 with one ``struct`` call each way.

    Every READ reply carries one, and decoding it field by field was a
    sixth of the FUSE mount's CPU per cached 64 KiB READ.  Same bytes and
    values as the declarative ``Struct`` it replaces (tests/unit/test_nfs3.py
    checks both against each other).
    """

    LAYOUT = struct.Struct(">iIIIIQQIIQQIIIIII")

    def __init__(self, reference: c.Codec[Any]) -> None:
        #: The declarative codec: its fields are the wire order.
        self.reference = reference
        self._types = {int(t): t for t in const.FileType}

    def pack(self, packer: Packer, value: Fattr) -> None:
        try:
            packer.pack_fopaque(self.LAYOUT.size, self.LAYOUT.pack(
                int(value.type), value.mode, value.nlink, value.uid,
                value.gid, value.size, value.used, value.rdev.major,
                value.rdev.minor, value.fsid, value.fileid,
                value.atime.seconds, value.atime.nseconds,
                value.mtime.seconds, value.mtime.nseconds,
                value.ctime.seconds, value.ctime.nseconds))
        except struct.error as e:
            raise ValueError("fattr3 field out of range: %s" % e) from e

    def unpack(self, unpacker: Unpacker) -> Fattr:
        (kind, mode, nlink, uid, gid, size, used, major, minor, fsid,
         fileid, asec, ansec, msec, mnsec, csec, cnsec) = \
            self.LAYOUT.unpack(unpacker.unpack_fopaque_view(
                self.LAYOUT.size))
        try:
            kind = self._types[kind]
        except KeyError:
            raise XdrError("enum value %d is not one of %s"
                           % (kind, sorted(self._types))) from None
        return Fattr(kind, mode, nlink, uid, gid, size, used,
                     SpecData(major, minor), fsid, fileid,
                     NfsTime(asec, ansec), NfsTime(msec, mnsec),
                     NfsTime(csec, cnsec))


Fattr.CODEC = _FattrCodec(Fattr.CODEC)
POST_OP_ATTR = c.Optional(Fattr.CODEC)
POST_OP_FH = c.Optional(FH)


@c.xdr_struct(c.UINT64, NfsTime.CODEC, NfsTime.CODEC)
class WccAttr(c.XdrStruct):
    size: int
    mtime: NfsTime
    ctime: NfsTime


@c.xdr_struct(c.Optional(WccAttr.CODEC), POST_OP_ATTR)
class WccData(c.XdrStruct):
    before: WccAttr | None = None
    after: Fattr | None = None


def _time_to_wire(
        value: NfsTime | const.TimeHow | None,
) -> tuple[const.TimeHow, object]:
    if value is None:
        return const.TimeHow.DONT_CHANGE, None
    if value == const.TimeHow.SET_TO_SERVER_TIME:
        return const.TimeHow.SET_TO_SERVER_TIME, None
    return const.TimeHow.SET_TO_CLIENT_TIME, value


def _time_from_wire(
        value: tuple[const.TimeHow, NfsTime | None],
) -> NfsTime | const.TimeHow | None:
    how, time = value
    if how == const.TimeHow.DONT_CHANGE:
        return None
    if how == const.TimeHow.SET_TO_SERVER_TIME:
        return const.TimeHow.SET_TO_SERVER_TIME
    return time


#: set_atime / set_mtime: None (don't change), TimeHow.SET_TO_SERVER_TIME,
#: or an NfsTime (set to client time).
SET_TIME = c.Mapped(
    c.Union(c.enum(const.TimeHow), {
        const.TimeHow.DONT_CHANGE: c.VOID,
        const.TimeHow.SET_TO_SERVER_TIME: c.VOID,
        const.TimeHow.SET_TO_CLIENT_TIME: NfsTime.CODEC,
    }), _time_to_wire, _time_from_wire)


@c.xdr_struct(c.Optional(c.UINT32), c.Optional(c.UINT32),
              c.Optional(c.UINT32), c.Optional(c.UINT64), SET_TIME, SET_TIME)
class Sattr(c.XdrStruct):
    """sattr3: ``None`` leaves an attribute as it is."""

    mode: int | None = None
    uid: int | None = None
    gid: int | None = None
    size: int | None = None
    atime: NfsTime | const.TimeHow | None = None
    mtime: NfsTime | const.TimeHow | None = None


@c.xdr_struct(FH, FILENAME)
class DirOpArgs(c.XdrStruct):
    dir: bytes
    name: str


# --- procedure arguments and result bodies (section 3.3) --------------------

@c.xdr_struct(FH)
class GetattrArgs(c.XdrStruct):
    object: bytes


@c.xdr_struct(Fattr.CODEC)
class GetattrOk(c.XdrStruct):
    obj_attributes: Fattr


@c.xdr_struct(FH, Sattr.CODEC, c.Optional(NfsTime.CODEC))
class SetattrArgs(c.XdrStruct):
    object: bytes
    new_attributes: Sattr
    guard_ctime: NfsTime | None = None


@c.xdr_struct(WccData.CODEC)
class WccBody(c.XdrStruct):
    """Result body that carries only wcc_data (SETATTR, REMOVE, RMDIR)."""

    obj_wcc: WccData


@c.xdr_struct(DirOpArgs.CODEC)
class LookupArgs(c.XdrStruct):
    what: DirOpArgs


@c.xdr_struct(FH, POST_OP_ATTR, POST_OP_ATTR)
class LookupOk(c.XdrStruct):
    object: bytes
    obj_attributes: Fattr | None
    dir_attributes: Fattr | None


@c.xdr_struct(POST_OP_ATTR)
class AttrBody(c.XdrStruct):
    """Result body that carries only post_op_attr (many failures)."""

    attributes: Fattr | None


@c.xdr_struct(FH, c.UINT32)
class AccessArgs(c.XdrStruct):
    object: bytes
    access: int


@c.xdr_struct(POST_OP_ATTR, c.UINT32)
class AccessOk(c.XdrStruct):
    obj_attributes: Fattr | None
    access: int


@c.xdr_struct(FH)
class ReadlinkArgs(c.XdrStruct):
    symlink: bytes


@c.xdr_struct(POST_OP_ATTR, NFSPATH)
class ReadlinkOk(c.XdrStruct):
    symlink_attributes: Fattr | None
    data: str


@c.xdr_struct(FH, c.UINT64, c.UINT32)
class ReadArgs(c.XdrStruct):
    file: bytes
    offset: int
    count: int


@c.xdr_struct(POST_OP_ATTR, c.UINT32, c.BOOL, c.opaque())
class ReadOk(c.XdrStruct):
    file_attributes: Fattr | None
    count: int
    eof: bool
    data: bytes


@c.xdr_struct(FH, c.UINT64, c.UINT32, c.enum(const.StableHow), c.opaque())
class WriteArgs(c.XdrStruct):
    file: bytes
    offset: int
    count: int
    stable: const.StableHow
    data: bytes


@c.xdr_struct(WccData.CODEC, c.UINT32, c.enum(const.StableHow), WRITEVERF)
class WriteOk(c.XdrStruct):
    file_wcc: WccData
    count: int
    committed: const.StableHow
    verf: bytes


def _how_to_wire(
        how: "CreateHow",
) -> tuple[const.CreateMode, Sattr | bytes | None]:
    if how.mode == const.CreateMode.EXCLUSIVE:
        return how.mode, how.verf
    return how.mode, how.attributes


def _how_from_wire(value: tuple[const.CreateMode, Any]) -> "CreateHow":
    mode, body = value
    if mode == const.CreateMode.EXCLUSIVE:
        return CreateHow(mode, verf=body)
    return CreateHow(mode, attributes=body)


@dataclasses.dataclass(frozen=True, slots=True)
class CreateHow(c.XdrStruct):
    """createhow3: attributes for UNCHECKED/GUARDED, verf for EXCLUSIVE."""

    mode: const.CreateMode = const.CreateMode.UNCHECKED
    attributes: Sattr | None = None
    verf: bytes | None = None


CreateHow.CODEC = c.Mapped(
    c.Union(c.enum(const.CreateMode), {
        const.CreateMode.UNCHECKED: Sattr.CODEC,
        const.CreateMode.GUARDED: Sattr.CODEC,
        const.CreateMode.EXCLUSIVE: CREATEVERF,
    }), _how_to_wire, _how_from_wire)


@c.xdr_struct(DirOpArgs.CODEC, CreateHow.CODEC)
class CreateArgs(c.XdrStruct):
    where: DirOpArgs
    how: CreateHow


@c.xdr_struct(POST_OP_FH, POST_OP_ATTR, WccData.CODEC)
class NewObjOk(c.XdrStruct):
    """Result of CREATE, MKDIR, SYMLINK and MKNOD."""

    obj: bytes | None
    obj_attributes: Fattr | None
    dir_wcc: WccData


@c.xdr_struct(DirOpArgs.CODEC, Sattr.CODEC)
class MkdirArgs(c.XdrStruct):
    where: DirOpArgs
    attributes: Sattr


@c.xdr_struct(DirOpArgs.CODEC, Sattr.CODEC, NFSPATH)
class SymlinkArgs(c.XdrStruct):
    where: DirOpArgs
    symlink_attributes: Sattr
    symlink_data: str


@c.xdr_struct(Sattr.CODEC, SpecData.CODEC)
class DeviceData(c.XdrStruct):
    dev_attributes: Sattr
    spec: SpecData


@dataclasses.dataclass(frozen=True, slots=True)
class MknodData(c.XdrStruct):
    """mknoddata3: devices carry DeviceData, sockets and FIFOs a Sattr."""

    type: const.FileType
    body: DeviceData | Sattr | None = None


MknodData.CODEC = c.Mapped(
    c.Union(c.enum(const.FileType), {
        const.FileType.NF3CHR: DeviceData.CODEC,
        const.FileType.NF3BLK: DeviceData.CODEC,
        const.FileType.NF3SOCK: Sattr.CODEC,
        const.FileType.NF3FIFO: Sattr.CODEC,
    }, default=c.VOID),
    lambda d: (d.type, d.body), lambda v: MknodData(*v))


@c.xdr_struct(DirOpArgs.CODEC, MknodData.CODEC)
class MknodArgs(c.XdrStruct):
    where: DirOpArgs
    what: MknodData


@c.xdr_struct(DirOpArgs.CODEC)
class RemoveArgs(c.XdrStruct):
    object: DirOpArgs


@c.xdr_struct(DirOpArgs.CODEC, DirOpArgs.CODEC)
class RenameArgs(c.XdrStruct):
    from_: DirOpArgs
    to: DirOpArgs


@c.xdr_struct(WccData.CODEC, WccData.CODEC)
class RenameBody(c.XdrStruct):
    fromdir_wcc: WccData
    todir_wcc: WccData


@c.xdr_struct(FH, DirOpArgs.CODEC)
class LinkArgs(c.XdrStruct):
    file: bytes
    link: DirOpArgs


@c.xdr_struct(POST_OP_ATTR, WccData.CODEC)
class LinkBody(c.XdrStruct):
    file_attributes: Fattr | None
    linkdir_wcc: WccData


@c.xdr_struct(FH, c.UINT64, COOKIEVERF, c.UINT32)
class ReaddirArgs(c.XdrStruct):
    dir: bytes
    cookie: int
    cookieverf: bytes
    count: int


@c.xdr_struct(c.UINT64, FILENAME, c.UINT64)
class DirEntry(c.XdrStruct):
    fileid: int
    name: str
    cookie: int


@c.xdr_struct(POST_OP_ATTR, COOKIEVERF, c.LinkedList(DirEntry.CODEC), c.BOOL)
class ReaddirOk(c.XdrStruct):
    dir_attributes: Fattr | None
    cookieverf: bytes
    entries: tuple[DirEntry, ...]
    eof: bool


@c.xdr_struct(FH, c.UINT64, COOKIEVERF, c.UINT32, c.UINT32)
class ReaddirplusArgs(c.XdrStruct):
    dir: bytes
    cookie: int
    cookieverf: bytes
    dircount: int
    maxcount: int


@c.xdr_struct(c.UINT64, FILENAME, c.UINT64, POST_OP_ATTR, POST_OP_FH)
class DirEntryPlus(c.XdrStruct):
    fileid: int
    name: str
    cookie: int
    name_attributes: Fattr | None
    name_handle: bytes | None


@c.xdr_struct(POST_OP_ATTR, COOKIEVERF, c.LinkedList(DirEntryPlus.CODEC),
              c.BOOL)
class ReaddirplusOk(c.XdrStruct):
    dir_attributes: Fattr | None
    cookieverf: bytes
    entries: tuple[DirEntryPlus, ...]
    eof: bool


@c.xdr_struct(FH)
class FsrootArgs(c.XdrStruct):
    """Arguments of FSSTAT, FSINFO and PATHCONF."""

    fsroot: bytes


@c.xdr_struct(POST_OP_ATTR, c.UINT64, c.UINT64, c.UINT64, c.UINT64, c.UINT64,
              c.UINT64, c.UINT32)
class FsstatOk(c.XdrStruct):
    obj_attributes: Fattr | None
    tbytes: int
    fbytes: int
    abytes: int
    tfiles: int
    ffiles: int
    afiles: int
    invarsec: int


@c.xdr_struct(POST_OP_ATTR, c.UINT32, c.UINT32, c.UINT32, c.UINT32, c.UINT32,
              c.UINT32, c.UINT32, c.UINT64, NfsTime.CODEC, c.UINT32)
class FsinfoOk(c.XdrStruct):
    obj_attributes: Fattr | None
    rtmax: int
    rtpref: int
    rtmult: int
    wtmax: int
    wtpref: int
    wtmult: int
    dtpref: int
    maxfilesize: int
    time_delta: NfsTime
    properties: int


@c.xdr_struct(POST_OP_ATTR, c.UINT32, c.UINT32, c.BOOL, c.BOOL, c.BOOL,
              c.BOOL)
class PathconfOk(c.XdrStruct):
    obj_attributes: Fattr | None
    linkmax: int
    name_max: int
    no_trunc: bool
    chown_restricted: bool
    case_insensitive: bool
    case_preserving: bool


@c.xdr_struct(FH, c.UINT64, c.UINT32)
class CommitArgs(c.XdrStruct):
    file: bytes
    offset: int
    count: int


@c.xdr_struct(WccData.CODEC, WRITEVERF)
class CommitOk(c.XdrStruct):
    file_wcc: WccData
    verf: bytes


# --- results and the procedure table ---------------------------------------

@dataclasses.dataclass(frozen=True, slots=True)
class Result:
    """A procedure result: a status and the arm of the union it selects.

    ``body`` is the resok arm when ``status`` is OK, else the resfail arm
    (which often still carries attributes).
    """

    status: int
    body: Any = None

    @property
    def ok(self) -> bool:
        return self.status == 0


class ResultCodec(c.Codec[Result]):
    def __init__(self, ok: c.Codec[Any], fail: c.Codec[Any]) -> None:
        self.ok_codec = ok
        self.fail_codec = fail

    def pack(self, packer: Packer, value: Result) -> None:
        packer.pack_int(value.status)
        (self.ok_codec if value.status == 0 else self.fail_codec).pack(
            packer, value.body)

    def unpack(self, unpacker: Unpacker) -> Result:
        status = unpacker.unpack_int()
        codec = self.ok_codec if status == 0 else self.fail_codec
        return Result(status, codec.unpack(unpacker))


@dataclasses.dataclass(frozen=True)
class Procedure:
    number: int
    args: c.Codec[Any]
    res: c.Codec[Any]


def _proc(number: int, args: c.Codec[Any], ok: c.Codec[Any],
          fail: c.Codec[Any]) -> Procedure:
    return Procedure(number, args, ResultCodec(ok, fail))


_ATTR = AttrBody.CODEC
_WCC = WccBody.CODEC
_NEWOBJ = NewObjOk.CODEC

PROCEDURES = {p.number: p for p in (
    Procedure(P.NULL, c.VOID, c.VOID),
    _proc(P.GETATTR, GetattrArgs.CODEC, GetattrOk.CODEC, c.VOID),
    _proc(P.SETATTR, SetattrArgs.CODEC, _WCC, _WCC),
    _proc(P.LOOKUP, LookupArgs.CODEC, LookupOk.CODEC, _ATTR),
    _proc(P.ACCESS, AccessArgs.CODEC, AccessOk.CODEC, _ATTR),
    _proc(P.READLINK, ReadlinkArgs.CODEC, ReadlinkOk.CODEC, _ATTR),
    _proc(P.READ, ReadArgs.CODEC, ReadOk.CODEC, _ATTR),
    _proc(P.WRITE, WriteArgs.CODEC, WriteOk.CODEC, _WCC),
    _proc(P.CREATE, CreateArgs.CODEC, _NEWOBJ, _WCC),
    _proc(P.MKDIR, MkdirArgs.CODEC, _NEWOBJ, _WCC),
    _proc(P.SYMLINK, SymlinkArgs.CODEC, _NEWOBJ, _WCC),
    _proc(P.MKNOD, MknodArgs.CODEC, _NEWOBJ, _WCC),
    _proc(P.REMOVE, RemoveArgs.CODEC, _WCC, _WCC),
    _proc(P.RMDIR, RemoveArgs.CODEC, _WCC, _WCC),
    _proc(P.RENAME, RenameArgs.CODEC, RenameBody.CODEC, RenameBody.CODEC),
    _proc(P.LINK, LinkArgs.CODEC, LinkBody.CODEC, LinkBody.CODEC),
    _proc(P.READDIR, ReaddirArgs.CODEC, ReaddirOk.CODEC, _ATTR),
    _proc(P.READDIRPLUS, ReaddirplusArgs.CODEC, ReaddirplusOk.CODEC, _ATTR),
    _proc(P.FSSTAT, FsrootArgs.CODEC, FsstatOk.CODEC, _ATTR),
    _proc(P.FSINFO, FsrootArgs.CODEC, FsinfoOk.CODEC, _ATTR),
    _proc(P.PATHCONF, FsrootArgs.CODEC, PathconfOk.CODEC, _ATTR),
    _proc(P.COMMIT, CommitArgs.CODEC, CommitOk.CODEC, _WCC),
)}


def _lookup(table: Mapping[int, Procedure], proc: int) -> Procedure:
    try:
        return table[proc]
    except KeyError:
        raise ProtocolError("unknown procedure %r" % (proc,)) from None


def encode(table: Mapping[int, Procedure], proc: int, value: Any,
           which: str) -> bytes:
    p = Packer()
    getattr(_lookup(table, proc), which).pack(p, value)
    return p.get_buffer()


def decode(table: Mapping[int, Procedure], proc: int, data: BytesLike,
           which: str) -> Any:
    u = Unpacker(data)
    try:
        value = getattr(_lookup(table, proc), which).unpack(u)
    except (ValueError, TypeError, OverflowError) as e:
        # An enum or dataclass refusing a decoded value is still garbage
        # from the peer.
        raise XdrError(str(e)) from e
    u.done()
    return value


#: ``encode_args(proc, args)``, ``encode_res(proc, result)``.
Encoder: TypeAlias = Callable[[int, Any], bytes]
#: ``decode_args(proc, data)``, ``decode_res(proc, data)``.
Decoder: TypeAlias = Callable[[int, BytesLike], Any]


def codecs_for(
        table: Mapping[int, Procedure],
) -> tuple[Encoder, Decoder, Encoder, Decoder]:
    """The four codec functions of a program's procedure ``table``.

    ``encode_args, decode_args, encode_res, decode_res``, in that order.
    """
    return (lambda proc, args: encode(table, proc, args, "args"),
            lambda proc, data: decode(table, proc, data, "args"),
            lambda proc, res: encode(table, proc, res, "res"),
            lambda proc, data: decode(table, proc, data, "res"))


encode_args, decode_args, encode_res, decode_res = codecs_for(PROCEDURES)


# --- the reply-size counts of a call, for a hop that must bound them --------

_FIXED_AFTER_FH: dict[int, tuple[int, int]] = {
    # Bytes between the file handle and the first count (RFC 1813 3.3.6,
    # 3.3.16, 3.3.17), and how many uint32 counts follow.
    P.READ: (8, 1),             # offset
    P.READDIR: (16, 1),         # cookie, cookieverf
    P.READDIRPLUS: (16, 2),     # cookie, cookieverf; dircount, maxcount
}


def count_offsets(proc: int, args: BytesLike) -> tuple[int, ...]:
    """Offsets in encoded ``args`` of the counts that size the reply.

    READ's ``count``, READDIR's ``count``, READDIRPLUS's ``dircount`` and
    ``maxcount``; none for other procedures.  A proxy rewrites them in
    place to what it can carry, as a server clamps them (RFC 1813 allows
    a short READ and a shorter directory reply), without decoding and
    re-encoding the call.  Raises ProtocolError for arguments too short to
    hold them.
    """
    layout = _FIXED_AFTER_FH.get(proc)
    if layout is None:
        return ()
    skip, counts = layout
    u = Unpacker(args)
    u.unpack_opaque_view(const.NFS3_FHSIZE)
    first = len(args) - u.remaining() + skip
    if len(args) < first + 4 * counts:
        raise XdrError("arguments of procedure %d end before their count"
                       % proc)
    return tuple(first + 4 * i for i in range(counts))
