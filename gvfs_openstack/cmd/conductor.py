# SPDX-License-Identifier: Apache-2.0
"""``gvfs-conductor``: the migration conductor service.

    gvfs-conductor --config-file /etc/gvfs-openstack/gvfs-conductor.conf

Serves ``openstack gvfs migrate`` and ``openstack gvfs migration ...``
over oslo.messaging (``[DEFAULT] transport_url``), starts one runner per
job, and takes over jobs whose runner died.  SIGTERM stops it; runners
go on and the next conductor finds their work in the job store.  The
stop takes a few seconds: oslo.messaging's RabbitMQ listener sees it
only between polls, which grow to 5 s on an idle queue.
"""

import signal
import sys
import threading

from oslo_config import cfg
from oslo_log import log as logging

from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration import service

LOG = logging.getLogger(__name__)


def main(argv=None):
    conf = cfg.CONF  # oslo.messaging 18 wants the global configuration.
    logging.register_options(conf)
    migration_conf.load(conf, sys.argv[1:] if argv is None else argv,
                        "gvfs-conductor")
    logging.setup(conf, "gvfs-conductor")
    try:
        conductor = service.ConductorService(conf)
    except exceptions.GvfsError as e:
        LOG.error("%s", e)
        return 2
    stopping = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopping.set())
    conductor.start()
    stopping.wait()
    LOG.info("stopping")
    conductor.stop()
    LOG.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
