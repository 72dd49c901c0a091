# SPDX-License-Identifier: Apache-2.0
"""``gvfs-api``: the REST API on a threaded HTTP server of its own.

    gvfs-api --config-file /etc/gvfs-openstack/gvfs-api.conf

Under oslo.service's launcher (:mod:`gvfs_openstack.cmd.launch`): systemd
is told when it is ready, SIGHUP re-reads the configuration, SIGTERM
stops it once the requests being answered are.  For a host with a few
users; a deployment with many runs the same application under a WSGI
server (:mod:`gvfs_openstack.wsgi.api`).
"""

import collections
import io
import ipaddress
import socket
import socketserver
import sys
import threading
import time
from wsgiref import simple_server

from oslo_log import log as logging
from oslo_service.backend import base

# First: importing it chooses oslo.service's backend.
from gvfs_openstack.cmd import launch
from gvfs_openstack.api import app  # noqa: H306
from gvfs_openstack.api import faults
from gvfs_openstack.api import service
from gvfs_openstack import metrics_access
from gvfs_openstack import metrics_server
from gvfs_openstack import request_deadline

LOG = logging.getLogger(__name__)


_BUSY_BODY = b"Too many connections from your address.\r\n"
#: What a connection beyond ``max_connections_per_source`` is answered.
_BUSY = (b"HTTP/1.0 503 Service Unavailable\r\n"
         b"Content-Type: text/plain\r\nContent-Length: %d\r\n"
         b"Retry-After: 10\r\nConnection: close\r\n\r\n%s"
         % (len(_BUSY_BODY), _BUSY_BODY))

#: Seconds between two warnings of refused connections.
_WARN_EVERY = 60.0


