# SPDX-License-Identifier: Apache-2.0
"""ONC-RPC version 2 messages and authentication (RFC 5531).

``decode_message`` turns one complete record into a :class:`Call`,
:class:`Reply` or :class:`Denied`; ``encode_message`` does the reverse.
Procedure arguments and results stay opaque bytes here: the program
modules (:mod:`.nfs3`, :mod:`.mount3`) give them meaning.
"""

from collections.abc import Callable
import dataclasses
import struct
from typing import cast

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import LocalProtocolError
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs.xdr import BytesLike
from gvfs_openstack.nfs.xdr import Packer
from gvfs_openstack.nfs.xdr import Unpacker

#: RFC 5531 section 8.2: opaque_auth bodies are at most 400 bytes.
MAX_AUTH_BYTES = 400
#: AUTH_SYS limits (RFC 5531 appendix A).
MAX_MACHINE_NAME = 255
MAX_AUTH_SYS_GIDS = 16

_XID = struct.Struct(">I")


@dataclasses.dataclass(frozen=True, slots=True)
class OpaqueAuth:
    flavor: int
    body: bytes = b""


AUTH_NONE = OpaqueAuth(const.AuthFlavor.AUTH_NONE, b"")


@dataclasses.dataclass(frozen=True, slots=True)
class AuthSys:
    """AUTH_SYS credentials (RFC 5531 appendix A)."""

    uid: int
    gid: int
    gids: tuple[int, ...] = ()
    machinename: str = ""
    stamp: int = 0

    def to_opaque(self) -> OpaqueAuth:
        if len(self.gids) > MAX_AUTH_SYS_GIDS:
            raise LocalProtocolError("AUTH_SYS carries at most %d groups"
                                     % MAX_AUTH_SYS_GIDS)
        p = Packer()
        p.pack_uint(self.stamp)
        p.pack_string(self.machinename, MAX_MACHINE_NAME)
        p.pack_uint(self.uid)
        p.pack_uint(self.gid)
        p.pack_uint(len(self.gids))
        for gid in self.gids:
            p.pack_uint(gid)
        return OpaqueAuth(const.AuthFlavor.AUTH_SYS, p.get_buffer())

    @classmethod
    def from_opaque(cls, auth: OpaqueAuth) -> "AuthSys":
        if auth.flavor != const.AuthFlavor.AUTH_SYS:
            raise ProtocolError("credential flavor %d is not AUTH_SYS"
                                % auth.flavor)
        u = Unpacker(auth.body)
        stamp = u.unpack_uint()
        machinename = u.unpack_string(MAX_MACHINE_NAME)
        uid = u.unpack_uint()
        gid = u.unpack_uint()
        gids = tuple(u.unpack_array(u.unpack_uint, MAX_AUTH_SYS_GIDS))
        u.done()
        return cls(uid, gid, gids, machinename, stamp)


@dataclasses.dataclass(frozen=True, slots=True)
class Call:
    xid: int
    prog: int
    vers: int
    proc: int
    cred: OpaqueAuth = AUTH_NONE
    verf: OpaqueAuth = AUTH_NONE
    args: BytesLike = b""
    #: Anything but 2 must be answered with RPC_MISMATCH (RFC 5531 s.9).
    rpcvers: int = const.RPC_VERSION


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    """An accepted reply (MSG_ACCEPTED); ``results`` only on SUCCESS."""

    xid: int
    accept_stat: int = const.AcceptStat.SUCCESS
    results: BytesLike = b""
    verf: OpaqueAuth = AUTH_NONE
    #: (low, high) supported versions, with PROG_MISMATCH.
    mismatch: tuple[int, int] | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Denied:
    """A rejected reply (MSG_DENIED)."""

    xid: int
    reject_stat: int
    auth_stat: int | None = None
    #: (low, high) supported RPC versions, with RPC_MISMATCH.
    mismatch: tuple[int, int] | None = None


def _unpack_auth(u: Unpacker) -> OpaqueAuth:
    flavor = u.unpack_uint()
    return OpaqueAuth(flavor, u.unpack_opaque(MAX_AUTH_BYTES))


def _pack_auth(p: Packer, auth: OpaqueAuth) -> None:
    p.pack_uint(auth.flavor)
    p.pack_opaque(auth.body, MAX_AUTH_BYTES)


def _unpack_call_header(u: Unpacker, xid: int) -> Call:
    rpcvers = u.unpack_uint()
    prog = u.unpack_uint()
    vers = u.unpack_uint()
    proc = u.unpack_uint()
    cred = _unpack_auth(u)
    verf = _unpack_auth(u)
    return Call(xid, prog, vers, proc, cred, verf, b"", rpcvers)


def decode_call_header(data: BytesLike) -> tuple[Call, int]:
    """The header of a call as a Call without args, and the args' offset.

    Works on the first bytes of a record that is still arriving.
    """
    u = Unpacker(data)
    xid = u.unpack_uint()
    if u.unpack_uint() != const.MsgType.CALL:
        raise ProtocolError("record is not a call")
    return _unpack_call_header(u, xid), u.position


