"""Relaying large records while they still arrive (cut-through).

A client with one call in flight (``nfs-cp``, a VM reading its disk) waits
for every reply to cross every hop.  Store-and-forward adds a whole record's
transfer time per proxy; relaying the record's bytes as they come in adds
only the time of one chunk.  Replies (READ data) are relayed downstream by
:class:`ReplyRelay`, calls (WRITE data) upstream by :class:`CallRelay`.
"""

from gvfs_openstack.nfs import rpc


class ReplyRelay:
    """A reply record being relayed downstream while it arrives."""

    def __init__(self, buffer, pending):
        self.buffer = buffer
        self.pending = pending
        self.sent = 0

    def start(self, filled):
        target = self.pending.relay_to
        if not target.writer.start_relay(len(self.buffer)):
            self.pending = None  # Busy downstream: deliver it whole.
            return
        rpc.set_xid(self.buffer, target.xid)
        self.progress(filled)

    def progress(self, filled):
        if self.pending is not None and filled > self.sent:
            self.pending.relay_to.writer.relay_part(
                memoryview(self.buffer)[self.sent:filled])
            self.sent = filled


class CallRelay:
    """A large call relayed upstream while it still arrives from below.

    The upstream message is ``prefix`` followed by ``buffer`` from
    ``source_start`` on; ``buffer`` is the downstream record being filled.
    If the upstream connection dies before the record is complete, the
    call is re-sent whole once it is (it is idempotent).
    """

    def __init__(self, pool, conn, pending, buffer, prefix, source_start):
        self.pool = pool
        self.conn = conn
        self.pending = pending
        self.buffer = buffer
        self.prefix = prefix
        self.source_start = source_start
        self.sent = source_start
        length = len(prefix) + len(buffer) - source_start
        conn.writer.start_relay(length)
        if prefix:
            conn.writer.relay_part(prefix)

    @property
    def downstream_xid(self):
        return self.pending.relay_to.xid

    def progress(self, filled):
        if self.pending.conn is self.conn and filled > self.sent:
            self.conn.writer.relay_part(
                memoryview(self.buffer)[self.sent:filled])
            self.sent = filled

    def finish(self):
        """The downstream record is complete."""
        self.progress(len(self.buffer))
        body = memoryview(self.buffer)[self.source_start:]
        self.pending.message = (self.prefix, body) if self.prefix else \
            (body,)
        if self.pending.conn is not self.conn:
            self.pool._resend_later(self.pending)

    def abandon(self):
        """The downstream record will never complete: unblock upstream."""
        if self.pending.conn is self.conn:
            self.conn.transport.abort()
        self.pool._forget(self.pending)

    async def wait(self):
        return await self.pool._wait(self.pending, send=False)
