# SPDX-License-Identifier: Apache-2.0
"""``gvfs-manage db sync``: a job store upgraded to the newest revision.

An empty database runs every revision.  A store made by a release before
versioned schemas (the tables, no ``alembic_version``) is first brought
to revision 0001: those releases added columns to an existing store when
they opened it (nullable, by ``ALTER TABLE ... ADD``), and a store that
no later one opened lacks some.  Then it is stamped 0001 and upgraded
from there.  A store at the newest revision is left as it is.

The operator runs it once, with the conductors stopped, before starting
the upgraded release; two at once on one store are not kept apart.
"""

from alembic import command
from alembic.operations import Operations
from alembic.runtime import migration
from oslo_log import log as logging
import sqlalchemy as sa

from gvfs_openstack import exceptions
from gvfs_openstack.migration.db import engine as store_engine
from gvfs_openstack.migration.db import schema

LOG = logging.getLogger(__name__)

#: The revision whose schema the last release before versioning made.
UNVERSIONED = "0001"


def sync(engine):
    """Upgrade the store to the newest revision: (revision before, after).

    The revision before is None for an empty or unversioned store.
    """
    with engine.begin() as connection:
        before = schema.current(connection)
        if before is not None and not schema.known(before):
            raise schema.newer(before)
        if before is None and sa.inspect(connection).has_table("jobs"):
            LOG.info("the store has no schema revision: bringing it to "
                     "revision %s", UNVERSIONED)
            _complete_unversioned(connection)
            schema.stamp(connection, UNVERSIONED)
        command.upgrade(schema.alembic_config(connection), "head")
        return before, schema.current(connection)


def _complete_unversioned(connection):
    """Add the nullable columns of revision 0001 that the store lacks."""
    first = schema.script_directory().get_revision(UNVERSIONED).module
    inspector = sa.inspect(connection)
    operations = Operations(migration.MigrationContext.configure(connection))
    for table, columns in first.tables().items():
        if not inspector.has_table(table):
            raise exceptions.InvalidConfig(
                option=store_engine.STORE_OPTION,
                reason="it has no schema revision and lacks the table %s"
                       % table)
        present = {c["name"] for c in inspector.get_columns(table)}
        for column in columns:
            if column.name in present:
                continue
            if not column.nullable:
                raise exceptions.InvalidConfig(
                    option=store_engine.STORE_OPTION,
                    reason="its table %s lacks the column %s"
                           % (table, column.name))
            LOG.info("adding the column %s.%s", table, column.name)
            operations.add_column(table, column)
