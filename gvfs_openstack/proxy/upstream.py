# SPDX-License-Identifier: Apache-2.0
"""A pool of connections to the next hop, with XID multiplexing.

Calls from many downstream clients share a few upstream connections, so
their XIDs could collide: each call gets a fresh pool-wide XID on the way
up and its own back on the way down.  When a connection dies, calls that
are safe to repeat are re-sent on another one with the *same* upstream
XID (the next proxy's duplicate request cache recognises them); the others
fail, and are never replayed blindly.
"""

import asyncio
import dataclasses
import random
import time

from oslo_log import log as logging

from gvfs_openstack.client import transport as transport_io
from gvfs_openstack import deadline
from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.proxy import counters as counters_mod
from gvfs_openstack.proxy import relay as relays
from gvfs_openstack.proxy import streams

LOG = logging.getLogger(__name__)


class UpstreamError(Exception):
    """A call could not be completed by the next hop."""


class UpstreamLost(UpstreamError):
    """The connection carrying a non-replayable call died."""


class UpstreamTimeout(UpstreamError):
    """No reply arrived within the call timeout."""


class UpstreamReplyTooLarge(UpstreamError):
    """The next hop's reply exceeds ``[proxy] max_record_size``.

    Sending the call again would bring the same reply: it fails at once.
    """


@dataclasses.dataclass(eq=False)
class _Pending:
    xid: int
    message: tuple  # buffers that make up the call, XID included
    future: asyncio.Future
    replayable: bool
    relay_to: object = None
    conn: object = None
    #: A :class:`relays.Resume`: the reply's relay was cut part-way.
    resume: object = None
    #: When its first bytes went upstream (a relayed call's, as its
    #: record still arrives), for the latency histogram.
    started: float = dataclasses.field(default_factory=time.monotonic)


class _UpstreamProtocol(asyncio.BufferedProtocol):
    """Drives a client-side :class:`connection.RpcConnection`.

    Its table of outstanding XIDs holds each call's :class:`_Pending`.
    """

    def __init__(self, pool):
        self.pool = pool
        self.rpc = connection.RpcConnection(connection.Role.CLIENT,
                                            pool.max_record_size)
        self.transport = None
        self.relay = None
        self.closed = asyncio.get_running_loop().create_future()
        #: Whether a reply came: a relay or tunnel end that takes the
        #: connection while the far side is down closes it unanswered.
        self.answered = False

    @property
    def inflight(self):
        """XID -> :class:`_Pending` of the calls awaiting a reply here."""
        return self.rpc.outstanding

    def connection_made(self, transport):
        self.transport = transport
        self.writer = streams.RecordWriter(transport, self.pool.counters,
                                           "upstream_bytes_out")
        transport_io.tune_socket(transport)

    def get_buffer(self, sizehint):
        return self.rpc.get_buffer()

    def buffer_updated(self, nbytes):
        self.pool.counters.upstream_bytes_in += nbytes
        self.rpc.buffer_updated(nbytes)
        try:
            while (event := self.rpc.next_event()) is not \
                    connection.NEED_DATA:
                if isinstance(event, connection.RecordArriving):
                    self._relay_partial(event)
                elif isinstance(event, connection.ReplyReceived):
                    self._received(event)
                elif isinstance(event, connection.RecordRefused):
                    self._refused(event)
                else:
                    LOG.debug("dropping reply to unknown or finished xid "
                              "%#x", event.xid)
        except ProtocolError as e:
            LOG.warning("upstream %s sent garbage, reconnecting: %s",
                        self.pool.connector.describe(), e)
            self.transport.abort()

    def _refused(self, event):
        """A reply over ``[proxy] max_record_size`` fails its call alone.

        Sending the call again would bring the same reply, so it fails at
        once; the connection and the other calls on it go on.
        """
        LOG.warning("upstream %s sent a reply over the size limit: %s",
                    self.pool.connector.describe(), event.reason)
        pending = event.tag
        if pending is not None and not pending.future.done():
            self.pool.counters.upstream_failed_calls += 1
            pending.future.set_exception(UpstreamReplyTooLarge(
                "reply from %s to call %#x: %s; raise [proxy] "
                "max_record_size" % (self.pool.connector.describe(),
                                     event.xid, event.reason)))

    def _received(self, event):
        self.answered = True
        relay = self.relay
        if event.streamed and relay is not None:
            self.relay = None
            if relay.pending is not None:
                relay.progress(len(event.record))
                relay.pending.future.set_result(streams.RELAYED)
                return
        self.pool._on_reply(event.tag, event.record)

    def _relay_partial(self, event):
        relay = self.relay
        if relay is not None and relay.buffer is event.buffer:
            relay.progress(event.filled)
            return
        pending = event.tag
        if pending is None or pending.relay_to is None or \
                pending.future.done():
            self.relay = relays.ReplyRelay(event.buffer, None)
            return
        if pending.resume is not None and \
                event.filled < relays.RESUME_CHECK:
            return  # Not enough yet to tell it is the same reply.
        self.relay = relays.ReplyRelay(event.buffer, pending)
        self.relay.start(event.filled)

    def connection_lost(self, exc):
        relay, self.relay = self.relay, None
        if relay is not None and relay.pending is not None:
            # Half a record went downstream: the call goes again and its
            # reply finishes the record (or the stream is aborted).
            relay.pending.resume = relays.Resume.of(relay)
            self.pool.counters.upstream_relays_cut += 1
        if not self.closed.done():
            self.closed.set_result(exc)
        self.pool._on_lost(self)

    def expect(self, pending):
        """``pending``'s reply will come on this connection."""
        pending.conn = self
        self.rpc.expect_reply(pending.xid, pending)

    def send(self, pending):
        self.expect(pending)
        self.writer.write_record(pending.message)


