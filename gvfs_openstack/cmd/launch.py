# SPDX-License-Identifier: Apache-2.0
"""Long-lived programs under oslo.service's launcher, as OpenStack runs its
services: a master process that forks the worker, restarts it if it
dies, tells systemd when it is ready (``Type=notify``), re-reads the
configuration files on SIGHUP (mutable options change in place; the
worker is started again with them) and stops the worker gracefully on
SIGTERM, within ``[DEFAULT] graceful_shutdown_timeout``.

oslo.service's threading backend (cotyledon), not eventlet.  Importing
this module chooses it, so a program imports it before anything that
imports oslo.service (oslo.messaging's drivers do, and the first import
would settle on eventlet); :mod:`oslo_service.service` itself is
imported in :func:`run`.
"""

from oslo_service import backend
from oslo_service.backend import exceptions as backend_exceptions

try:
    backend.init_backend(backend.BackendType.THREADING)
except backend_exceptions.BackendAlreadySelected:
    pass    # A library module imported first; run() says so.


def run(conf, service):
    """Run ``service`` in a worker process until SIGTERM; the exit status.

    ``service``: an :class:`oslo_service.backend.base.ServiceBase`.
    """
    if backend.get_backend_type() != backend.BackendType.THREADING:
        raise RuntimeError("oslo.service's %s backend was chosen before "
                           "gvfs_openstack.cmd.launch was imported"
                           % backend.get_backend_type())
    from oslo_service import service as oslo_service

    launcher = oslo_service.launch(conf, service, workers=1,
                                   restart_method="mutate")
    return launcher.wait() or 0
