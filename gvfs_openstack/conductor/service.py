# SPDX-License-Identifier: Apache-2.0
"""The conductor as an oslo.messaging RPC service.

A thin shell over :class:`manager.ConductorManager`: the endpoint maps
calls to the manager and declares which errors are the caller's to see,
the service starts and stops the RPC server (threading executor, the
default of oslo.messaging 18) and
runs the periodic resume that takes over orphaned jobs and the periodic
reconciliation of replication policies.
"""

import functools
import threading

from oslo_log import log as logging
import oslo_messaging as messaging

from gvfs_openstack.conductor import callers
from gvfs_openstack.conductor import metrics
from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack import metrics_access
from gvfs_openstack.migration.db import engine as store_engine
from gvfs_openstack.migration.db import schema
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import manager as manager_mod
from gvfs_openstack.migration import rpcapi
from gvfs_openstack.migration import sites
from gvfs_openstack.replication import listener
from gvfs_openstack.replication import manager as replication_manager

LOG = logging.getLogger(__name__)

_USER_ERRORS = (exceptions.TrustRefused, exceptions.CallerRefused,
                exceptions.UnknownSite, exceptions.ImageNotFound,
                exceptions.ImageNotMigratable, exceptions.InvalidConfig,
                exceptions.JobNotFound, exceptions.JobFinished,
                exceptions.StageFailed, exceptions.ReplicationNotFound)


def _user_errors(method):
    """The call's errors cross RPC as themselves; their detail is logged.

    What a :class:`exceptions.StageFailed` keeps from its user (hosts,
    raw replies) goes to this log instead, where gvfs-api's caller is
    not.
    """
    @functools.wraps(method)
    def call(self, ctxt, *args, **kwargs):
        try:
            return method(self, ctxt, *args, **kwargs)
        except exceptions.StageFailed as e:
            if e.detail:
                LOG.warning("%s: %s", method.__name__,
                            exceptions.described(e))
            raise
    return messaging.expected_exceptions(*_USER_ERRORS)(call)