class UpstreamPool:
    """``size`` connections through ``connector``, kept up with backoff."""

    def __init__(self, connector, size=2, max_record_size=None,
                 call_timeout=300.0, backoff_initial=0.05, backoff_max=5.0,
                 counters=None):
        self.connector = connector
        self.size = size
        self.max_record_size = (max_record_size
                                or connection.DEFAULT_MAX_RECORD)
        self.call_timeout = call_timeout
        self.backoff_initial = backoff_initial
        self.backoff_max = backoff_max
        #: :class:`counters.UpstreamCounters`, shared by a proxy's pools.
        self.counters = (counters if counters is not None
                         else counters_mod.UpstreamCounters())
        self._live = []
        self._live_changed = None
        self._pending = {}
        self._xid = random.getrandbits(32)
        self._tasks = []
        self._closing = False

    async def start(self):
        self._live_changed = asyncio.Condition()
        self._tasks = [asyncio.create_task(self._keep_connected(i))
                       for i in range(self.size)]

    async def close(self):
        self._closing = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for conn in list(self._live):
            conn.transport.abort()
        self.connector.close()

    async def _keep_connected(self, slot):
        delay = self.backoff_initial
        while not self._closing:
            try:
                _, conn = await self.connector.connect(
                    lambda: _UpstreamProtocol(self))
            except Exception as e:
                # Sockets, TLS and the ssh forward each raise their own
                # types; every failure to connect is handled alike: log,
                # back off, retry.
                LOG.warning("cannot reach %s (slot %d), retrying in %.2fs: %s",
                            self.connector.describe(), slot, delay, e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff_max)
                continue
            self.counters.upstream_connects += 1
            LOG.info("connected to %s (slot %d)", self.connector.describe(),
                     slot)
            async with self._live_changed:
                self._live.append(conn)
                self._live_changed.notify_all()
            await conn.closed
            if conn.answered:
                delay = self.backoff_initial
                continue
            # Accepted and closed without a reply (toxiproxy, sshd or a
            # load balancer in front of a proxy that is down): back off as
            # for a refused connect, or every call would be sent again
            # hundreds of times a second until the far side is back.
            if conn.inflight or self._pending:
                LOG.warning("%s closed the connection (slot %d) without "
                            "answering, retrying in %.2fs",
                            self.connector.describe(), slot, delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff_max)

    def _next_xid(self):
        while True:
            self._xid = (self._xid + 1) & 0xFFFFFFFF
            if self._xid not in self._pending:
                return self._xid

    async def _pick(self):
        async with self._live_changed:
            await self._live_changed.wait_for(lambda: bool(self._live))
            return min(self._live, key=lambda c: len(c.inflight))

    async def _send(self, pending):
        conn = await self._pick()
        conn.send(pending)

    def _register(self, replayable, relay_to, build):
        xid = self._next_xid()
        pending = _Pending(xid, build(xid),
                           asyncio.get_running_loop().create_future(),
                           replayable, relay_to)
        self._pending[xid] = pending
        return pending

    def _forget(self, pending):
        self._pending.pop(pending.xid, None)
        if pending.conn is not None and \
                pending.conn.inflight.get(pending.xid) is pending:
            pending.conn.rpc.forget(pending.xid)
        if not pending.future.done():
            pending.future.cancel()

    def start_relay(self, build_prefix, buffer, source_start, filled,
                    relay_to):
        """Start relaying a call whose record is still arriving.

        ``build_prefix(xid)`` returns the bytes that replace the first
        ``source_start`` bytes of ``buffer`` upstream.  Returns a
        :class:`relays.CallRelay`, or None when no connection is free to
        carry a relayed record right now (the call is then sent whole,
        later).
        """
        free = [c for c in self._live if not c.writer.busy]
        if not free:
            return None
        conn = min(free, key=lambda c: len(c.inflight))
        pending = self._register(True, relay_to, lambda xid: None)
        prefix = build_prefix(pending.xid)
        conn.expect(pending)
        relay = relays.CallRelay(self, conn, pending, buffer, prefix,
                                 source_start)
        relay.progress(filled)
        return relay

    def _resend_later(self, pending):
        asyncio.get_running_loop().create_task(self._resend(pending))

    async def call(self, build_message, replayable, relay_to=None):
        """Send the buffers ``build_message(xid)`` and return the reply.

        The reply is the raw record as a ``bytearray`` (its XID is the
        upstream one) -- or :data:`streams.RELAYED` if ``relay_to`` (a
        :class:`streams.RelayTarget`) was given and the reply was large
        enough to be relayed there as it arrived.
        """
        pending = self._register(replayable, relay_to, build_message)
        return await self._wait(pending, send=True)

    async def _wait(self, pending, send):
        try:
            await deadline.within(
                self.call_timeout,
                self._send_and_wait(pending) if send else pending.future)
            reply = pending.future.result()
            self.counters.upstream_call_seconds.observe(
                time.monotonic() - pending.started)
            return reply
        except TimeoutError:
            self.counters.upstream_failed_calls += 1
            raise UpstreamTimeout("no reply from %s within %.0fs" % (
                self.connector.describe(), self.call_timeout)) from None
        finally:
            self._forget(pending)
            if pending.resume is not None and \
                    pending.future.cancelled():
                # Half a record downstream that nothing will finish.
                pending.relay_to.writer.abort()

    async def _send_and_wait(self, pending):
        await self._send(pending)
        await pending.future

    def _on_reply(self, pending, record):
        if pending.future.done():
            LOG.debug("dropping reply to finished xid %#x", pending.xid)
            return
        if pending.resume is not None:
            # The rest of a record cut part-way downstream, or the abort
            # of that stream: either way nothing else goes there.
            relays.ReplyRelay(record, pending).start(len(record))
            pending.future.set_result(streams.RELAYED)
            return
        pending.future.set_result(record)

    def _on_lost(self, conn):
        if conn in self._live:
            self._live.remove(conn)
        if self._closing:
            return
        LOG.warning("lost connection to %s with %d calls in flight",
                    self.connector.describe(), len(conn.inflight))
        for pending in conn.rpc.take_outstanding():
            if pending.future.done():
                continue
            if pending.message is None:
                # Still being relayed from below: CallRelay.finish re-sends
                # it once the whole record is in.
                pending.conn = None
            elif pending.replayable:
                self.counters.upstream_resent += 1
                pending.conn = None
                asyncio.get_running_loop().create_task(self._resend(pending))
            else:
                self.counters.upstream_failed_calls += 1
                pending.future.set_exception(UpstreamLost(
                    "connection to %s died with the call in flight"
                    % self.connector.describe()))

    async def _resend(self, pending):
        if self._pending.get(pending.xid) is pending:
            await self._send(pending)
