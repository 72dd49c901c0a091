# SPDX-License-Identifier: Apache-2.0
"""mysql_microseconds: timestamps to the microsecond on MySQL and MariaDB

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24

MySQL's DATETIME keeps whole seconds: a lease renewed within a second of
its claim, or two stage runs started within one, looked simultaneous.
The columns become DATETIME(6) there; sqlite and PostgreSQL kept
microseconds all along and are left as they are.
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

#: (table, column, nullable) of every timestamp.
TIMESTAMPS = (
    ("jobs", "heartbeat", True),
    ("jobs", "created_at", False),
    ("jobs", "updated_at", False),
    ("job_images", "updated_at", False),
    ("stage_runs", "started_at", False),
    ("stage_runs", "finished_at", True),
)


def upgrade():
    if op.get_bind().dialect.name not in ("mysql", "mariadb"):
        return
    for table, column, nullable in TIMESTAMPS:
        op.alter_column(table, column, existing_type=sa.DateTime(),
                        type_=mysql.DATETIME(fsp=6),
                        existing_nullable=nullable)