def _source(host):
    """Whom a connection from ``host`` counts against: IPv6 by its /64.

    One IPv6 host may use any address of its /64, so counting each
    address alone would limit nothing.
    """
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    if address.version == 4:
        return str(address)
    if address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return str(ipaddress.ip_network((address, 64), strict=False))


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    """A thread per connection, at most ``max_connections`` of them.

    The accepting thread waits for a free slot before it accepts more:
    the connections beyond wait in the kernel's listen queue, and no
    number of clients makes the process start more threads.  One source
    address holds at most ``max_per_source`` of them: the excess is
    answered 503 at once, without waiting for a slot, so that one host
    cannot take them all (and the handler's request deadline frees the
    slots of those it holds).

    Many sources together can still hold every slot with requests they
    never finish, each under its share, and reconnect as the deadline
    cuts them: an honest request would wait behind them in the listen
    queue for deadline after deadline.  So when every slot is taken, a
    new connection takes the slot of the connection that has been
    sending its request longest, if that is over ``evict_after``
    seconds: an honest client sends its request at once and then only
    waits for the answer, which is never cut; a trickling one is
    always the oldest still sending.  A burst of honest requests still
    waits its turn: none of them is old enough to be cut.
    """

    daemon_threads = False      # A stop waits for requests in progress.
    block_on_close = True
    allow_reuse_address = True
    #: The listen queue (socketserver's is 5): a burst of connections
    #: waits there to be accepted (or refused, past its source's share)
    #: instead of having its SYNs dropped and retried seconds later.
    request_queue_size = 128
    max_connections = 64
    #: Seconds an accepted connection waits for a slot before it is
    #: closed (so a stop is never held up for longer).
    slot_wait = 60.0
    max_per_source = 16
    #: Seconds a connection may send its request before a new connection
    #: may take its slot when every slot is taken.
    evict_after = 2.0

    def server_activate(self):
        super().server_activate()
        self.slots = threading.BoundedSemaphore(self.max_connections)
        self._sources = collections.Counter()
        self._sources_lock = threading.Lock()
        #: The connections still sending their request, oldest first
        #: (dicts keep their insertion order): socket -> accepted at.
        self._sending = {}
        self._refused = 0
        self._evicted = 0
        self._warned_at = None
        self._evictions_warned_at = None

    def verify_request(self, request, client_address):
        source = _source(client_address[0])
        if not self._enter(source):
            self._refuse(request, source)
            return False
        slot = self.slots.acquire(blocking=False)
        deadline = time.monotonic() + self.slot_wait
        while not slot and (left := deadline - time.monotonic()) > 0:
            # Cut the oldest sender if it is old enough and wait for its
            # slot; else wait for a slot until it is.
            until_one_is = self._evict_oldest_sender()
            slot = self.slots.acquire(timeout=min(left, until_one_is or left))
        if slot:
            with self._sources_lock:
                self._sending[request] = time.monotonic()
            return True
        self._leave(source)
        LOG.warning("closing a connection from %s: %d connections are "
                    "being served ([api] max_connections)",
                    client_address[0], self.max_connections)
        return False

    def _enter(self, source):
        """Count a connection of ``source``; False if it has its share."""
        with self._sources_lock:
            if self._sources[source] >= self.max_per_source:
                self._refused += 1
                return False
            self._sources[source] += 1
            return True

    def _leave(self, source):
        with self._sources_lock:
            self._sources[source] -= 1
            if not self._sources[source]:
                del self._sources[source]

    def received(self, request):
        """``request``'s connection has sent its whole request."""
        with self._sources_lock:
            self._sending.pop(request, None)

    def _evict_oldest_sender(self):
        """Cut the connection sending its request longest, if old enough.

        Its thread's next read ends and gives the slot back.  Returns 0
        if one was cut, the seconds until the oldest sender is old
        enough, or None if no connection is sending (all are answered).
        """
        with self._sources_lock:
            oldest = next(iter(self._sending.items()), None)
            if oldest is None:
                return None
            young = self.evict_after - (time.monotonic() - oldest[1])
            if young > 0:
                return young
            del self._sending[oldest[0]]
            self._evicted += 1
        try:
            oldest[0].shutdown(socket.SHUT_RDWR)
        except OSError:
            pass    # It ended meanwhile: its slot is coming back anyway.
        now = time.monotonic()
        if self._evictions_warned_at is None or \
                now - self._evictions_warned_at >= _WARN_EVERY:
            self._evictions_warned_at = now
            LOG.warning("every one of %d connections is taken: cut the "
                        "one sending its request longest; %d cut so far",
                        self.max_connections, self._evicted)
        return 0

    def _refuse(self, request, source):
        """Answer 503 without waiting on the client, warn now and then."""
        try:
            request.setblocking(False)
            request.send(_BUSY)
        except OSError:
            pass    # Its buffer is full or it left: it is closed anyway.
        now = time.monotonic()
        if self._warned_at is None or now - self._warned_at >= _WARN_EVERY:
            self._warned_at = now
            LOG.warning("refusing connections from %s: it holds %d "
                        "([api] max_connections_per_source); %d refused "
                        "so far", source, self.max_per_source, self._refused)

    def process_request(self, request, client_address):
        try:
            super().process_request(request, client_address)
        except BaseException:
            # No thread started (none left to start): no thread will
            # release the slot, so this does.
            self.received(request)
            self.slots.release()
            self._leave(_source(client_address[0]))
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.received(request)
            self.slots.release()
            self._leave(_source(client_address[0]))

    def handle_error(self, request, client_address):
        LOG.debug("connection from %s ended: %s", client_address,
                  sys.exc_info()[1])


