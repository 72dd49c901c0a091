"""Writing records to a transport, whole or relayed piece by piece.

A record relayed while it is still arriving (cut-through) occupies its
transport until its last byte is written: anything else written meanwhile
would land inside it.  :class:`RecordWriter` keeps that rule, queueing
whole records behind a relayed one.
"""

import collections
import dataclasses

from gvfs_openstack.nfs import connection


class RecordWriter:
    def __init__(self, transport, stats, counter):
        self.transport = transport
        self.stats = stats
        self.counter = counter
        self._remaining = 0
        self._queue = collections.deque()

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
        self.stats[self.counter] += connection.write_record(self.transport,
                                                            buffers)

    def start_relay(self, length):
        """Begin a record of ``length`` bytes sent in parts; False if busy."""
        if self._remaining or self.closing:
            return False
        self.transport.write(connection.frame_header(length))
        self.stats[self.counter] += 4
        self._remaining = length
        return True

    def relay_part(self, view):
        if self.closing:
            return
        self.transport.write(view)
        self.stats[self.counter] += len(view)
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
