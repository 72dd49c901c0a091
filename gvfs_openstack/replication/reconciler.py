# SPDX-License-Identifier: Apache-2.0
"""Each policy compared with the source Glance, and the differences acted
on: new images copied by migration jobs, properties followed, deletes
followed (``delete_follows``).

Runs in the conductor, every ``[replication] interval`` seconds and
when the source Glance announces a change (:mod:`.listener`), with the
conductor's own credentials (it sees every project's images; a policy
selects only its own project's).  A change that a round
misses is found by the next: the state is in the job store, not in the
round.
"""

import datetime

from oslo_log import log as logging

from gvfs_openstack import exceptions
from gvfs_openstack.migration import images_api as glance_api
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import sites
from gvfs_openstack.migration import states
from gvfs_openstack.replication import plan

LOG = logging.getLogger(__name__)


def _changed_at(image, now):
    """When the image reached its present state at the source.

    Glance's ``updated_at`` (UTC, ``2026-11-24T10:00:00Z``); ``now`` when
    it is missing or in the future.
    """
    try:
        at = datetime.datetime.strptime(
            image.get("updated_at") or "", "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return now
    return min(at, now)


def _filters(policy):
    """The Images API's query that narrows the policy's selection."""
    filters = {"owner": policy["project_id"], "status": "active"}
    if policy["selector_kind"] == "tag":
        filters["tag"] = policy["selector"]["tag"]
    elif policy["selector_kind"] == "property":
        filters[policy["selector"]["key"]] = policy["selector"]["value"]
    return filters


class Reconciler:
    """``start_job(policy, image_id)``: the migration job copying it."""

    def __init__(self, conf, job_store, replications, start_job):
        self.conf = conf
        self.job_store = job_store
        self.replications = replications
        self.start_job = start_job
        #: A client per site, kept: its session renews its own token.
        self._clients = {}

    def _glance(self, site_name):
        if site_name not in self._clients:
            site = sites.load(self.conf, site_name)
            self._clients[site_name] = glance_api.GlanceClient(
                sites.glance_session(self.conf, site.name), site)
        return self._clients[site_name]

    def run_once(self):
        """One round over every policy of this site that is not paused.

        Conductors of other sites sharing the job store reconcile theirs.
        """
        for policy in self.replications.policies(
                paused=False, source=self.conf.conductor.local_site):
            try:
                self.reconcile(policy)
            except exceptions.GvfsError as e:
                LOG.warning("replication policy %s: %s; tried again next "
                            "round", policy["id"], exceptions.described(e))

    def reconcile(self, policy):
        source = self._glance(policy["source"])
        records = self.replications.records(policy["id"])
        self._follow_jobs(policy, records)
        records = self.replications.records(policy["id"])
        selected = {image["id"]: image
                    for image in source.images(**_filters(policy))
                    if plan.matches(policy, image)
                    and image.get("os_hash_value")}
        gone = set()
        for image_id in set(records) - set(selected):
            try:
                source.image(image_id)
            except exceptions.ImageNotFound:
                gone.add(image_id)
        destination = None
        for action in plan.plan(policy, selected, records, gone):
            if isinstance(action, plan.Copy):
                self._copy(policy, selected[action.image_id])
                continue
            if isinstance(action, plan.Forget):
                self.replications.forget(policy["id"], action.image_id)
                continue
            destination = destination or self._glance(policy["destination"])
            if isinstance(action, plan.FollowProperties):
                self._follow_properties(policy, action, destination)
            elif isinstance(action, plan.DeleteCopy):
                LOG.info("replication policy %s: image %s was deleted at "
                         "the source; deleting its copy at %s",
                         policy["id"], action.image_id,
                         policy["destination"])
                destination.delete(action.image_id)
                self.replications.forget(policy["id"], action.image_id)
        self.replications.reconciled(policy["id"])

    def _copy(self, policy, image):
        now = jobs.utcnow()
        self.replications.add(policy["id"], image, _changed_at(image, now))
        if not self.replications.claim(policy["id"], image["id"]):
            return  # Another conductor is starting it.
        try:
            job = self.start_job(policy, image["id"])
        except exceptions.GvfsError as e:
            LOG.warning("replication policy %s: image %s cannot be "
                        "copied: %s", policy["id"], image["id"],
                        exceptions.described(e))
            self.replications.update(policy["id"], image["id"],
                                     state=plan.FAILED, error=str(e))
            return
        LOG.info("replication policy %s: job %s copies image %s to %s",
                 policy["id"], job["id"], image["id"], policy["destination"])
        self.replications.update(policy["id"], image["id"],
                                 job_id=job["id"])

    def _follow_jobs(self, policy, records):
        """Copying images whose job ended: in sync, or failed."""
        stale = jobs.utcnow() - datetime.timedelta(
            seconds=self.conf.conductor.lease_seconds)
        for image_id, record in records.items():
            if record["state"] != plan.COPYING:
                continue
            if record["job_id"] is None:
                if record["updated_at"] < stale:
                    # Its claimer died before the job was made.
                    self.replications.update(policy["id"], image_id,
                                             state=plan.PENDING)
                continue
            job = self.job_store.job(record["job_id"])
            if job["state"] == states.DONE:
                # Properties are compared at the next round.
                self.replications.update(
                    policy["id"], image_id, state=plan.IN_SYNC,
                    synced_at=jobs.utcnow(), synced_properties=None,
                    error=None)
            elif job["state"] in states.FINISHED:
                self.replications.update(
                    policy["id"], image_id, state=plan.FAILED,
                    error=job.get("error") or "job %s %s" % (
                        job["id"], job["state"]))

    def _follow_properties(self, policy, action, destination):
        try:
            copy = destination.image(action.image_id)
        except exceptions.ImageNotFound:
            # Deleted at the destination: copied again.
            self.replications.update(policy["id"], action.image_id,
                                     state=plan.PENDING,
                                     changed_at=jobs.utcnow())
            return
        operations = glance_api.attribute_patch(action.image, copy)
        if operations:
            LOG.info("replication policy %s: image %s: %s at %s",
                     policy["id"], action.image_id, ", ".join(
                         "%s %s" % (o["op"], o["path"]) for o in operations),
                     policy["destination"])
            destination.patch(action.image_id, operations)
        self.replications.update(
            policy["id"], action.image_id,
            synced_properties=plan.properties_digest(action.image))