class _Handler(simple_server.WSGIRequestHandler):
    #: Seconds a client may take to send or read (socket timeout).
    timeout = 60.0
    #: Seconds from the start of the connection's service to the last
    #: byte of its request (see :class:`request_deadline.DeadlineReader`).
    request_timeout = 60.0

    def setup(self):
        super().setup()
        # One request per connection (wsgiref's handler serves one), so
        # the deadline is the request's, head and body.
        self.rfile.close()      # The socket's plain reader, unused.
        self.rfile = io.BufferedReader(request_deadline.DeadlineReader(
            self.connection, time.monotonic() + self.request_timeout,
            self.timeout))

    def parse_request(self):
        """Read the whole request here, then tell the server it is in.

        The body is read by the server, within the request's deadline,
        before any of the application runs (keystonemiddleware's token
        check included): a request is "still sending", and so the one a
        new connection may cut when every slot is taken, exactly until
        its last byte has arrived, however long the application then
        takes.  Only a body of ``Content-Length`` bytes, at most
        :data:`app.MAX_BODY`, is read: a chunked one (which the
        application would read up to that size at its own pace) is
        refused 411, a length that is no number 400, a longer one 413.
        """
        if not super().parse_request():
            return False
        if self.headers.get("Transfer-Encoding") is not None:
            return self._refuse(411, "A request body needs a "
                                "Content-Length (a chunked one is not "
                                "taken)")
        lengths = self.headers.get_all("Content-Length") or ["0"]
        if len(set(lengths)) != 1 or not lengths[0].strip().isdigit():
            return self._refuse(400, "Content-Length is not one number of "
                                "bytes")
        length = int(lengths[0])
        if length > app.MAX_BODY:
            # The application's words for it, as before.
            return self._refuse(413, "The body is larger than %d bytes"
                                % app.MAX_BODY)
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            return False        # The client left mid-body.
        self.rfile = io.BytesIO(body)
        self.server.received(self.connection)
        return True

    def _refuse(self, status, message):
        """Answer ``status`` with the API's fault JSON, close; False."""
        document = faults.body(status, message)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(document)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(document)
        self.close_connection = True
        return False

    def handle(self):
        try:
            super().handle()
        except request_deadline.RequestTimeout:
            LOG.info("%s: request not received within %.0f s "
                     "([api] request_timeout), connection closed",
                     self.client_address[0], self.request_timeout)

    def log_message(self, format, *args):  # noqa: A002 (the base's name)
        LOG.info("%s %s", self.address_string(), format % args)


def make_server(host, port, application, max_connections, client_timeout,
                request_timeout=60.0, max_per_source=16,
                evict_after=_Server.evict_after):
    """gvfs-api's HTTP server, bound and listening."""
    server_class = type("Server", (_Server,),
                        {"max_connections": max_connections,
                         "slot_wait": client_timeout,
                         "max_per_source": max_per_source,
                         "evict_after": evict_after})
    handler_class = type("Handler", (_Handler,),
                         {"timeout": client_timeout,
                          "request_timeout": request_timeout})
    return simple_server.make_server(host, port, application,
                                     server_class=server_class,
                                     handler_class=handler_class)


class ApiService(base.ServiceBase):
    """The HTTP server of the worker process."""

    def __init__(self, conf):
        self.conf = conf
        self.server = None
        self._serving = None
        self._metrics = None

    def start(self):
        # In the worker: the message bus connection is made after the fork.
        if self.conf.metrics.port is None:
            application = app.build(self.conf)
        else:
            application, measured = app.build_measured(self.conf)
            self._metrics = metrics_server.MetricsServer(
                self.conf.metrics.host, self.conf.metrics.port,
                measured.registry, token=metrics_access.read_token(
                    self.conf.metrics.token_file))
            self._metrics.start()
        self.server = make_server(
            self.conf.api.host_ip, self.conf.api.port, application,
            self.conf.api.max_connections, self.conf.api.client_timeout,
            self.conf.api.request_timeout,
            self.conf.api.max_connections_per_source)
        self._serving = threading.Thread(target=self.server.serve_forever,
                                         name="gvfs-api-http")
        self._serving.start()
        LOG.info("gvfs-api listens on %s:%d", self.conf.api.host_ip,
                 self.server.server_port)

    def stop(self, graceful=False):
        if self.server is not None:
            self.server.shutdown()      # Requests in progress finish.
            self.server.server_close()
        if self._metrics is not None:
            self._metrics.stop()
            self._metrics = None

    def wait(self):
        if self._serving is not None:
            self._serving.join()

    def reset(self):
        """Nothing to do: the launcher re-read the configuration."""


def main(argv=None):
    conf = service.load(sys.argv[1:] if argv is None else argv)
    status = launch.run(conf, ApiService(conf))
    LOG.info("stopped")
    return status


if __name__ == "__main__":
    sys.exit(main())
