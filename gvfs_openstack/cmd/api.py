# SPDX-License-Identifier: Apache-2.0
"""``gvfs-api``: the REST API on a threaded HTTP server of its own.

    gvfs-api --config-file /etc/gvfs-openstack/gvfs-api.conf

For a host with a few users; a deployment with many runs the same
application under a WSGI server (:mod:`gvfs_openstack.wsgi.api`).
SIGTERM stops it once the requests being answered are.
"""

import signal
import socketserver
import sys
import threading
from wsgiref import simple_server

from oslo_log import log as logging

from gvfs_openstack.api import app
from gvfs_openstack.api import service

LOG = logging.getLogger(__name__)


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = False      # A stop waits for requests in progress.
    block_on_close = True
    allow_reuse_address = True


class _Handler(simple_server.WSGIRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 (the base's name)
        LOG.info("%s %s", self.address_string(), format % args)


def main(argv=None):
    conf = service.load(sys.argv[1:] if argv is None else argv)
    application = app.build(conf)
    server = simple_server.make_server(
        conf.api.host_ip, conf.api.port, application,
        server_class=_Server, handler_class=_Handler)
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: threading.Thread(
            target=server.shutdown).start())
    LOG.info("gvfs-api listens on %s:%d", conf.api.host_ip,
             server.server_port)
    server.serve_forever()
    server.server_close()
    LOG.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
