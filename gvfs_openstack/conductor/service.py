# SPDX-License-Identifier: Apache-2.0
"""The conductor as an oslo.messaging RPC service.

A thin shell over :class:`manager.ConductorManager`: the endpoint maps
calls to the manager and declares which errors are the caller's to see,
the service starts and stops the RPC server (threading executor, the
default of oslo.messaging 18) and
runs the periodic resume that takes over orphaned jobs and the periodic
reconciliation of replication policies.
"""

import threading

from oslo_log import log as logging
import oslo_messaging as messaging

from gvfs_openstack.conductor import metrics
from gvfs_openstack import exceptions
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import manager as manager_mod
from gvfs_openstack.migration import rpcapi
from gvfs_openstack.replication import listener
from gvfs_openstack.replication import manager as replication_manager

LOG = logging.getLogger(__name__)

_USER_ERRORS = (exceptions.TrustRefused,
                exceptions.UnknownSite, exceptions.ImageNotFound,
                exceptions.ImageNotMigratable, exceptions.InvalidConfig,
                exceptions.JobNotFound, exceptions.JobFinished,
                exceptions.StageFailed, exceptions.ReplicationNotFound)


def _user(ctxt):
    """The user id in a request context's dict.

    oslo.context's ``to_dict`` calls it ``user``.
    """
    return ctxt.get("user_id") or ctxt.get("user")


class ConductorEndpoint:
    target = messaging.Target(version=rpcapi.RPC_VERSION)

    def __init__(self, manager, replications):
        self.manager = manager
        self.replications = replications

    @messaging.expected_exceptions(*_USER_ERRORS)
    def create_replication(self, ctxt, destination, selector_kind, selector,
                           delete_follows=False, name=None):
        policy = self.replications.create(
            ctxt.get("project_id"), _user(ctxt), destination,
            selector_kind, selector, delete_follows=delete_follows,
            name=name)
        LOG.info("user %s of project %s made replication policy %s to %s",
                 _user(ctxt), ctxt.get("project_id"), policy["id"],
                 destination)
        return policy

    def list_replications(self, ctxt, project_id=None):
        return self.replications.list(project_id=project_id)

    @messaging.expected_exceptions(*_USER_ERRORS)
    def show_replication(self, ctxt, policy_id):
        return self.replications.show(policy_id)

    @messaging.expected_exceptions(*_USER_ERRORS)
    def pause_replication(self, ctxt, policy_id, paused):
        LOG.info("user %s of project %s %s replication policy %s",
                 _user(ctxt), ctxt.get("project_id"),
                 "pauses" if paused else "resumes", policy_id)
        return self.replications.set_paused(policy_id, paused)

    @messaging.expected_exceptions(*_USER_ERRORS)
    def delete_replication(self, ctxt, policy_id):
        LOG.info("user %s of project %s deletes replication policy %s",
                 _user(ctxt), ctxt.get("project_id"), policy_id)
        self.replications.delete(policy_id)

    @messaging.expected_exceptions(*_USER_ERRORS)
    def migrate(self, ctxt, image_ids, destination, images_in_flight=None,
                pack=None, trust_id=None, base=None):
        self.manager.check_trust(trust_id, _user(ctxt),
                                 ctxt.get("project_id"))
        return self.manager.migrate(
            image_ids, destination, images_in_flight, pack,
            project_id=ctxt.get("project_id"), user_id=_user(ctxt),
            trust_id=trust_id, base=base)

    @messaging.expected_exceptions(*_USER_ERRORS)
    def find_images(self, ctxt, image_ids):
        return self.manager.find_images(image_ids,
                                        project_id=ctxt.get("project_id"))

    @messaging.expected_exceptions(*_USER_ERRORS)
    def golden_references(self, ctxt, image_id):
        return self.manager.golden_references(image_id)

    def list_sites(self, ctxt):
        return self.manager.sites()

    @messaging.expected_exceptions(*_USER_ERRORS)
    def list_jobs(self, ctxt, project_id=None, states=None, limit=None,
                  marker=None):
        return self.manager.list(project_id=project_id, states=states,
                                 limit=limit, marker=marker)

    @messaging.expected_exceptions(*_USER_ERRORS)
    def show_job(self, ctxt, job_id):
        return self.manager.show(job_id)

    @messaging.expected_exceptions(*_USER_ERRORS)
    def cancel_job(self, ctxt, job_id):
        LOG.info("user %s of project %s cancels job %s",
                 _user(ctxt), ctxt.get("project_id"), job_id)
        return self.manager.cancel(job_id)


def check(conf):
    """Raise what would keep the service from starting, before a worker.

    A job store it cannot use: a bad URL, a schema to sync.
    """
    jobs.open_store(conf).dispose()


class ConductorService:
    def __init__(self, conf, manager=None, transport=None):
        self.conf = conf
        self.manager = manager or manager_mod.ConductorManager(
            conf, notify=True)
        self.replications = replication_manager.ReplicationManager(
            conf, self.manager)
        self.transport = transport or rpcapi.get_transport(conf)
        self.server = messaging.get_rpc_server(
            self.transport, messaging.Target(topic=rpcapi.TOPIC,
                                             server=conf.conductor.host),
            [ConductorEndpoint(self.manager, self.replications)])
        self._stop = threading.Event()
        #: Set to start a reconciliation round now.
        self._wake = threading.Event()
        self._listener = None
        self._metrics = None
        self._periodic = threading.Thread(target=self._resume_periodically,
                                          name="gvfs-resume", daemon=True)
        self._reconciling = threading.Thread(
            target=self._reconcile_periodically, name="gvfs-replicate",
            daemon=True)

    def _reconcile_periodically(self):
        """A round every ``[replication] interval``, or when woken."""
        every = self.conf.replication.interval
        while True:
            self._wake.wait(every)
            self._wake.clear()
            if self._stop.is_set():
                return
            try:
                self.replications.reconcile()
            except Exception:  # Logged; the next round tries again.
                LOG.exception("reconciling replication policies failed")

    def _resume_periodically(self):
        every = self.conf.conductor.lease_seconds
        while not self._stop.wait(every):
            try:
                self.manager.resume()
            except Exception:  # Logged; the next round tries again.
                LOG.exception("resuming unfinished jobs failed")

    def start(self):
        self.manager.resume()
        self.server.start()
        self._periodic.start()
        self._listener = listener.listen(self.conf, self._wake.set)
        self._reconciling.start()
        if self.conf.metrics.port is not None:
            self._metrics = metrics.server(
                self.conf.metrics.host, self.conf.metrics.port,
                self.manager.store)
            self._metrics.start()
        LOG.info("gvfs-conductor %s serves topic %s",
                 self.conf.conductor.host, rpcapi.TOPIC)

    def stop(self):
        self._stop.set()
        self._wake.set()
        if self._metrics is not None:
            self._metrics.stop()
        if self._listener is not None:
            self._listener.stop()
            self._listener.wait()
        self.server.stop()
        self.server.wait()
        self._periodic.join()
        self._reconciling.join()
        self.manager.stop()
