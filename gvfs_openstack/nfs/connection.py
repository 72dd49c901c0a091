# SPDX-License-Identifier: Apache-2.0
"""Sans-IO ONC-RPC over a byte stream: record marking and a connection.

Record marking (RFC 5531 section 11): each record is one or more fragments,
each preceded by a 4-byte header whose top bit marks the last fragment and
whose low 31 bits give the fragment length.

:class:`RecordReader` turns bytes into whole records; :class:`RpcConnection`
turns records into messages for one side of a conversation (h11-style:
``receive_data`` in, ``next_event`` out, ``send`` returns bytes to write).
No sockets, no threads: the same object serves asyncio code, blocking code
and tests that pump bytes between two peers (writing records to a socket
is :mod:`gvfs_openstack.transport`'s).
"""

import collections
import enum
import struct

from gvfs_openstack.nfs.errors import LocalProtocolError
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs.errors import RecordTooLarge
from gvfs_openstack.nfs import rpc

_HEADER = struct.Struct(">I")
_LAST_FRAGMENT = 0x80000000
_LENGTH_MASK = 0x7FFFFFFF

#: A 1 MiB READ or WRITE plus headers fits with room to spare.
DEFAULT_MAX_RECORD = 4 * 1024 * 1024
#: Records smaller than this are parsed from one shared buffer.
SCRATCH_SIZE = 64 * 1024
#: Largest fragment we write; big enough that headers cost nothing.
MAX_FRAGMENT = 1 << 30


class Role(enum.Enum):
    CLIENT = "client"
    SERVER = "server"


class _Sentinel(enum.Enum):
    NEED_DATA = "need-data"
    CLOSED = "closed"


NEED_DATA = _Sentinel.NEED_DATA
CLOSED = _Sentinel.CLOSED


def frame(message):
    """Record-mark an encoded message as a single last fragment."""
    if len(message) > MAX_FRAGMENT:
        raise LocalProtocolError("message of %d bytes is too large to send"
                                 % len(message))
    return _HEADER.pack(_LAST_FRAGMENT | len(message)) + message


def frame_header(length):
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
    """

    def __init__(self, max_record_size=DEFAULT_MAX_RECORD,
                 scratch_size=SCRATCH_SIZE):
        self.max_record_size = max_record_size
        self._scratch = bytearray(scratch_size)
        self._start = 0
        self._end = 0
        self._big = None
        self._big_filled = 0
        self._big_last = False
        self._fragments = []
        self._record_len = 0
        self._records = collections.deque()
        self._eof = False
        self._error = None

    @property
    def at_eof(self):
        return self._eof

    def get_buffer(self):
        """A writable view for the next bytes from the peer."""
        if self._big is not None:
            return memoryview(self._big)[self._big_filled:]
        if self._end == len(self._scratch) or (
                self._start and len(self._scratch) - self._end < 4096):
            pending = self._end - self._start
            self._scratch[:pending] = self._scratch[self._start:self._end]
            self._start, self._end = 0, pending
        return memoryview(self._scratch)[self._end:]

    def buffer_updated(self, nbytes):
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

    def feed(self, data):
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

    def _parse(self):
        if self._error is not None:
            return
        scratch = self._scratch
        while self._end - self._start >= 4:
            header = _HEADER.unpack_from(scratch, self._start)[0]
            length = header & _LENGTH_MASK
            last = bool(header & _LAST_FRAGMENT)
            if self._record_len + length > self.max_record_size:
                first = self._record_len == 0 and length >= 4 and \
                    self._end - self._start >= 8
                self._error = RecordTooLarge(
                    "record of at least %d bytes exceeds the limit of %d"
                    % (self._record_len + length, self.max_record_size),
                    xid=_HEADER.unpack_from(scratch, self._start + 4)[0]
                    if first else None)
                return
            body = self._start + 4
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

    def _fragment_done(self, fragment, last):
        if last and not self._fragments:
            self._records.append(fragment)
            return
        self._fragments.append(fragment)
        self._record_len += len(fragment)
        if last:
            self._records.append(bytearray().join(self._fragments))
            self._fragments = []
            self._record_len = 0

    def partial(self):
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

    def next_record(self):
        """A complete record, or ``None`` when more bytes are needed.

        Raises :class:`RecordTooLarge` before buffering an oversized record
        and :class:`ProtocolError` if the stream ended inside a record.
        """
        if self._records:
            return self._records.popleft()
        if self._error is not None:
            raise self._error
        if self._eof and (self._end > self._start or self._fragments
                          or self._big is not None):
            raise ProtocolError("connection closed inside a record")
        return None


class RpcConnection:
    """One side of an ONC-RPC conversation over a stream.

    A ``SERVER`` receives calls and sends replies; a ``CLIENT`` the
    opposite.  A peer that breaks that rule, or sends bytes that do not
    decode, gets a :class:`ProtocolError` from :meth:`next_event`; after
    one, the connection is unusable, as the stream has lost its framing.
    """

    def __init__(self, role, max_record_size=DEFAULT_MAX_RECORD):
        self.role = role
        self._reader = RecordReader(max_record_size)
        self._broken = False

    def receive_data(self, data):
        """Feed bytes from the peer; ``b""`` means the peer closed."""
        self._reader.feed(data)

    def next_event(self):
        """The next message, or ``NEED_DATA``, or ``CLOSED``.

        Messages are :class:`rpc.Call` for a server and :class:`rpc.Reply`
        or :class:`rpc.Denied` for a client.
        """
        if self._broken:
            raise ProtocolError("connection already failed")
        try:
            record = self._reader.next_record()
            if record is None:
                return CLOSED if self._reader.at_eof else NEED_DATA
            msg = rpc.decode_message(record)
        except ProtocolError:
            self._broken = True
            raise
        expected = rpc.Call if self.role is Role.SERVER else (rpc.Reply,
                                                              rpc.Denied)
        if not isinstance(msg, expected):
            self._broken = True
            raise ProtocolError("a %s received a %s" % (
                self.role.value, type(msg).__name__))
        return msg

    def send(self, msg):
        """Bytes to write for ``msg``."""
        allowed = rpc.Call if self.role is Role.CLIENT else (rpc.Reply,
                                                             rpc.Denied)
        if not isinstance(msg, allowed):
            raise LocalProtocolError("a %s cannot send a %s" % (
                self.role.value, type(msg).__name__))
        return frame(rpc.encode_message(msg))
