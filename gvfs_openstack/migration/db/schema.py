# SPDX-License-Identifier: Apache-2.0
"""The revision of a job store's schema, and opening a store at the newest.

A store records its revision in alembic's ``alembic_version`` table.  A
conductor opens only a store at the newest revision this release knows
(:func:`prepare`), and makes an empty database one; any other store waits
for ``gvfs-manage db sync`` (:mod:`.sync`), which the operator runs once
after installing a release.  There are no downgrades: a store a newer
release upgraded goes back by its backup, as OpenStack services do.
"""

import functools
import os

import alembic.config
from alembic.runtime import migration
from alembic import script
import sqlalchemy as sa

from gvfs_openstack import exceptions
from gvfs_openstack.migration.db import engine as store_engine
from gvfs_openstack.migration.db import tables

#: Where the environment and ``versions/`` are: this package.
SCRIPT_LOCATION = os.path.dirname(os.path.abspath(__file__))

#: Tables of the job store at any revision: a database with none of them
#: and no version table is empty.
TABLES = ("jobs", "job_images", "stage_runs")
VERSION_TABLE = "alembic_version"
_VERSION = sa.Table(VERSION_TABLE, sa.MetaData(),
                    sa.Column("version_num", sa.String(32)))

_SYNC = "run 'gvfs-manage db sync' with the conductor's configuration"


def alembic_config(connection=None):
    """alembic's configuration of the job store, without an ini file.

    ``connection``: an open connection the revisions run in (see env.py).
    """
    config = alembic.config.Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@functools.lru_cache(maxsize=None)
def script_directory():
    """The revisions this release knows (read once per process)."""
    return script.ScriptDirectory.from_config(alembic_config())


def head():
    """The newest revision: the one this release reads and writes."""
    return script_directory().get_current_head()


def known(revision):
    """Whether ``revision`` is one of this release's (the newest or older)."""
    return revision in {
        rev.revision for rev in script_directory().walk_revisions()}


def current(connection):
    """The store's revision; None if it has none (empty, or unversioned).

    Read from the version table itself: alembic's MigrationContext would
    log two lines at INFO for every store opened, every stage worker's.
    """
    if not sa.inspect(connection).has_table(VERSION_TABLE):
        return None
    return connection.execute(sa.select(_VERSION.c.version_num)).scalar()


def stamp(connection, revision):
    """Record ``revision`` as the store's, without running anything."""
    migration.MigrationContext.configure(connection).stamp(
        script_directory(), revision)


def is_empty(connection):
    """Whether the database holds nothing of a job store yet."""
    names = set(sa.inspect(connection).get_table_names())
    return not names.intersection(TABLES + (VERSION_TABLE,))


def newer(revision):
    """The error for a store at a revision this release does not know."""
    return exceptions.InvalidConfig(
        option=store_engine.STORE_OPTION,
        reason="it is at schema revision %s, which this release does not "
               "know (a newer release upgraded it); this release needs "
               "revision %s: run the newer release, or restore the store's "
               "backup" % (revision, head()))


def check(connection):
    """Raise InvalidConfig unless the store is at the newest revision."""
    revision = current(connection)
    expected = head()
    if revision == expected:
        return
    if revision is None and is_empty(connection):
        reason = ("it is empty; this release needs revision %s: %s"
                  % (expected, _SYNC))
    elif revision is None:
        reason = ("it has no schema revision (a release before versioned "
                  "schemas made it); this release needs revision %s: %s"
                  % (expected, _SYNC))
    elif known(revision):
        reason = ("it is at schema revision %s, this release needs "
                  "revision %s: %s" % (revision, expected, _SYNC))
    else:
        raise newer(revision)
    raise exceptions.InvalidConfig(option=store_engine.STORE_OPTION,
                                   reason=reason)


def prepare(engine):
    """Open the store: make an empty database one, check any other.

    An empty database gets the tables of
    :mod:`gvfs_openstack.migration.jobs`, which are the newest revision's
    (a unit test compares them with the revisions run one by one), and is
    stamped with it: faster than running every revision.
    """
    with engine.connect() as connection:
        if is_empty(connection):
            tables.METADATA.create_all(connection)
            stamp(connection, "head")
            connection.commit()
        else:
            check(connection)
