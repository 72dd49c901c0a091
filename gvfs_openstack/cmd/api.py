# SPDX-License-Identifier: Apache-2.0
"""``gvfs-api``: the REST API on a threaded HTTP server of its own.

    gvfs-api --config-file /etc/gvfs-openstack/gvfs-api.conf

Under oslo.service's launcher (:mod:`gvfs_openstack.cmd.launch`): systemd
is told when it is ready, SIGHUP re-reads the configuration, SIGTERM
stops it once the requests being answered are.  For a host with a few
users; a deployment with many runs the same application under a WSGI
server (:mod:`gvfs_openstack.wsgi.api`).
"""

import socketserver
import sys
import threading
from wsgiref import simple_server

from oslo_log import log as logging
from oslo_service.backend import base

# First: importing it chooses oslo.service's backend.
from gvfs_openstack.cmd import launch
from gvfs_openstack.api import app  # noqa: H306
from gvfs_openstack.api import service
from gvfs_openstack import metrics_server

LOG = logging.getLogger(__name__)


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    """A thread per connection, at most ``max_connections`` of them.

    The accepting thread waits for a free slot before it accepts more:
    the connections beyond wait in the kernel's listen queue, and no
    number of clients makes the process start more threads.
    """

    daemon_threads = False      # A stop waits for requests in progress.
    block_on_close = True
    allow_reuse_address = True
    max_connections = 64
    #: Seconds an accepted connection waits for a slot before it is
    #: closed (so a stop is never held up for longer).
    slot_wait = 60.0

    def server_activate(self):
        super().server_activate()
        self.slots = threading.BoundedSemaphore(self.max_connections)

    def verify_request(self, request, client_address):
        if self.slots.acquire(timeout=self.slot_wait):
            return True
        LOG.warning("closing a connection from %s: %d connections are "
                    "being served ([api] max_connections)",
                    client_address[0], self.max_connections)
        return False

    def process_request(self, request, client_address):
        try:
            super().process_request(request, client_address)
        except BaseException:
            # No thread started (none left to start): no thread will
            # release the slot, so this does.
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address):
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()

    def handle_error(self, request, client_address):
        LOG.debug("connection from %s ended: %s", client_address,
                  sys.exc_info()[1])


class _Handler(simple_server.WSGIRequestHandler):
    #: Seconds a client may take to send or read (socket timeout).
    timeout = 60.0

    def log_message(self, format, *args):  # noqa: A002 (the base's name)
        LOG.info("%s %s", self.address_string(), format % args)


def make_server(host, port, application, max_connections, client_timeout):
    """gvfs-api's HTTP server, bound and listening."""
    server_class = type("Server", (_Server,),
                        {"max_connections": max_connections,
                         "slot_wait": client_timeout})
    handler_class = type("Handler", (_Handler,),
                         {"timeout": client_timeout})
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
                measured.registry)
            self._metrics.start()
        self.server = make_server(
            self.conf.api.host_ip, self.conf.api.port, application,
            self.conf.api.max_connections, self.conf.api.client_timeout)
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
