# SPDX-License-Identifier: Apache-2.0
"""Writing records to a transport, whole or relayed piece by piece.

A record relayed while it is still arriving (cut-through) occupies its
transport until its last byte is written: anything else written meanwhile
would land inside it.  :class:`RecordWriter` keeps that rule, queueing
whole records behind a relayed one.
"""

import collections
import dataclasses

from gvfs_openstack.client import transport as transport_io
from gvfs_openstack.nfs import connection


class RecordWriter:
    def __init__(self, transport, counters, counter):
        self.transport = transport
        #: The counters object and the name of its field that counts the
        #: bytes written (``downstream_bytes_out``, ``upstream_bytes_out``).
        self.counters = counters
        self.counter = counter
        self._remaining = 0
        self._queue = collections.deque()
        self._gathered = bytearray()
        # A plain socket transport copies what it cannot send at once; the
        # TLS transport keeps a reference, so nothing may be reused there.
        self._reuse_safe = transport.get_extra_info("sslcontext") is None

    def _count(self, nbytes):
        setattr(self.counters, self.counter,
                getattr(self.counters, self.counter) + nbytes)

    @property
    def busy(self):
        """A relayed record is in progress."""
        return bool(self._remaining)

    @property
    def closing(self):
        return self.transport.is_closing()

    def write_record(self, buffers):
        """Write a whole record now, or after the record being relayed."""
        if self.closing:
            return
        if self._remaining:
            self._queue.append(tuple(buffers))
            return
        if len(buffers) > 2:
            buffers = (self._gather(buffers) if self._reuse_safe
                       else b"".join(buffers),)
        self._count(transport_io.write_record(self.transport, buffers))

    def _gather(self, buffers):
        """Copy many small pieces (cache blocks) into one reused buffer.

        One ``send`` instead of one per piece, and no fresh allocation
        per reply: the transport copies only what the socket does not
        take at once, so the buffer is free again when write() returns.
        """
        total = sum(len(b) for b in buffers)
        if len(self._gathered) < total:
            self._gathered = bytearray(total)
        view = memoryview(self._gathered)
        pos = 0
        for piece in buffers:
            view[pos:pos + len(piece)] = piece
            pos += len(piece)
        return view[:total]

    def start_relay(self, length):
        """Begin a record of ``length`` bytes sent in parts; False if busy."""
        if self._remaining or self.closing:
            return False
        self.transport.write(connection.frame_header(length))
        self._count(4)
        self._remaining = length
        return True

    def relay_part(self, view):
        if self.closing:
            return
        self.transport.write(view)
        self._count(len(view))
        self._remaining -= len(view)
        if self._remaining == 0:
            while self._queue and not self._remaining:
                self.write_record(self._queue.popleft())

    def abort(self):
        """The relayed record cannot be finished: the stream is broken."""
        self.transport.abort()


@dataclasses.dataclass(frozen=True)
class RelayTarget:
    """Where a reply may be relayed as it arrives, and with which XID."""

    writer: RecordWriter
    xid: int


#: Result of a call whose reply was relayed downstream as it arrived.
RELAYED = object()
