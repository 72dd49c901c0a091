# SPDX-License-Identifier: Apache-2.0
"""An engine on the job store, as oslo.db makes every OpenStack service's.

Its connection retries at start, pool sizes, MySQL's strict SQL mode and
the ``[database]`` options that tune them; sqlite waits for a writer's
lock rather than failing at once.
"""

from oslo_db import exception as db_exception
from oslo_db.sqlalchemy import engines
from oslo_db.sqlalchemy import exc_filters
import sqlalchemy as sa

from gvfs_openstack import exceptions


#: The option naming the store, in the errors about it.
STORE_OPTION = "[database] connection"

#: sqlite: seconds a writer waits for another's lock before failing.
#: Stage workers write concurrently.
SQLITE_BUSY_TIMEOUT = 60


@exc_filters.filters("postgresql", sa.exc.OperationalError,
                     r".*connection to server .* failed")
def _postgresql_unreachable(error, match, engine_name, is_disconnect):
    """A PostgreSQL server that does not answer: a connection error.

    So oslo.db retries it at start, as it does MySQL's.  libpq 14 and
    later word it "connection to server at ... failed"; oslo.db knows
    only the older wording ("could not connect to server") and raises
    this one at once, without its retries.
    """
    raise db_exception.DBConnectionError(error)


def create_engine(url, **options):
    """An engine on the store at ``url``, an SQLAlchemy URL.

    ``options``: :data:`ENGINE_OPTIONS`, as :func:`engine_options` reads
    them (oslo.db's defaults otherwise).  oslo.db retries the first
    connection ``max_retries`` times.  Raises InvalidConfig for a string
    that is no URL, or one of a database whose driver is not installed.
    """
    try:
        parsed = sa.engine.make_url(url)
    except sa.exc.ArgumentError:
        # Not chained: the error's message repeats the URL, password and
        # all.
        raise exceptions.InvalidConfig(
            option=STORE_OPTION,
            reason="it is not an SQLAlchemy URL") from None
    if parsed.get_backend_name() == "sqlite" and \
            "timeout" not in parsed.query:
        # Wait for a lock rather than fail at once.
        parsed = parsed.update_query_dict(
            {"timeout": str(SQLITE_BUSY_TIMEOUT)})
    options.setdefault("mysql_sql_mode", "TRADITIONAL")
    try:
        parsed.get_dialect()  # Its driver: before oslo.db connects.
        return engines.create_engine(parsed, **options)
    except (sa.exc.ArgumentError, sa.exc.NoSuchModuleError,
            ImportError) as e:
        raise exceptions.InvalidConfig(
            option=STORE_OPTION, reason="%s: %s" % (
                parsed.render_as_string(hide_password=True), e)) from e
