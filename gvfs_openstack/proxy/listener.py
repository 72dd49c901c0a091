# SPDX-License-Identifier: Apache-2.0
"""The downstream side of a proxy: accepts NFS clients (or a lower proxy).

Each connection reads records, hands each call to the role as its own task
(replies may go back out of order, as ONC-RPC over TCP allows), and writes
the replies.  A peer that sends garbage loses its own connection and
nobody else's; a peer that is not allowed is dropped at accept.
"""

import asyncio
import dataclasses

from oslo_log import log as logging

from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.policy import PeerAllowlist
from gvfs_openstack.proxy import streams
from gvfs_openstack import transport as transport_io

LOG = logging.getLogger(__name__)

#: Bytes of a large call needed to decide whether to relay it: more than
#: the largest RPC header (two 400-byte auth bodies and the fixed fields).
RELAY_HEAD = 1024


class _DownstreamProtocol(asyncio.BufferedProtocol):
    def __init__(self, listener):
        self.listener = listener
        self.counters = listener.counters
        self.reader = connection.RecordReader(listener.max_record_size)
        self.transport = None
        self.tasks = set()
        self.relaying = None  # (record buffer, CallRelay or None)
        self.paused = False
        self.peer = None

    def connection_made(self, transport):
        self.transport = transport
        self.writer = streams.RecordWriter(transport, self.counters,
                                           "downstream_bytes_out")
        transport_io.tune_socket(transport)
        peer = transport.get_extra_info("peername") or ("?", 0)
        self.peer = "%s:%s" % peer[:2]
        if not self.listener.peers.allows(peer[0]):
            self.counters.peers_refused += 1
            LOG.warning("refusing connection from %s: not an allowed "
                        "tunnel endpoint", self.peer)
            transport.abort()
            return
        self.counters.connections += 1
        self.listener.connections.add(self)

    def get_buffer(self, sizehint):
        return self.reader.get_buffer()

    def buffer_updated(self, nbytes):
        self.counters.downstream_bytes_in += nbytes
        self.reader.buffer_updated(nbytes)
        self._relay_partial()
        try:
            while (record := self.reader.next_record()) is not None:
                relay = None
                if self.relaying is not None and \
                        self.relaying[0] is record:
                    relay = self.relaying[1]
                    self.relaying = None
                    if relay is not None:
                        relay.finish()
                call = rpc.decode_message(record)
                if not isinstance(call, rpc.Call):
                    raise ProtocolError("expected a call, got a %s"
                                        % type(call).__name__)
                if relay is not None:
                    # Relaying rewrote the XID in the record itself.
                    call = dataclasses.replace(call,
                                               xid=relay.downstream_xid)
                task = asyncio.get_running_loop().create_task(
                    self._serve(call, record, relay))
                self.tasks.add(task)
            if len(self.tasks) > self.counters.max_inflight_seen:
                self.counters.max_inflight_seen = len(self.tasks)
        except ProtocolError as e:
            self.counters.protocol_errors += 1
            LOG.warning("closing connection from %s: %s", self.peer, e)
            self.transport.abort()
            return
        if len(self.tasks) >= self.listener.max_inflight and not self.paused:
            self.paused = True
            self.transport.pause_reading()

    def _relay_partial(self):
        """Start or continue relaying a large call that is still arriving."""
        partial = self.reader.partial()
        if partial is None:
            return
        buffer, filled = partial
        if self.relaying is not None and self.relaying[0] is buffer:
            if self.relaying[1] is not None:
                self.relaying[1].progress(filled)
            return
        if filled < min(len(buffer), RELAY_HEAD):
            return
        self.relaying = (buffer, self.listener.role.relay_call(
            buffer, filled, self.writer))

    async def _serve(self, call, record, relay=None):
        try:
            reply = await self.listener.role.handle(call, record,
                                                    self.writer, relay)
        finally:
            self.tasks.discard(asyncio.current_task())
            if self.paused and \
                    len(self.tasks) < self.listener.max_inflight // 2 and \
                    not self.transport.is_closing():
                self.paused = False
                self.transport.resume_reading()
        if reply is not None:
            self.writer.write_record(reply if isinstance(reply, tuple)
                                     else (reply,))

    def connection_lost(self, exc):
        self.listener.connections.discard(self)
        if self.relaying is not None and self.relaying[1] is not None:
            self.relaying[1].abandon()
        self.relaying = None
        # Calls already forwarded are left to finish: a non-idempotent one
        # completes into the duplicate request cache for the client's retry.


class Listener:
    """Serves NFS and MOUNT on one TCP port for the given role."""

    def __init__(self, role, host, port, counters, ssl_context=None,
                 peers=None, max_record_size=None, max_inflight=128):
        self.role = role
        self.host = host
        self.port = port
        self.ssl_context = ssl_context
        self.peers = peers or PeerAllowlist([])
        self.max_record_size = (max_record_size
                                or connection.DEFAULT_MAX_RECORD)
        self.max_inflight = max_inflight
        #: :class:`counters.ListenerCounters`
        self.counters = counters
        self.connections = set()
        self._server = None

    async def start(self):
        self._server = await asyncio.get_running_loop().create_server(
            lambda: _DownstreamProtocol(self), self.host, self.port,
            ssl=self.ssl_context, reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def close(self):
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                conn.transport.abort()
            await self._server.wait_closed()
