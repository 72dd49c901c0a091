# SPDX-License-Identifier: Apache-2.0
"""alembic's environment: runs the revisions on the store it is given.

:mod:`.sync` passes an open connection in the configuration's
``attributes["connection"]``; otherwise the configuration's
``sqlalchemy.url`` names the store.  Offline (``--sql``) the revisions
are written out as SQL for a DBA to run.
"""

from alembic import context

from gvfs_openstack.migration.db import engine as store_engine
from gvfs_openstack.migration.db import tables


def _configure(**kwargs):
    # Autogenerate compares against the live tables; render_as_batch so
    # its revisions alter sqlite's tables by copying them.
    context.configure(target_metadata=tables.METADATA,
                      render_as_batch=True, **kwargs)
    with context.begin_transaction():
        context.run_migrations()


def _run():
    config = context.config
    if context.is_offline_mode():
        _configure(url=config.get_main_option("sqlalchemy.url"),
                   literal_binds=True)
        return
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection=connection)
        return
    engine = store_engine.create_engine(
        config.get_main_option("sqlalchemy.url"))
    try:
        with engine.begin() as connection:
            _configure(connection=connection)
    finally:
        engine.dispose()


_run()
