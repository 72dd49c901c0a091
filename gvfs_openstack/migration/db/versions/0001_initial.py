# SPDX-License-Identifier: Apache-2.0
"""initial: the job store as the last release before versioning made it

Revision ID: 0001
Revises:
Create Date: 2026-11-24

Spelled out here, not taken from :mod:`gvfs_openstack.migration.jobs`,
whose tables go on changing.  ``db sync`` also checks a store made
before versioning against :func:`tables` before it stamps it 0001.
"""

from alembic import op
import sqlalchemy as sa

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def tables():
    """Each table's columns at this revision (new objects on every call).

    The names and order are those of ``op.create_table`` below.
    """
    return {
        "jobs": [
            sa.Column("id", sa.String(36), primary_key=True),
            sa.Column("source", sa.String(255), nullable=False),
            sa.Column("destination", sa.String(255), nullable=False),
            sa.Column("state", sa.String(16), nullable=False),
            sa.Column("images_in_flight", sa.Integer, nullable=False),
            sa.Column("pack", sa.String(16)),
            sa.Column("cancel_requested", sa.Boolean, nullable=False),
            sa.Column("error", sa.Text),
            sa.Column("owner", sa.String(255)),
            sa.Column("heartbeat", sa.DateTime),
            sa.Column("created_at", sa.DateTime, nullable=False),
            sa.Column("updated_at", sa.DateTime, nullable=False),
        ],
        "job_images": [
            sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id"),
                      primary_key=True),
            sa.Column("position", sa.Integer, primary_key=True),
            sa.Column("image_id", sa.String(36), nullable=False),
            sa.Column("name", sa.String(255)),
            sa.Column("size", sa.BigInteger),
            sa.Column("stage", sa.String(16), nullable=False),
            sa.Column("state", sa.String(16), nullable=False),
            sa.Column("stage_bytes", sa.BigInteger, nullable=False),
            sa.Column("source_path", sa.Text),
            sa.Column("hash_algo", sa.String(32)),
            sa.Column("hash_value", sa.String(256)),
            sa.Column("destination_image_id", sa.String(36)),
            sa.Column("transfer_task", sa.String(64)),
            sa.Column("transfer_done", sa.BigInteger),
            sa.Column("attempts", sa.Integer, nullable=False),
            sa.Column("error", sa.Text),
            sa.Column("updated_at", sa.DateTime, nullable=False),
        ],
        "stage_runs": [
            sa.Column("id", sa.Integer, primary_key=True,
                      autoincrement=True),
            sa.Column("job_id", sa.String(36), nullable=False, index=True),
            sa.Column("position", sa.Integer, nullable=False),
            sa.Column("stage", sa.String(16), nullable=False),
            sa.Column("pid", sa.Integer),
            sa.Column("started_at", sa.DateTime, nullable=False),
            sa.Column("finished_at", sa.DateTime),
            sa.Column("resumed_from", sa.BigInteger, nullable=False),
            sa.Column("bytes", sa.BigInteger, nullable=False),
            sa.Column("outcome", sa.String(16)),
        ],
    }


def upgrade():
    columns = tables()
    op.create_table("jobs", *columns["jobs"])
    op.create_table("job_images", *columns["job_images"])
    op.create_table("stage_runs", *columns["stage_runs"])
