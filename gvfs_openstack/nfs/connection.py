# SPDX-License-Identifier: Apache-2.0
"""Sans-IO ONC-RPC over a byte stream: record marking and a connection.

Record marking (RFC 5531 section 11): each record is one or more fragments,
each preceded by a 4-byte header whose top bit marks the last fragment and
whose low 31 bits give the fragment length.

:class:`RecordReader` turns bytes into whole records; :class:`RpcConnection`
turns records into events for one side of a conversation (h11-style:
``receive_data`` in, ``next_event`` out, ``send`` returns bytes to write),
keeping a client's table of outstanding XIDs and announcing large records
while they arrive, so that a proxy can relay them cut-through.  The NFS
client, the proxy's listener and its upstream pool all drive it.
No sockets, no threads: the same object serves asyncio code, blocking code
and tests that pump bytes between two peers (writing records to a socket
is :mod:`gvfs_openstack.client.transport`'s).
"""

import collections
import dataclasses
import enum
import struct
from typing import Any
from typing import TypeAlias

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import LocalProtocolError
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs.errors import RecordTooLarge
from gvfs_openstack.nfs import rpc
from gvfs_openstack.nfs.xdr import BytesLike

_HEADER = struct.Struct(">I")
_LAST_FRAGMENT = 0x80000000
_LENGTH_MASK = 0x7FFFFFFF

#: A 1 MiB READ or WRITE plus headers fits with room to spare.
DEFAULT_MAX_RECORD = 4 * 1024 * 1024
#: Records smaller than this are parsed from one shared buffer.
SCRATCH_SIZE = 64 * 1024
#: Largest fragment we write; big enough that headers cost nothing.
MAX_FRAGMENT = 1 << 30
#: Bytes kept of a record refused for its size: the RPC call header up to
#: the procedure number (RFC 5531 section 9), to answer it by name.
REFUSED_HEAD = 24


class Role(enum.Enum):
    CLIENT = "client"
    SERVER = "server"


class _Sentinel(enum.Enum):
    NEED_DATA = "need-data"
    CLOSED = "closed"


NEED_DATA = _Sentinel.NEED_DATA
CLOSED = _Sentinel.CLOSED


def frame(message: BytesLike) -> bytes:
    """Record-mark an encoded message as a single last fragment."""
    if len(message) > MAX_FRAGMENT:
        raise LocalProtocolError("message of %d bytes is too large to send"
                                 % len(message))
    return _HEADER.pack(_LAST_FRAGMENT | len(message)) + message


def frame_header(length: int) -> bytes:
    """The record mark for a single-fragment record of ``length`` bytes."""
    return _HEADER.pack(_LAST_FRAGMENT | length)


