# SPDX-License-Identifier: Apache-2.0
"""The job store's tables, at the newest schema revision.

The revisions in ``versions/`` upgrade a store made by an earlier release
(``gvfs-manage db sync``); a change to a table here needs a new revision
there.  :mod:`gvfs_openstack.migration.jobs` and the replication store
read and write them.
"""

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

#: Timestamps to the microsecond on every database: MySQL's DATETIME
#: keeps whole seconds unless told otherwise.
TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql",
                                       "mariadb")

METADATA = sa.MetaData()

JOBS = sa.Table(
    "jobs", METADATA,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("source", sa.String(255), nullable=False),
    sa.Column("destination", sa.String(255), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("images_in_flight", sa.Integer, nullable=False),
    #: How the images cross the DTN link together (``tar``), or None: one
    #: transfer each, pipelined.
    sa.Column("pack", sa.String(16)),
    #: Set by a cancel; the job's runner undoes the job and ends it.
    sa.Column("cancel_requested", sa.Boolean, nullable=False,
              default=False),
    sa.Column("error", sa.Text),
    #: The runner working on the job, and when it last said so: a lease
    #: that keeps two runners (of one conductor or of several) apart.
    sa.Column("owner", sa.String(255)),
    sa.Column("heartbeat", TIMESTAMP),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
    #: The Keystone project and user that asked for the job; None for
    #: jobs made before revision 0002, or over RPC without a context.
    sa.Column("project_id", sa.String(64), index=True),
    sa.Column("user_id", sa.String(64)),
    #: The Keystone trust with which the conductor reads the source
    #: images as the user (gvfs-api makes it), deleted when the job ends.
    sa.Column("trust_id", sa.String(64)),
    #: The last notification sent of the job (:data:`NOTIFIED_START`,
    #: :data:`NOTIFIED_END`), or None: which changes are still to announce.
    sa.Column("notified", sa.String(16)),
)

IMAGES = sa.Table(
    "job_images", METADATA,
    sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id"),
              primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("image_id", sa.String(36), nullable=False),
    sa.Column("name", sa.String(255)),
    sa.Column("size", sa.BigInteger),
    #: The next stage to run (states.DONE when all ran).
    sa.Column("stage", sa.String(16), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    #: Bytes of the current stage that are safely done (resume point).
    sa.Column("stage_bytes", sa.BigInteger, nullable=False, default=0),
    #: Where the image's bytes are on the source DTN (for the transfer).
    sa.Column("source_path", sa.Text),
    #: The algorithm and digest all copies are checked against.
    sa.Column("hash_algo", sa.String(32)),
    sa.Column("hash_value", sa.String(256)),
    sa.Column("destination_image_id", sa.String(36)),
    #: The Globus task moving the image, while one is (dtn_transfer =
    #: globus): a restarted runner waits for it rather than start another.
    sa.Column("transfer_task", sa.String(64)),
    #: Bytes from the image's start that a segmented GridFTP transfer
    #: has completed at the destination DTN (whole segments): where a
    #: restarted transfer goes on.  stage_bytes shows its live progress.
    sa.Column("transfer_done", sa.BigInteger),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("error", sa.Text),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
    #: The destination image a new version is sent as a delta against:
    #: asked for (``--base``), or found by the transfer.
    sa.Column("delta_base", sa.String(36)),
    #: Bytes that crossed the DTN link for the image (a delta's, or the
    #: whole file's); NULL until it crossed.
    sa.Column("sent_bytes", sa.BigInteger),
)

#: When each stage of each image ran: progress, ETA and the timeline plot.
STAGE_RUNS = sa.Table(
    "stage_runs", METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(36), nullable=False, index=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("stage", sa.String(16), nullable=False),
    sa.Column("pid", sa.Integer),
    sa.Column("started_at", TIMESTAMP, nullable=False),
    sa.Column("finished_at", TIMESTAMP),
    #: Where the run started in the stage's bytes (> 0: it resumed).
    sa.Column("resumed_from", sa.BigInteger, nullable=False, default=0),
    sa.Column("bytes", sa.BigInteger, nullable=False, default=0),
    sa.Column("outcome", sa.String(16)),
)


#: Replication policies (:mod:`gvfs_openstack.replication`): which images
#: of a project keep themselves copied to a site.
REPLICATION_POLICIES = sa.Table(
    "replication_policies", METADATA,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("name", sa.String(255)),
    sa.Column("project_id", sa.String(64), nullable=False, index=True),
    sa.Column("user_id", sa.String(64)),
    #: The site whose images it selects: its conductors reconcile it.
    sa.Column("source", sa.String(255), nullable=False),
    sa.Column("destination", sa.String(255), nullable=False),
    #: ``tag``, ``property`` or ``images``, and its JSON: {"tag": T},
    #: {"key": K, "value": V} or {"images": [ID, ...]}.
    sa.Column("selector_kind", sa.String(16), nullable=False),
    sa.Column("selector", sa.Text, nullable=False),
    sa.Column("delete_follows", sa.Boolean, nullable=False),
    sa.Column("paused", sa.Boolean, nullable=False),
    #: When a conductor last compared the source with the policy.
    sa.Column("reconciled_at", TIMESTAMP),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
)

#: Each image a policy has seen, and where it is (see
#: :mod:`gvfs_openstack.replication.plan`).
REPLICATED_IMAGES = sa.Table(
    "replicated_images", METADATA,
    sa.Column("policy_id", sa.String(36),
              sa.ForeignKey("replication_policies.id"), primary_key=True),
    sa.Column("image_id", sa.String(36), primary_key=True),
    sa.Column("name", sa.String(255)),
    sa.Column("size", sa.BigInteger),
    sa.Column("state", sa.String(16), nullable=False),
    #: The migration job copying it (state ``copying``) or that did.
    sa.Column("job_id", sa.String(36)),
    #: When the change still to arrive happened at the source: the
    #: recovery point counts from the oldest.
    sa.Column("changed_at", TIMESTAMP, nullable=False),
    sa.Column("synced_at", TIMESTAMP),
    #: Digest of the attributes the copy has (plan.properties_digest).
    sa.Column("synced_properties", sa.String(64)),
    sa.Column("error", sa.Text),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
)
