# SPDX-License-Identifier: Apache-2.0
"""``GET /metrics`` of a prometheus_client registry.

:class:`MetricsServer` serves it from a thread, for the threaded
services (gvfs-conductor, gvfs-api); :class:`LoopEndpoint` on a running
event loop, for the proxies and the mount, so that a scrape never reads
a counter while the loop changes it.  Both serve registries made by
:func:`registry_of`.
"""

import asyncio
import io
import socketserver
import threading
import time
from wsgiref import simple_server

from oslo_log import log as logging
from prometheus_client import core
from prometheus_client import exposition

from gvfs_openstack import latency
from gvfs_openstack.metrics_access import authorized
from gvfs_openstack.metrics_access import warn_if_open
from gvfs_openstack import request_deadline

LOG = logging.getLogger(__name__)


class _Collector:
    def __init__(self, collect):
        self.collect = collect


def registry_of(collect):
    """A registry whose metrics are ``collect()``'s families.

    Read at each scrape: for metrics kept elsewhere (counters, a
    database).
    """
    registry = core.CollectorRegistry(auto_describe=False)
    registry.register(_Collector(collect))
    return registry


def histogram(name, documentation, histograms, label=None):
    """A family of :class:`latency.Histogram` in cumulative buckets.

    ``histograms``: one histogram, or ``{label value: histogram}`` with
    ``label`` naming the label.
    """
    family = core.HistogramMetricFamily(
        name, documentation, labels=[label] if label else None)
    if label is None:
        histograms = {None: histograms}
    bounds = [str(b) for b in latency.LATENCY_BUCKETS] + ["+Inf"]
    for value, kept in sorted(histograms.items(),
                              key=lambda item: str(item[0])):
        buckets, total = [], 0
        for bound, count in zip(bounds, kept.counts):
            total += count
            buckets.append((bound, total))
        family.add_metric([] if label is None else [value], buckets,
                          kept.sum)
    return family


def _guarded(application, token):
    """A WSGI app that answers 401 to a scrape without ``token``."""
    if token is None:
        return application

    def guarded(environ, start_response):
        if authorized(environ.get("HTTP_AUTHORIZATION"), token):
            return application(environ, start_response)
        start_response("401 Unauthorized", [
            ("Content-Type", "text/plain"),
            ("WWW-Authenticate", 'Bearer realm="metrics"')])
        return [b"a bearer token is needed\n"]
    return guarded


class _Quiet(simple_server.WSGIRequestHandler):
    #: Seconds a scraper may take to send its request or read the answer.
    timeout = 10.0
    #: Seconds from the connection to the last byte of its request: a
    #: scraper sending a byte now and then is cut there.
    request_deadline = 10.0

    def setup(self):
        super().setup()
        self.rfile.close()
        self.rfile = io.BufferedReader(request_deadline.DeadlineReader(
            self.connection, time.monotonic() + self.request_deadline,
            self.timeout))

    def handle(self):
        try:
            super().handle()
        except request_deadline.RequestTimeout:
            LOG.debug("metrics: a scrape not sent within %.0f s, closed",
                      self.request_deadline)

    def log_message(self, format, *args):  # noqa: A002 (the base's name)
        LOG.debug("metrics: " + format, *args)


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    """A thread per scrape, at most ``max_scrapes`` at once.

    A slow scraper holds up no other, nor a stop: its thread is a
    daemon, ended by the request deadline at the latest.  Connections
    past ``max_scrapes`` are closed at once: no number of them makes the
    service start more threads.
    """

    daemon_threads = True
    block_on_close = False
    max_scrapes = 8

    def server_activate(self):
        super().server_activate()
        self.scrapes = threading.BoundedSemaphore(self.max_scrapes)

    def verify_request(self, request, client_address):
        if self.scrapes.acquire(blocking=False):
            return True
        LOG.debug("metrics: %d scrapes at once already: closed one from "
                  "%s", self.max_scrapes, client_address[0])
        return False

    def process_request(self, request, client_address):
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.scrapes.release()      # No thread took it.
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.scrapes.release()


class MetricsServer:
    """The endpoint of ``[metrics] host`` and ``port``, bound at once.

    ``token``: the bearer token every scrape must send (see
    :func:`read_token`), or None.
    """

    def __init__(self, host, port, registry, token=None):
        self.registry = registry
        warn_if_open(host, token)
        self._httpd = simple_server.make_server(
            host, port, _guarded(exposition.make_wsgi_app(registry), token),
            server_class=_Server, handler_class=_Quiet)
        self.port = self._httpd.server_port
        self._thread = threading.Thread(target=self._httpd.serve_forever,
                                        name="gvfs-metrics", daemon=True)

    def start(self):
        self._thread.start()
        LOG.info("Prometheus metrics on http://%s:%d/metrics",
                 self._httpd.server_address[0], self.port)

    def stop(self):
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join()


class LoopEndpoint:
    """``GET /metrics`` over HTTP/1.0, on the running event loop."""

    #: A scrape's request head must come within this many seconds.
    READ_TIMEOUT = 10.0

    def __init__(self, host, port, registry, token=None):
        self.host = host
        self.port = port
        self.registry = registry
        self.token = token
        warn_if_open(host, token)
        self._server = None

    async def start(self):
        """Bind and serve; the port bound (``port`` 0: any free one)."""
        self._server = await asyncio.start_server(self._serve, self.host,
                                                  self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        LOG.info("Prometheus metrics on http://%s:%d/metrics", self.host,
                 self.port)
        return self.port

    async def close(self):
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader, writer):
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                          self.READ_TIMEOUT)
            status, body, kind = self._answer(head)
            writer.write(b"HTTP/1.0 %s\r\nContent-Type: %s\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                         % (status, kind, len(body)) + body)
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError, ConnectionError):
            pass  # A scraper gone or too slow: nothing to answer.
        finally:
            writer.close()

    def _answer(self, head):
        method, _, rest = head.partition(b" ")
        path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
        if method != b"GET":
            return b"405 Method Not Allowed", b"GET only\n", b"text/plain"
        if path != b"/metrics":
            return b"404 Not Found", b"see /metrics\n", b"text/plain"
        if not authorized(_header(head, b"authorization"), self.token):
            return (b"401 Unauthorized\r\nWWW-Authenticate: Bearer "
                    b'realm="metrics"', b"a bearer token is needed\n",
                    b"text/plain")
        return (b"200 OK", exposition.generate_latest(self.registry),
                exposition.CONTENT_TYPE_LATEST.encode())


def _header(head, name):
    """The value of header ``name`` (lower case) in a request head."""
    for line in head.split(b"\r\n")[1:]:
        key, colon, value = line.partition(b":")
        if colon and key.strip().lower() == name:
            return value.decode("latin-1")
    return None
