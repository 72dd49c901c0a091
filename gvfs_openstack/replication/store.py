# SPDX-License-Identifier: Apache-2.0
"""Replication policies and their images in the job store.

Conductors sharing a store reconcile the same policies; what keeps them
from copying one image twice is :meth:`ReplicationStore.claim`, one
conditional UPDATE that exactly one of them wins.
"""

import json
import uuid

from oslo_db import exception as db_exception
import sqlalchemy as sa

from gvfs_openstack import exceptions
from gvfs_openstack.migration.db import tables
from gvfs_openstack.migration import jobs
from gvfs_openstack.replication import plan

POLICIES = tables.REPLICATION_POLICIES
IMAGES = tables.REPLICATED_IMAGES
JOB_IMAGES = tables.IMAGES


def _policy(row):
    policy = dict(row)
    policy["selector"] = json.loads(policy["selector"])
    return policy


class ReplicationStore:
    """The policies of the job store ``store`` (a :class:`jobs.JobStore`)."""

    def __init__(self, store):
        self.engine = store.engine

    # --- policies ------------------------------------------------------------

    def create_policy(self, project_id, user_id, source, destination,
                      selector_kind, selector, delete_follows=False,
                      name=None):
        policy_id = str(uuid.uuid4())
        now = jobs.utcnow()
        with self.engine.begin() as db:
            db.execute(POLICIES.insert().values(
                id=policy_id, name=name, project_id=project_id,
                user_id=user_id, source=source, destination=destination,
                selector_kind=selector_kind, selector=json.dumps(selector),
                delete_follows=delete_follows, paused=False,
                created_at=now, updated_at=now))
        return policy_id

    def policy(self, policy_id):
        with self.engine.connect() as db:
            row = db.execute(POLICIES.select().where(
                POLICIES.c.id == policy_id)).mappings().first()
        if row is None:
            raise exceptions.ReplicationNotFound(policy=policy_id)
        return _policy(row)

    def policies(self, project_id=None, paused=None, source=None):
        """Policies oldest first.

        Of ``project_id`` only and of the ``source`` site only, if given.
        """
        query = POLICIES.select().order_by(POLICIES.c.created_at,
                                           POLICIES.c.id)
        if project_id is not None:
            query = query.where(POLICIES.c.project_id == project_id)
        if source is not None:
            query = query.where(POLICIES.c.source == source)
        if paused is not None:
            query = query.where(POLICIES.c.paused == paused)
        with self.engine.connect() as db:
            return [_policy(row) for row in db.execute(query).mappings()]

    def delete_policy(self, policy_id):
        """Delete the policy and its records; the copies stay."""
        with self.engine.begin() as db:
            db.execute(IMAGES.delete().where(IMAGES.c.policy_id == policy_id))
            if not db.execute(POLICIES.delete().where(
                    POLICIES.c.id == policy_id)).rowcount:
                raise exceptions.ReplicationNotFound(policy=policy_id)

    def set_paused(self, policy_id, paused):
        """Pause or resume; resuming tries the failed images again."""
        with self.engine.begin() as db:
            if not db.execute(POLICIES.update().where(
                    POLICIES.c.id == policy_id).values(
                    paused=paused, updated_at=jobs.utcnow())).rowcount:
                raise exceptions.ReplicationNotFound(policy=policy_id)
            if not paused:
                db.execute(IMAGES.update().where(
                    IMAGES.c.policy_id == policy_id,
                    IMAGES.c.state == plan.FAILED).values(
                    state=plan.PENDING, error=None, updated_at=jobs.utcnow()))

    def reconciled(self, policy_id):
        with self.engine.begin() as db:
            db.execute(POLICIES.update().where(
                POLICIES.c.id == policy_id).values(
                reconciled_at=jobs.utcnow()))

    # --- images --------------------------------------------------------------

    def records(self, policy_id):
        """The policy's records, by image id.

        Each with ``sent_bytes``: what its last job moved over the DTN
        link (a delta's bytes, or the whole file's), None until it did.
        """
        sent = sa.select(JOB_IMAGES.c.sent_bytes).where(
            JOB_IMAGES.c.job_id == IMAGES.c.job_id,
            JOB_IMAGES.c.image_id == IMAGES.c.image_id).limit(1) \
            .scalar_subquery().label("sent_bytes")
        with self.engine.connect() as db:
            return {row["image_id"]: dict(row) for row in db.execute(
                sa.select(IMAGES, sent).where(
                    IMAGES.c.policy_id == policy_id)).mappings()}

    def add(self, policy_id, image, changed_at):
        """Record a newly selected image as pending; False if recorded."""
        try:
            with self.engine.begin() as db:
                db.execute(IMAGES.insert().values(
                    policy_id=policy_id, image_id=image["id"],
                    name=image.get("name"), size=image.get("size"),
                    state=plan.PENDING, changed_at=changed_at,
                    updated_at=jobs.utcnow()))
        except (db_exception.DBDuplicateEntry, sa.exc.IntegrityError):
            return False    # Another conductor recorded it first.
        return True

    def claim(self, policy_id, image_id):
        """Take a pending image for copying; True for the one winner."""
        with self.engine.begin() as db:
            return db.execute(IMAGES.update().where(
                IMAGES.c.policy_id == policy_id,
                IMAGES.c.image_id == image_id,
                IMAGES.c.state == plan.PENDING).values(
                state=plan.COPYING, job_id=None,
                updated_at=jobs.utcnow())).rowcount == 1

    def update(self, policy_id, image_id, **values):
        values["updated_at"] = jobs.utcnow()
        with self.engine.begin() as db:
            db.execute(IMAGES.update().where(
                IMAGES.c.policy_id == policy_id,
                IMAGES.c.image_id == image_id).values(**values))

    def forget(self, policy_id, image_id):
        with self.engine.begin() as db:
            db.execute(IMAGES.delete().where(
                IMAGES.c.policy_id == policy_id,
                IMAGES.c.image_id == image_id))
