# SPDX-License-Identifier: Apache-2.0
"""replication_policies: images of a project that keep themselves copied

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24

A policy (``replication_policies``) selects a project's images at its
source site by tag, property or id for a destination site;
``replicated_images`` records each image it has seen and where its copy
is.
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def _timestamp():
    return sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql",
                                      "mariadb")


def upgrade():
    op.create_table(
        "replication_policies",
        sa.Column("id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255)),
        sa.Column("project_id", sa.String(64), nullable=False),
        sa.Column("user_id", sa.String(64)),
        sa.Column("source", sa.String(255), nullable=False),
        sa.Column("destination", sa.String(255), nullable=False),
        sa.Column("selector_kind", sa.String(16), nullable=False),
        sa.Column("selector", sa.Text, nullable=False),
        sa.Column("delete_follows", sa.Boolean, nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("reconciled_at", _timestamp()),
        sa.Column("created_at", _timestamp(), nullable=False),
        sa.Column("updated_at", _timestamp(), nullable=False))
    op.create_index("ix_replication_policies_project_id",
                    "replication_policies", ["project_id"])
    op.create_table(
        "replicated_images",
        sa.Column("policy_id", sa.String(36),
                  sa.ForeignKey("replication_policies.id"),
                  primary_key=True),
        sa.Column("image_id", sa.String(36), primary_key=True),
        sa.Column("name", sa.String(255)),
        sa.Column("size", sa.BigInteger),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("job_id", sa.String(36)),
        sa.Column("changed_at", _timestamp(), nullable=False),
        sa.Column("synced_at", _timestamp()),
        sa.Column("synced_properties", sa.String(64)),
        sa.Column("error", sa.Text),
        sa.Column("updated_at", _timestamp(), nullable=False))
