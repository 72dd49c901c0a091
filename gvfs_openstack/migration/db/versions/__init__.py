# SPDX-License-Identifier: Apache-2.0
"""The revisions of the job store's schema (loaded by alembic, by file)."""
