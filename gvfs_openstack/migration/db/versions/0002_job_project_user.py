# SPDX-License-Identifier: Apache-2.0
"""job_project_user: the Keystone project and user that asked for a job

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24

Both are NULL for the jobs made before, and for jobs an operator made
over RPC without a request context.  With them ``trust_id`` (the
user's authority delegated for the job) and ``notified``: the last
``gvfs.migration.*`` notification sent of the job; jobs that had ended
before count as notified, so that the upgrade does not announce them.
"""

from alembic import op
import sqlalchemy as sa

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    # sqlite adds columns and indexes in place: the batch recreates the
    # table only where a dialect cannot alter it.
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("project_id", sa.String(64)))
        batch.add_column(sa.Column("user_id", sa.String(64)))
        batch.create_index("ix_jobs_project_id", ["project_id"])
        batch.add_column(sa.Column("trust_id", sa.String(64)))
        batch.add_column(sa.Column("notified", sa.String(16)))
    jobs = sa.table("jobs", sa.column("state", sa.String),
                    sa.column("notified", sa.String))
    op.execute(jobs.update().where(jobs.c.state.in_(
        ("done", "failed", "cancelled"))).values(notified="end"))
