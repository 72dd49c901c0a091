# SPDX-License-Identifier: Apache-2.0
"""The downstream side of a proxy: accepts NFS clients (or a lower proxy).

Each connection reads records, hands each call to the role as its own task
(replies may go back out of order, as ONC-RPC over TCP allows), and writes
the replies.  A peer that sends garbage loses its own connection and
nobody else's; a peer that is not allowed is dropped at accept.
"""

import asyncio
import dataclasses
import socket
import ssl

from cryptography.x509.oid import ExtendedKeyUsageOID
from oslo_log import log as logging

from gvfs_openstack.client import tls as client_tls
from gvfs_openstack.client import transport as transport_io
from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.access import PeerAllowlist
from gvfs_openstack.proxy.local_peers import LocalPeers
from gvfs_openstack.proxy import streams

LOG = logging.getLogger(__name__)

#: What a worker sends its supervisor when a handed connection ends.
CONNECTION_ENDED = b"c"


class _DownstreamProtocol(asyncio.BufferedProtocol):
    """Drives a server-side :class:`connection.RpcConnection`."""

    def __init__(self, listener):
        self.listener = listener
        self.counters = listener.counters
        self.rpc = connection.RpcConnection(connection.Role.SERVER,
                                            listener.limits.max_record_size)
        self.transport = None
        self.tasks = set()
        self.relaying = None  # (record buffer, CallRelay or None)
        #: Too many of its calls in flight; its replies not read: either
        #: stops taking its calls (see :meth:`_take_calls`).
        self.busy = False
        self.backlogged = False
        self.peer = None
        #: The check of who owns the peer's socket (a task), and whether
        #: it passed: no call is taken before.
        self.admitting = None
        self.admitted = False

    def connection_made(self, transport):
        self.transport = transport
        self.writer = streams.RecordWriter(transport, self.counters,
                                           "downstream_bytes_out")
        transport_io.tune_socket(transport)
        transport.set_write_buffer_limits(
            high=self.listener.limits.max_buffered,
            low=self.listener.limits.max_buffered // 4)
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = "%s:%s" % peer[:2]
        if not self.listener.peers.allows(peer[0]):
            self._refuse_peer("not an allowed tunnel endpoint")
            return
        # Nothing is read until the kernel has said whose socket this is.
        transport.pause_reading()
        self.admitting = asyncio.get_running_loop().create_task(
            self._admit(peer[:2], transport.get_extra_info("sockname")[:2]))

    async def _admit(self, peer, local):
        """Serve the connection if its local owner (if any) may be served.

        The kernel is asked in a thread: each lookup blocks, and the
        event loop serves every other client meanwhile.  A lookup that
        fails refuses the connection.
        """
        try:
            why = await asyncio.get_running_loop().run_in_executor(
                None, self.listener.local_peers.refusal, peer, local)
        except Exception as e:
            # A check that breaks must not let the peer in: refuse it,
            # saying why, and go on serving the others.
            why = "its owner could not be checked: %s" % e
        if self.transport.is_closing():
            return
        if why is not None:
            self._refuse_peer(why)
            return
        if self.listener.ssl_context is not None and \
                not client_tls.certificate_allows(
                    self.transport.get_extra_info("ssl_object"),
                    ExtendedKeyUsageOID.CLIENT_AUTH):
            self._refuse_peer("its certificate is not issued for TLS "
                              "clients (extended key usage clientAuth)")
            return
        self.counters.connections += 1
        self.listener.connections.add(self)
        self.admitted = True
        self._take_calls()

    def _refuse_peer(self, why):
        self.counters.peers_refused += 1
        LOG.warning("refusing connection from %s: %s", self.peer, why)
        self.transport.abort()

    def get_buffer(self, sizehint):
        return self.rpc.get_buffer()

    def buffer_updated(self, nbytes):
        self.counters.downstream_bytes_in += nbytes
        self.rpc.buffer_updated(nbytes)
        self._take_calls()

    def _take_calls(self):
        """Serve the calls received, while this client keeps up.

        A client with ``[proxy] max_inflight`` calls in flight, or whose
        replies pile up unread (beyond ``max_buffered_mb`` in the socket's
        buffer), has no more calls taken -- not even those already
        received, hundreds of which fit in one read -- and is not read
        from, until it has fewer or reads them: what one client makes the
        proxy hold is bounded, and a client that floods it slows only
        itself.
        """
        if not self.admitted:
            return
        try:
            while not (self.busy or self.backlogged) and (
                    event := self.rpc.next_event()) is not \
                    connection.NEED_DATA:
                if isinstance(event, connection.RecordArriving):
                    self._relay_partial(event)
                elif isinstance(event, connection.RecordRefused):
                    self._refuse(event)
                else:
                    self._received(event)
                    self.busy = len(self.tasks) >= \
                        self.listener.limits.max_inflight
            if len(self.tasks) > self.counters.max_inflight_seen:
                self.counters.max_inflight_seen = len(self.tasks)
        except ProtocolError as e:
            self.counters.protocol_errors += 1
            LOG.warning("closing connection from %s: %s", self.peer, e)
            self.transport.abort()
            return
        reading = not (self.busy or self.backlogged)
        if reading != self.transport.is_reading() and \
                not self.transport.is_closing():
            if reading:
                self.transport.resume_reading()
            else:
                self.transport.pause_reading()

    def pause_writing(self):
        self.backlogged = True
        self.counters.clients_backlogged += 1
        self._take_calls()

    def resume_writing(self):
        self.backlogged = False
        self._take_calls()

    def _received(self, event):
        call, relay = event.call, None
        if event.streamed and self.relaying is not None:
            relay = self.relaying[1]
            self.relaying = None
            if relay is not None:
                relay.finish()
        task = asyncio.get_running_loop().create_task(
            self._serve(call, event.record, relay))
        self.tasks.add(task)

    def _refuse(self, event):
        """A call over ``[proxy] max_record_size``: refused, alone.

        Its arguments were never read, so it is answered GARBAGE_ARGS; the
        connection, which other clients may share behind a proxy, goes on.
        """
        self.counters.calls_too_large += 1
        LOG.warning("refusing a call from %s: %s", self.peer, event.reason)
        self.writer.write_record((rpc.accepted(
            event.xid, const.AcceptStat.GARBAGE_ARGS),))

    def _relay_partial(self, event):
        """Start or continue relaying a large call that is still arriving."""
        if self.relaying is not None and self.relaying[0] is event.buffer:
            if self.relaying[1] is not None:
                self.relaying[1].progress(event.filled)
            return
        self.relaying = (event.buffer, self.listener.role.relay_call(
            event.buffer, event.filled, self.writer))

    async def _serve(self, call, record, relay=None):
        try:
            reply = await self.listener.role.handle(call, record,
                                                    self.writer, relay)
        finally:
            self.tasks.discard(asyncio.current_task())
            if self.busy and \
                    len(self.tasks) < self.listener.limits.max_inflight // 2:
                self.busy = False
                self._take_calls()
        if reply is not None:
            self.writer.write_record(reply if isinstance(reply, tuple)
                                     else (reply,))

    def connection_lost(self, exc):
        if self.admitting is not None:
            self.admitting.cancel()
        self.listener.connections.discard(self)
        self.listener.ended()
        if self.relaying is not None and self.relaying[1] is not None:
            self.relaying[1].abandon()
        self.relaying = None
        # Calls already forwarded are left to finish: a non-idempotent one
        # completes into the duplicate request cache for the client's retry.


@dataclasses.dataclass(frozen=True)
class ConnectionLimits:
    """What one downstream connection may ask of the listener.

    ``max_record_size``: the largest record read (larger ones are
    refused alone); ``max_inflight``: calls in flight before its calls
    are no longer read; ``max_buffered``: bytes of replies it may leave
    unread before the same.
    """

    max_record_size: int = connection.DEFAULT_MAX_RECORD
    max_inflight: int = 128
    max_buffered: int = 32 * 1024 * 1024

    @classmethod
    def from_conf(cls, proxy):
        """The limits of oslo.config group ``proxy`` (``[proxy]``)."""
        return cls(proxy.max_record_size, proxy.max_inflight,
                   proxy.max_buffered_mb * 1024 * 1024)


class Listener:
    """Serves NFS and MOUNT on one TCP port for the given role."""

    def __init__(self, role, host, port, counters,
                 limits=ConnectionLimits(), ssl_context=None, peers=None,
                 local_peers=None):
        self.role = role
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.peers = peers or PeerAllowlist([])
        #: :class:`local_peers.LocalPeers`: by default only root and this
        #: process's account may connect from this host.
        self.local_peers = local_peers or LocalPeers()
        #: :class:`ConnectionLimits`; a reload replaces them.
        self.limits = limits
        #: :class:`counters.ListenerCounters`
        self.counters = counters
        self.connections = set()
        self._server = None
        #: The socket a supervisor hands connections over (a worker of
        #: :mod:`gvfs_openstack.proxy.workers`), or None.
        self._channel = None
        self._supervisor_gone = None

    async def start_from(self, channel, supervisor_gone):
        """Serve the connections a supervisor sends over ``channel``.

        Each arrives as a file descriptor (``SCM_RIGHTS``); each that
        ends is reported back, so the supervisor knows how many this
        worker serves.  ``supervisor_gone()`` is called when the
        supervisor's end closes: nobody hands connections any more.
        """
        self._channel = channel
        self._supervisor_gone = supervisor_gone
        channel.setblocking(False)
        asyncio.get_running_loop().add_reader(channel, self._take_handed)
        return self.port

    def _take_handed(self):
        try:
            data, fds, _, _ = socket.recv_fds(self._channel, 16, 16)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data, fds = b"", []
        if not data and not fds:
            asyncio.get_running_loop().remove_reader(self._channel)
            self._channel.close()
            self._channel = None
            LOG.error("the supervisor is gone: stopping")
            self._supervisor_gone()
            return
        for fd in fds:
            conn = socket.socket(fileno=fd)
            conn.setblocking(False)
            asyncio.ensure_future(self._adopt(conn))

    async def _adopt(self, conn):
        loop = asyncio.get_running_loop()
        try:
            await loop.connect_accepted_socket(
                lambda: _DownstreamProtocol(self), conn,
                ssl=self.ssl_context)
        except (OSError, ssl.SSLError) as e:
            # Never made: no connection_lost will report it.
            LOG.warning("connection handed over failed before it was "
                        "served: %s", e)
            conn.close()
            self.ended()

    def ended(self):
        """A connection is over: tell the supervisor, if there is one."""
        if self._channel is not None:
            try:
                self._channel.send(CONNECTION_ENDED)
            except OSError:
                pass  # The supervisor is gone; _take_handed sees it too.

    async def start(self):
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _DownstreamProtocol(self), self.host, self.port,
            ssl=self.ssl_context, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self):
        if self._channel is not None:
            asyncio.get_running_loop().remove_reader(self._channel)
            self._channel.close()
            self._channel = None
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            conn.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()