def decode_message(record: BytesLike) -> Call | Reply | Denied:
    """Decode one RPC message; raises only :class:`ProtocolError`."""
    u = Unpacker(record)
    xid = u.unpack_uint()
    mtype = u.unpack_uint()
    if mtype == const.MsgType.CALL:
        call = _unpack_call_header(u, xid)
        if call.rpcvers != const.RPC_VERSION:
            # Kept as a call so that a server can answer RPC_MISMATCH.
            return call
        return dataclasses.replace(call,
                                   args=u.unpack_fopaque_view(u.remaining()))
    if mtype != const.MsgType.REPLY:
        raise ProtocolError("message type %d is neither CALL nor REPLY"
                            % mtype)
    stat = u.unpack_uint()
    if stat == const.ReplyStat.MSG_ACCEPTED:
        verf = _unpack_auth(u)
        accept = u.unpack_uint()
        if accept == const.AcceptStat.SUCCESS:
            return Reply(xid, accept, u.unpack_fopaque_view(u.remaining()),
                         verf)
        if accept == const.AcceptStat.PROG_MISMATCH:
            mismatch = (u.unpack_uint(), u.unpack_uint())
            return Reply(xid, accept, b"", verf, mismatch)
        if accept not in const.AcceptStat.__members__.values():
            raise ProtocolError("unknown accept_stat %d" % accept)
        return Reply(xid, const.AcceptStat(accept), b"", verf)
    if stat == const.ReplyStat.MSG_DENIED:
        reject = u.unpack_uint()
        if reject == const.RejectStat.RPC_MISMATCH:
            return Denied(xid, const.RejectStat(reject),
                          mismatch=(u.unpack_uint(), u.unpack_uint()))
        if reject == const.RejectStat.AUTH_ERROR:
            return Denied(xid, const.RejectStat(reject),
                          auth_stat=u.unpack_uint())
        raise ProtocolError("unknown reject_stat %d" % reject)
    raise ProtocolError("unknown reply_stat %d" % stat)


def encode_message(msg: Call | Reply | Denied) -> bytes:
    """Encode a Call, Reply or Denied (without record marking)."""
    p = Packer()
    p.pack_uint(msg.xid)
    if isinstance(msg, Call):
        p.pack_uint(const.MsgType.CALL)
        p.pack_uint(const.RPC_VERSION)
        p.pack_uint(msg.prog)
        p.pack_uint(msg.vers)
        p.pack_uint(msg.proc)
        _pack_auth(p, msg.cred)
        _pack_auth(p, msg.verf)
        return p.get_buffer() + bytes(msg.args)
    p.pack_uint(const.MsgType.REPLY)
    if isinstance(msg, Reply):
        p.pack_uint(const.ReplyStat.MSG_ACCEPTED)
        _pack_auth(p, msg.verf)
        p.pack_uint(msg.accept_stat)
        if msg.accept_stat == const.AcceptStat.SUCCESS:
            return p.get_buffer() + bytes(msg.results)
        if msg.accept_stat == const.AcceptStat.PROG_MISMATCH:
            mismatch = cast("tuple[int, int]", msg.mismatch)
            p.pack_uint(mismatch[0])
            p.pack_uint(mismatch[1])
        return p.get_buffer()
    if isinstance(msg, Denied):
        p.pack_uint(const.ReplyStat.MSG_DENIED)
        p.pack_uint(msg.reject_stat)
        if msg.reject_stat == const.RejectStat.RPC_MISMATCH:
            mismatch = cast("tuple[int, int]", msg.mismatch)
            p.pack_uint(mismatch[0])
            p.pack_uint(mismatch[1])
        else:
            p.pack_uint(cast(int, msg.auth_stat))
        return p.get_buffer()
    raise LocalProtocolError("cannot encode %r" % (type(msg).__name__,))


def read_xid(record: BytesLike) -> int:
    """The XID of a record, without decoding the rest."""
    if len(record) < 4:
        raise ProtocolError("record of %d bytes has no XID" % len(record))
    return _XID.unpack_from(record)[0]


def read_msg_type(record: BytesLike) -> int:
    """The message type (CALL or REPLY) of a record, without decoding."""
    if len(record) < 8:
        raise ProtocolError("record of %d bytes has no message type"
                            % len(record))
    return _XID.unpack_from(record, 4)[0]


def set_xid(record: bytearray, xid: int) -> bytearray:
    """Rewrite the XID of a ``bytearray`` record in place and return it.

    XID multiplexing touches every call and reply; copying a 1 MiB READ
    reply to change four bytes would cost more than forwarding it.
    """
    _XID.pack_into(record, 0, xid)
    return record


def accepted(xid: int, stat: int = const.AcceptStat.SUCCESS,
             results: BytesLike = b"",
             mismatch: tuple[int, int] | None = None) -> bytes:
    """An accepted reply message (``results`` only with SUCCESS)."""
    return encode_message(Reply(xid, stat, results, mismatch=mismatch))


#: Accept statuses that say the server has not what was called.
_NOT_SERVED = (const.AcceptStat.PROG_UNAVAIL, const.AcceptStat.PROG_MISMATCH,
               const.AcceptStat.PROC_UNAVAIL)


def not_served(reply: "Reply | Denied | None") -> bool:
    """Whether ``reply`` says its server lacks what was called.

    The program, its version or the procedure (a server of an older
    release): the caller asks another way.
    """
    return isinstance(reply, Reply) and reply.accept_stat in _NOT_SERVED


def results_of(record: BytesLike) -> BytesLike | None:
    """The results of a reply message accepted with SUCCESS, else None.

    None for a denied call or any other accept status: the callers fall
    back or fail in their own way.  ProtocolError if ``record`` is no RPC
    message at all.
    """
    reply = decode_message(record)
    if not isinstance(reply, Reply) or \
            reply.accept_stat != const.AcceptStat.SUCCESS:
        return None
    return reply.results


def call_builder(prog: int, vers: int, proc: int, cred: OpaqueAuth,
                 verf: OpaqueAuth = AUTH_NONE,
                 args: BytesLike = b"") -> Callable[[int], tuple[bytes]]:
    """A call message for any XID, as an upstream pool sends it.

    Pools choose the XID (and choose again when they re-send), so callers
    hand over a function of the XID rather than a message.
    """
    def build(xid: int) -> tuple[bytes]:
        return (encode_message(Call(xid, prog, vers, proc, cred, verf,
                                    args)),)

    return build
