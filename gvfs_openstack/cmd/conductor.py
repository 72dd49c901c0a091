# SPDX-License-Identifier: Apache-2.0
"""``gvfs-conductor``: the migration conductor service.

    gvfs-conductor --config-file /etc/gvfs-openstack/gvfs-conductor.conf

Serves gvfs-api's calls over oslo.messaging (``[DEFAULT]
transport_url``), starts one runner per job, and takes over jobs whose
runner died.  It runs under oslo.service's launcher
(:mod:`gvfs_openstack.cmd.launch`): systemd is told when it is ready, SIGHUP
re-reads the configuration and starts the worker again with it, SIGTERM
stops it.  Runners go on either way, and the next conductor finds their
work in the job store.  The stop takes a few seconds: oslo.messaging's
RabbitMQ listener sees it only between polls, which grow to 5 s on an
idle queue.
"""

import sys
import threading

from oslo_config import cfg
from oslo_log import log as logging
from oslo_service.backend import base

# First: importing it chooses oslo.service's backend.
from gvfs_openstack.cmd import launch
from gvfs_openstack.conductor import service
from gvfs_openstack.conf import migration as migration_conf  # noqa: H306
from gvfs_openstack import exceptions
from gvfs_openstack import version

LOG = logging.getLogger(__name__)


class ConductorWorker(base.ServiceBase):
    """The RPC service of the worker process."""

    def __init__(self, conf):
        self.conf = conf
        self.conductor = None
        self._stopped = threading.Event()

    def start(self):
        # In the worker: the bus connection and the job store's engine
        # are made after the fork.
        self.conductor = service.ConductorService(self.conf)
        self.conductor.start()

    def stop(self, graceful=False):
        if self.conductor is not None:
            LOG.info("stopping")
            self.conductor.stop()
        self._stopped.set()

    def wait(self):
        self._stopped.wait()

    def reset(self):
        """Nothing to do: the launcher re-read the configuration."""


def main(argv=None):
    conf = cfg.CONF  # oslo.messaging 18 wants the global configuration.
    logging.register_options(conf)
    migration_conf.load(conf, sys.argv[1:] if argv is None else argv,
                        "gvfs-conductor", version=version.string())
    logging.setup(conf, "gvfs-conductor")
    try:
        # Refuse a bad configuration or job store here, with a clear
        # message, rather than in a worker restarted again and again.
        service.check(conf)
    except exceptions.GvfsError as e:
        LOG.error("%s", e)
        return 2
    status = launch.run(conf, ConductorWorker(conf))
    LOG.info("stopped")
    return status


if __name__ == "__main__":
    sys.exit(main())