class ConductorEndpoint:
    """The RPC calls, each held to the project of its verified caller.

    ``callers`` is a :class:`callers.Callers` (or ``Trusting``).
    """

    target = messaging.Target(version=rpcapi.RPC_VERSION)

    def __init__(self, manager, replications, callers):
        self.manager = manager
        self.replications = replications
        self.callers = callers

    def _policy(self, caller, policy_id):
        policy = self.replications.show(policy_id)
        if not caller.may_see(policy["project_id"]):
            raise exceptions.ReplicationNotFound(policy=policy_id)
        return policy

    def _job(self, caller, job_id):
        job = self.manager.show(job_id)
        if not caller.may_see(job["project_id"]):
            raise exceptions.JobNotFound(job=job_id)
        return job

    @_user_errors
    def create_replication(self, ctxt, destination, selector_kind, selector,
                           delete_follows=False, name=None):
        caller = self.callers.of(ctxt)
        policy = self.replications.create(
            caller.project_id, caller.user_id, destination,
            selector_kind, selector, delete_follows=delete_follows,
            name=name)
        LOG.info("user %s of project %s made replication policy %s to %s",
                 caller.user_id, caller.project_id, policy["id"],
                 destination)
        return policy

    @_user_errors
    def list_replications(self, ctxt, project_id=None):
        self.callers.of(ctxt).check_scope(project_id)
        return self.replications.list(project_id=project_id)

    @_user_errors
    def show_replication(self, ctxt, policy_id):
        return self._policy(self.callers.of(ctxt), policy_id)

    @_user_errors
    def pause_replication(self, ctxt, policy_id, paused):
        caller = self.callers.of(ctxt)
        self._policy(caller, policy_id)
        LOG.info("user %s of project %s %s replication policy %s",
                 caller.user_id, caller.project_id,
                 "pauses" if paused else "resumes", policy_id)
        return self.replications.set_paused(policy_id, paused)

    @_user_errors
    def delete_replication(self, ctxt, policy_id):
        caller = self.callers.of(ctxt)
        self._policy(caller, policy_id)
        LOG.info("user %s of project %s deletes replication policy %s",
                 caller.user_id, caller.project_id, policy_id)
        self.replications.delete(policy_id)

    @_user_errors
    def migrate(self, ctxt, image_ids, destination, images_in_flight=None,
                pack=None, trust_id=None, base=None):
        caller = self.callers.of(ctxt)
        self.manager.check_trust(trust_id, caller.user_id,
                                 caller.project_id)
        return self.manager.migrate(
            image_ids, destination, images_in_flight, pack,
            project_id=caller.project_id, user_id=caller.user_id,
            trust_id=trust_id, base=base,
            may_migrate=caller.may_see_image)

    @_user_errors
    def find_images(self, ctxt, image_ids):
        caller = self.callers.of(ctxt)
        found = self.manager.find_images(image_ids,
                                         project_id=caller.project_id)
        for image in found:
            # gvfs-api answers another project's image as missing unless
            # its policy lets the caller see it; public ones it may.
            if not caller.may_see_image(image) and \
                    image.get("visibility") not in ("public", "community"):
                raise exceptions.ImageNotFound(
                    image=image["requested_as"], site=image["site"])
        return found

    @_user_errors
    def golden_references(self, ctxt, image_id):
        caller = self.callers.of(ctxt)
        return self.manager.golden_references(
            image_id, may_see=caller.may_see_image)

    @_user_errors
    def list_sites(self, ctxt):
        self.callers.of(ctxt)
        return self.manager.sites()

    @_user_errors
    def list_jobs(self, ctxt, project_id=None, states=None, limit=None,
                  marker=None):
        self.callers.of(ctxt).check_scope(project_id)
        return self.manager.list(project_id=project_id, states=states,
                                 limit=limit, marker=marker)

    @_user_errors
    def show_job(self, ctxt, job_id):
        return self._job(self.callers.of(ctxt), job_id)

    @_user_errors
    def cancel_job(self, ctxt, job_id):
        caller = self.callers.of(ctxt)
        self._job(caller, job_id)
        LOG.info("user %s of project %s cancels job %s",
                 caller.user_id, caller.project_id, job_id)
        return self.manager.cancel(job_id)


def callers_of(conf):
    """The caller check ``[conductor] verify_callers`` asks for."""
    if not conf.conductor.verify_callers:
        return callers.Trusting()
    local = conf.conductor.local_site
    if not local:
        raise exceptions.InvalidConfig(
            option="[conductor] verify_callers",
            reason="callers' tokens are validated with the Keystone of "
                   "[conductor] local_site, and none is set")
    session = sites.glance_session(conf, local)
    group = migration_conf.SITE_GROUP % local
    if conf[group].auth_type in (None, "none"):
        raise exceptions.InvalidConfig(
            option="[conductor] verify_callers",
            reason="callers' tokens are validated with Keystone, and "
                   "[%s] has no Keystone credentials" % group)
    return callers.Callers(callers.keystone_validator(session))


def check(conf):
    """Raise what would keep the service from starting, before a worker.

    A job store it cannot use: a bad URL, a schema to sync (an empty
    database too: a wrong connection string must not start a fresh, empty
    job history, so the service waits for ``gvfs-manage db sync`` as
    OpenStack's services do); callers it cannot verify.
    """
    callers_of(conf)
    engine = store_engine.create_engine(jobs.store_url(conf),
                                        **jobs.engine_options(conf))
    try:
        with engine.connect() as connection:
            schema.check(connection)
    finally:
        engine.dispose()


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
            [ConductorEndpoint(self.manager, self.replications,
                               callers_of(conf))])
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
                self.manager.store, token=metrics_access.read_token(
                    self.conf.metrics.token_file))
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