class RecordReader:
    """Reassembles records from fragments, bounded by ``max_record_size``.

    Bytes arrive either through :meth:`feed` or, without an extra copy,
    by writing into :meth:`get_buffer` and calling :meth:`buffer_updated`
    (the shape of :class:`asyncio.BufferedProtocol`).  Small records are
    parsed out of one scratch buffer; a fragment too large for it gets a
    buffer of its own, filled straight from the socket, so a 1 MiB READ
    reply is copied once between the kernel and the next ``send``.
    Records are returned as ``bytearray``: the proxy rewrites XIDs in
    place instead of copying.

    A record over ``max_record_size`` is never buffered: its first
    :data:`REFUSED_HEAD` bytes are kept, the rest is read and dropped,
    and :meth:`next_record` raises :class:`RecordTooLarge` for it once,
    in its place in the stream.  The stream stays usable: one peer's
    oversized call (or one oversized reply) costs that call alone, not
    the connection other calls share.
    """

    def __init__(self, max_record_size: int = DEFAULT_MAX_RECORD,
                 scratch_size: int = SCRATCH_SIZE) -> None:
        self.max_record_size = max_record_size
        self._scratch = bytearray(scratch_size)
        self._start = 0
        self._end = 0
        self._big: bytearray | None = None
        self._big_filled = 0
        self._big_last = False
        self._fragments: list[bytearray] = []
        self._record_len = 0
        self._records: collections.deque[
            bytearray | RecordTooLarge] = collections.deque()
        self._eof = False
        #: Bytes of the current fragment of an oversized record still to
        #: drop, whether that fragment is its last, and whether one is
        #: being dropped at all.
        self._skip_left = 0
        self._skip_last = False
        self._skipping = False

    @property
    def at_eof(self) -> bool:
        return self._eof

    def get_buffer(self) -> memoryview:
        """A writable view for the next bytes from the peer."""
        if self._big is not None:
            return memoryview(self._big)[self._big_filled:]
        if self._end == len(self._scratch) or (
                self._start and len(self._scratch) - self._end < 4096):
            pending = self._end - self._start
            self._scratch[:pending] = self._scratch[self._start:self._end]
            self._start, self._end = 0, pending
        return memoryview(self._scratch)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written into the view from :meth:`get_buffer`."""
        if self._big is not None:
            self._big_filled += nbytes
            if self._big_filled < len(self._big):
                return
            big, self._big = self._big, None
            self._fragment_done(big, self._big_last)
        else:
            self._end += nbytes
        self._parse()

    def feed(self, data: BytesLike) -> None:
        """Copy ``data`` in; ``b""`` means the peer closed the stream."""
        if not data:
            self._eof = True
            return
        view = memoryview(data)
        while view:
            target = self.get_buffer()
            n = min(len(target), len(view))
            target[:n] = view[:n]
            view = view[n:]
            self.buffer_updated(n)

    def _parse(self) -> None:
        scratch = self._scratch
        while True:
            if self._skip_left:
                n = min(self._skip_left, self._end - self._start)
                self._start += n
                self._skip_left -= n
                if self._skip_left:
                    break
                self._skipping = not self._skip_last
                continue
            if self._end - self._start < 4:
                break
            header = _HEADER.unpack_from(scratch, self._start)[0]
            length = header & _LENGTH_MASK
            last = bool(header & _LAST_FRAGMENT)
            body = self._start + 4
            if self._skipping:
                # A later fragment of a record being dropped.
                self._start = body
                self._skip_left, self._skip_last = length, last
                self._skipping = not last
                continue
            if self._record_len + length > self.max_record_size:
                if not self._refuse(body, length, last):
                    break   # Its head is not all here yet.
                continue
            have = self._end - body
            if have >= length:
                self._start = body + length
                self._fragment_done(scratch[body:body + length], last)
                continue
            if 4 + length > len(scratch):
                big = bytearray(length)
                big[:have] = memoryview(scratch)[body:self._end]
                self._big, self._big_filled, self._big_last = big, have, last
                self._start = self._end = 0
            break
        if self._start == self._end:
            self._start = self._end = 0

    def _refuse(self, body: int, length: int, last: bool) -> bool:
        """Drop the oversized record whose fragment starts at ``body``.

        Waits (False) until its first :data:`REFUSED_HEAD` bytes are in,
        so that the refusal can name its XID and procedure.
        """
        # Only the head is kept: the earlier fragments may hold megabytes.
        earlier = b"".join(bytes(f[:REFUSED_HEAD])
                           for f in self._fragments)[:REFUSED_HEAD]
        size = self._record_len + length
        wanted = min(REFUSED_HEAD, size) - len(earlier)
        have = self._end - body
        if wanted > 0 and have < min(wanted, length):
            return False
        take = max(min(wanted, length), 0)
        head = (earlier + bytes(self._scratch[body:body + take]))[
            :REFUSED_HEAD]
        self._records.append(RecordTooLarge(
            "record of at least %d bytes exceeds the limit of %d"
            % (size, self.max_record_size),
            xid=_HEADER.unpack_from(head)[0] if len(head) >= 4 else None,
            head=head))
        self._fragments = []
        self._record_len = 0
        self._start = body
        self._skip_left, self._skip_last = length, last
        self._skipping = not last
        return True

    def _fragment_done(self, fragment: bytearray, last: bool) -> None:
        if last and not self._fragments:
            self._records.append(fragment)
            return
        self._fragments.append(fragment)
        self._record_len += len(fragment)
        if last:
            self._records.append(bytearray().join(self._fragments))
            self._fragments = []
            self._record_len = 0

    def partial(self) -> tuple[bytearray, int] | None:
        """The large single-fragment record being filled, or ``None``.

        Returns ``(buffer, filled)``: ``buffer`` is the very object that
        :meth:`next_record` returns once it is complete, and its first
        ``filled`` bytes are in.  A proxy uses it to relay a 1 MiB READ
        reply while it is still arriving (cut-through) instead of after
        (store-and-forward), which for a client with one call in flight
        is the difference between adding a fraction of a transfer time
        per hop and adding a whole one.
        """
        if self._big is not None and self._big_last and not self._fragments:
            return self._big, self._big_filled
        return None

    def next_record(self) -> bytearray | None:
        """A complete record, or ``None`` when more bytes are needed.

        Raises :class:`RecordTooLarge` in place of a record over the
        limit (the next call goes on with the stream), and
        :class:`ProtocolError` if the stream ended inside a record.
        """
        if self._records:
            record = self._records.popleft()
            if isinstance(record, RecordTooLarge):
                raise record
            return record
        if self._eof and (self._end > self._start or self._fragments
                          or self._big is not None or self._skip_left
                          or self._skipping):
            raise ProtocolError("connection closed inside a record")
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class CallReceived:
    """A whole call, for a server.

    ``call`` is its decoded header (arguments as a view into ``record``);
    ``record`` the raw bytes, which a proxy forwards after rewriting the
    XID in place.  ``streamed`` says that :class:`RecordArriving` events
    announced it while it arrived (a proxy may have relayed it already).
    """

    call: rpc.Call
    record: bytearray
    streamed: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class ReplyReceived:
    """A whole reply to an outstanding call, for a client.

    The record is not decoded: a proxy relays it as it is, an NFS client
    calls :meth:`decode`.  ``tag`` is what the caller registered with the
    call's XID (a future, a pending call), and the XID is no longer
    outstanding.
    """

    xid: int
    record: bytearray
    tag: Any
    streamed: bool = False

    def decode(self) -> rpc.Call | rpc.Reply | rpc.Denied:
        """The :class:`rpc.Reply` or :class:`rpc.Denied` it holds."""
        return rpc.decode_message(self.record)


@dataclasses.dataclass(frozen=True, slots=True)
class UnexpectedReply:
    """A reply whose XID is not outstanding.

    Its call timed out or was cancelled, or the reply is a duplicate:
    harmless (RFC 5531 leaves retransmission to clients), the caller may
    log it.
    """

    xid: int


@dataclasses.dataclass(frozen=True, slots=True)
class RecordArriving:
    """A large record of which the first ``filled`` bytes are in.

    ``buffer`` is the very object the record's :class:`CallReceived` or
    :class:`ReplyReceived` will carry, so a proxy can relay its bytes
    while they still arrive (cut-through) instead of after.  A relay may
    rewrite the XID in the buffer: the events keep the XID it arrived
    with.  For a client, ``xid`` and ``tag`` name the outstanding call it
    answers
    (``tag`` is None when the XID is not outstanding); for a server,
    ``xid`` is the call's and ``tag`` is None.  Announced again, with a
    larger ``filled``, after each batch of bytes until it is complete.
    """

    buffer: bytearray
    filled: int
    xid: int
    tag: Any = None


@dataclasses.dataclass(frozen=True, slots=True)
class RecordRefused:
    """A record over the size limit, dropped unread; the stream goes on.

    ``xid`` is its XID, ``head`` its first bytes and ``reason`` what was
    wrong.  For a server it is a call to refuse, alone; for a client, the
    reply to the outstanding call ``tag`` (None when its XID is not
    outstanding), which is no longer outstanding.  An oversized record of
    the wrong kind (or too short to tell) is a ProtocolError instead.
    """

    xid: int
    head: bytes
    reason: str
    tag: Any = None


#: What :meth:`RpcConnection.next_event` returns, besides the sentinels.
Event: TypeAlias = (CallReceived | ReplyReceived | UnexpectedReply
                    | RecordArriving | RecordRefused)


#: Bytes of an arriving reply needed to know its XID and message type.
_REPLY_HEAD = 8
#: Bytes of an arriving call needed to decode its header: more than the
#: largest RPC call header (two 400-byte auth bodies and fixed fields).
CALL_HEAD = 1024


class RpcConnection:
    """One side of an ONC-RPC conversation over a stream.

    A ``SERVER`` receives calls and sends replies; a ``CLIENT`` the
    opposite, and keeps the table of its outstanding XIDs so that each
    reply comes back with what its call registered.  A peer that breaks
    the rules, or sends bytes that do not decode, gets a
    :class:`ProtocolError` from :meth:`next_event`; after one, the
    connection is unusable, as the stream has lost its framing.

    Bytes come in through :meth:`receive_data` (copied) or, as an
    :class:`asyncio.BufferedProtocol` does, by writing into
    :meth:`get_buffer` and calling :meth:`buffer_updated`.  Events come
    out of :meth:`next_event` in stream order: whole messages, then a
    :class:`RecordArriving` for a large record still being filled.
    """

    def __init__(self, role: Role,
                 max_record_size: int = DEFAULT_MAX_RECORD,
                 scratch_size: int = SCRATCH_SIZE) -> None:
        self.role = role
        self._reader = RecordReader(max_record_size, scratch_size)
        self._broken = False
        #: XID -> tag of each call sent and not answered (client role).
        self.outstanding: dict[int, Any] = {}
        #: The large record announced by RecordArriving, its XID as it
        #: arrived, and how much of it was in at the last announcement.
        self._announced: bytearray | None = None
        self._announced_xid: int | None = None
        self._announced_filled = 0

    @property
    def max_record_size(self) -> int:
        return self._reader.max_record_size

    def receive_data(self, data: BytesLike) -> None:
        """Feed bytes from the peer; ``b""`` means the peer closed."""
        self._reader.feed(data)

    def get_buffer(self) -> memoryview:
        """A writable view for the next bytes from the peer."""
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        """``nbytes`` were written into the view from :meth:`get_buffer`."""
        self._reader.buffer_updated(nbytes)

    def next_event(self) -> Event | _Sentinel:
        """The next event, or ``NEED_DATA``, or ``CLOSED``."""
        if self._broken:
            raise ProtocolError("connection already failed")
        try:
            try:
                record = self._reader.next_record()
            except RecordTooLarge as e:
                return self._refused(e)
            if record is None:
                if self._reader.at_eof:
                    return CLOSED
                return self._arriving() or NEED_DATA
            streamed = record is self._announced
            xid: int | None = None
            if streamed:
                # A relay may have rewritten the XID in place meanwhile.
                self._announced, xid = None, self._announced_xid
            if self.role is Role.SERVER:
                call = self._call(record)
                if xid is not None and call.xid != xid:
                    call = dataclasses.replace(call, xid=xid)
                return CallReceived(call, record, streamed)
            return self._reply(record, streamed, xid)
        except ProtocolError:
            self._broken = True
            raise

    def _refused(self, error: RecordTooLarge) -> RecordRefused:
        """The event for an oversized record, if it is of the right kind.

        An oversized call (for a server) or reply (for a client) costs
        itself alone; anything else that large is garbage.
        """
        expected = const.MsgType.CALL if self.role is Role.SERVER \
            else const.MsgType.REPLY
        if len(error.head) < 8 or \
                rpc.read_msg_type(error.head) != expected:
            raise ProtocolError("a %s received an oversized record that is "
                                "not a %s: %s" % (self.role.value,
                                                  expected.name.lower(),
                                                  error))
        # The reader gives the XID of any head that holds one.
        assert error.xid is not None
        tag = None
        if self.role is Role.CLIENT:
            tag = self.outstanding.pop(error.xid, None)
        return RecordRefused(error.xid, error.head, str(error), tag)

    def _call(self, record: bytearray) -> rpc.Call:
        msg = rpc.decode_message(record)
        if not isinstance(msg, rpc.Call):
            raise ProtocolError("a server received a %s"
                                % type(msg).__name__)
        return msg

    def _reply(self, record: bytearray, streamed: bool,
               xid: int | None) -> ReplyReceived | UnexpectedReply:
        if rpc.read_msg_type(record) != const.MsgType.REPLY:
            raise ProtocolError("a client received a call")
        if xid is None:
            xid = rpc.read_xid(record)
        if xid not in self.outstanding:
            return UnexpectedReply(xid)
        return ReplyReceived(xid, record, self.outstanding.pop(xid),
                             streamed)

    def _arriving(self) -> RecordArriving | None:
        partial = self._reader.partial()
        if partial is None:
            return None
        buffer, filled = partial
        if buffer is self._announced:
            if filled == self._announced_filled:
                return None
            # Set with _announced, below.
            assert self._announced_xid is not None
            xid = self._announced_xid
        else:
            head = (_REPLY_HEAD if self.role is Role.CLIENT
                    else min(len(buffer), CALL_HEAD))
            if filled < head:
                return None
            if self.role is Role.CLIENT and \
                    rpc.read_msg_type(buffer) != const.MsgType.REPLY:
                raise ProtocolError("a client received a call")
            xid = rpc.read_xid(buffer)
            self._announced, self._announced_xid = buffer, xid
        self._announced_filled = filled
        tag = self.outstanding.get(xid) if self.role is Role.CLIENT \
            else None
        return RecordArriving(buffer, filled, xid, tag)

    def expect_reply(self, xid: int, tag: Any = None) -> None:
        """Register a call sent with ``xid``; its reply will carry ``tag``.

        For callers that write the call's record themselves (vectored,
        or relayed piece by piece) rather than through :meth:`send`.
        """
        if self.role is not Role.CLIENT:
            raise LocalProtocolError("a server sends no calls")
        if xid in self.outstanding:
            raise LocalProtocolError("XID %#x is already outstanding" % xid)
        self.outstanding[xid] = tag

    def forget(self, xid: int) -> Any:
        """Stop waiting for ``xid`` (timed out, cancelled); its tag."""
        return self.outstanding.pop(xid, None)

    def take_outstanding(self) -> list[Any]:
        """Every outstanding call's tag, forgetting them all.

        For a stream that died: the caller decides what to re-send.
        """
        tags = list(self.outstanding.values())
        self.outstanding.clear()
        return tags

    def send(self, msg: rpc.Call | rpc.Reply | rpc.Denied,
             tag: Any = None) -> bytes:
        """Bytes to write for ``msg``; a call's XID becomes outstanding."""
        allowed: type | tuple[type, ...] = (
            rpc.Call if self.role is Role.CLIENT
            else (rpc.Reply, rpc.Denied))
        if not isinstance(msg, allowed):
            raise LocalProtocolError("a %s cannot send a %s" % (
                self.role.value, type(msg).__name__))
        data = frame(rpc.encode_message(msg))
        if self.role is Role.CLIENT:
            self.expect_reply(msg.xid, tag)
        return data
