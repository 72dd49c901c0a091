# SPDX-License-Identifier: Apache-2.0
"""What the conductor does with replication policies for its callers:
make, list, show, pause, resume and delete them, and reconcile them.

The copying is the migration conductor's: each image a policy selects is
one migration job (:meth:`ConductorManager.migrate`), recorded with the
policy's project and user.
"""

import datetime

from gvfs_openstack import exceptions
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import sites
from gvfs_openstack.replication import plan
from gvfs_openstack.replication import reconciler as reconciler_mod
from gvfs_openstack.replication import store as store_mod


def _iso(value):
    return value.isoformat() if isinstance(value, datetime.datetime) \
        else value


class ReplicationManager:
    def __init__(self, conf, conductor):
        self.conf = conf
        self.conductor = conductor
        self.store = store_mod.ReplicationStore(conductor.store)
        self.reconciler = reconciler_mod.Reconciler(
            conf, conductor.store, self.store, self._start_job)

    def _start_job(self, policy, image_id):
        return self.conductor.migrate(
            [image_id], policy["destination"],
            project_id=policy["project_id"], user_id=policy["user_id"])

    def view(self, policy):
        """The policy, its images and its recovery point, for callers."""
        records = sorted(self.store.records(policy["id"]).values(),
                         key=lambda r: (r["changed_at"], r["image_id"]))
        view = {key: _iso(value) for key, value in policy.items()}
        view["images"] = [{
            "image_id": r["image_id"], "name": r["name"], "size": r["size"],
            "sent_bytes": r["sent_bytes"], "state": r["state"],
            "job_id": r["job_id"],
            "changed_at": _iso(r["changed_at"]),
            "synced_at": _iso(r["synced_at"]), "error": r["error"]}
            for r in records]
        counts = {state: 0 for state in plan.STATES}
        for record in records:
            counts[record["state"]] += 1
        view["images_in_sync"] = counts[plan.IN_SYNC]
        view["images_pending"] = counts[plan.PENDING] + counts[plan.COPYING]
        view["images_failed"] = counts[plan.FAILED]
        # A delta moves a few per cent of an image: what crossed counts.
        view["bytes_moved"] = sum(
            r["size"] or 0 if r["sent_bytes"] is None else r["sent_bytes"]
            for r in records if r["state"] == plan.IN_SYNC)
        view["recovery_point_seconds"] = round(
            plan.recovery_point(records, jobs.utcnow()), 1)
        return view

    def create(self, project_id, user_id, destination, selector_kind,
               selector, delete_follows=False, name=None):
        if selector_kind not in plan.SELECTORS:
            raise exceptions.InvalidConfig(
                option="selector", reason="%r is not one of: %s" % (
                    selector_kind, ", ".join(plan.SELECTORS)))
        target = sites.load(self.conf, destination)
        if target.name == self.conf.conductor.local_site:
            raise exceptions.InvalidConfig(
                option="destination",
                reason="site %s is this conductor's own site" % destination)
        policy_id = self.store.create_policy(
            project_id, user_id, self.conf.conductor.local_site, target.name,
            selector_kind, selector, delete_follows=delete_follows,
            name=name)
        return self.view(self.store.policy(policy_id))

    def list(self, project_id=None):
        return [self.view(policy)
                for policy in self.store.policies(project_id=project_id)]

    def show(self, policy_id):
        return self.view(self.store.policy(policy_id))

    def set_paused(self, policy_id, paused):
        self.store.set_paused(policy_id, paused)
        return self.show(policy_id)

    def delete(self, policy_id):
        self.store.delete_policy(policy_id)

    def reconcile(self):
        self.reconciler.run_once()
