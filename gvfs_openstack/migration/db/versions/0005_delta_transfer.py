# SPDX-License-Identifier: Apache-2.0
"""delta_transfer: what each image was sent against, and how many bytes

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-25

``job_images.delta_base``: the image at the destination a new version
was sent as a delta against (asked for with ``--base``, or found by the
transfer); ``job_images.sent_bytes``: the bytes that crossed the DTN
link for it (the delta's, or the whole file's).  Both NULL for images
moved before.
"""

from alembic import op
import sqlalchemy as sa

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade():
    with op.batch_alter_table("job_images") as batch:
        batch.add_column(sa.Column("delta_base", sa.String(36)))
        batch.add_column(sa.Column("sent_bytes", sa.BigInteger))
