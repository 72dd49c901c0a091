# SPDX-License-Identifier: Apache-2.0
"""Relaying large records while they still arrive (cut-through).

A client with one call in flight (``nfs-cp``, a VM reading its disk) waits
for every reply to cross every hop.  Store-and-forward adds a whole record's
transfer time per proxy; relaying the record's bytes as they come in adds
only the time of one chunk.  Replies (READ data) are relayed downstream by
:class:`ReplyRelay`, calls (WRITE data) upstream by :class:`CallRelay`.
"""

import dataclasses

from gvfs_openstack.nfs import rpc


#: Bytes of a reply that must be in before a re-sent call's reply can be
#: checked against the one it completes: the RPC reply header and the
#: NFS status (RFC 5531 section 9, RFC 1813).
RESUME_CHECK = 28


@dataclasses.dataclass(frozen=True)
class Resume:
    """Where a relayed reply was cut, for its re-sent call to finish it.

    ``length`` is the record's length, ``sent`` how many of its bytes
    went downstream, ``head`` its bytes 4 (after the XID) to
    :data:`RESUME_CHECK`, as far as they went.
    """

    length: int
    sent: int
    head: bytes

    @classmethod
    def of(cls, relay):
        return cls(len(relay.buffer), relay.sent,
                   bytes(relay.buffer[4:min(relay.sent, RESUME_CHECK)]))


class ReplyRelay:
    """A reply record being relayed downstream while it arrives.

    A relay cut by the upstream connection's death leaves half a record
    downstream; the call is sent again (it is idempotent) and its new
    reply finishes that record from where the old one stopped
    (``pending.resume``), if it is the same reply: same length, same
    header and status (a READ of an unchanged file).  Otherwise the
    downstream connection is aborted, as a server's death would, and the
    client sends its call again.  Some clients (libnfs) never recover
    from a record cut in the middle, so finishing it is worth the check.
    """

    def __init__(self, buffer, pending):
        self.buffer = buffer
        self.pending = pending
        self.sent = 0

    def start(self, filled):
        target = self.pending.relay_to
        resume = self.pending.resume
        if resume is not None:
            self._resume(resume, filled)
            return
        if not target.writer.start_relay(len(self.buffer)):
            self.pending = None  # Busy downstream: deliver it whole.
            return
        rpc.set_xid(self.buffer, target.xid)
        self.progress(filled)

    def _resume(self, resume, filled):
        head = bytes(self.buffer[4:4 + len(resume.head)])
        if len(self.buffer) != resume.length or head != resume.head:
            self.pending.relay_to.writer.abort()
            self.pending = None
            return
        self.sent = resume.sent
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
