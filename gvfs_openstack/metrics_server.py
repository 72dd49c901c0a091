# SPDX-License-Identifier: Apache-2.0
"""``GET /metrics`` of a prometheus_client registry, served by a thread.

For the threaded services, gvfs-conductor and gvfs-api; the proxies
serve theirs on their event loop (:mod:`gvfs_openstack.proxy.metrics`),
from a registry made by :func:`registry_of` as the conductor's is.
"""

import socketserver
import threading
from wsgiref import simple_server

from oslo_log import log as logging
from prometheus_client import core
from prometheus_client import exposition

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


class _Quiet(simple_server.WSGIRequestHandler):
    #: Seconds a scraper may take to send its request or read the answer.
    timeout = 10.0

    def log_message(self, format, *args):  # noqa: A002 (the base's name)
        LOG.debug("metrics: " + format, *args)


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    """A thread per scrape, so a slow scraper holds up no other.

    Nor a stop: its thread is a daemon, ended by ``timeout`` at the
    latest.
    """

    daemon_threads = True
    block_on_close = False


class MetricsServer:
    """The endpoint of ``[metrics] host`` and ``port``, bound at once."""

    def __init__(self, host, port, registry):
        self.registry = registry
        self._httpd = simple_server.make_server(
            host, port, exposition.make_wsgi_app(registry),
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
