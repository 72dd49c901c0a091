# SPDX-License-Identifier: Apache-2.0
"""How long from one timestamp column to another, in SQL.

To the microsecond, so that a sum of durations is one aggregate in the
database instead of every row read into Python (the conductor's
metrics sum every stage run's).  SQL has no one spelling of it:
PostgreSQL subtracts timestamps into an interval, MySQL and MariaDB
have ``TIMESTAMPDIFF``, and sqlite's date functions round to the
millisecond, so there the seconds and their fraction are read apart
from the text SQLAlchemy keeps the timestamp as.
"""

import sqlalchemy as sa
from sqlalchemy.ext import compiler
from sqlalchemy.sql import functions


class Microseconds(functions.FunctionElement):
    """Whole microseconds from ``start`` to ``end``: SQL of two columns.

    Negative if ``end`` is earlier; both timestamp columns of the job
    store.
    """

    type = sa.BigInteger()
    name = "microseconds"
    inherit_cache = True


def _columns(element, sql, kw):
    """The SQL of ``(start, end)``."""
    start, end = (sql.process(clause, **kw) for clause in element.clauses)
    return start, end


@compiler.compiles(Microseconds)
def _unknown(element, sql, **kw):
    raise sa.exc.CompileError("no microseconds between timestamps on %s"
                              % sql.dialect.name)


@compiler.compiles(Microseconds, "postgresql")
def _postgresql(element, sql, **kw):
    start, end = _columns(element, sql, kw)
    # An interval's epoch is exact (numeric) from PostgreSQL 14.
    return "CAST(EXTRACT(EPOCH FROM (%s - %s)) * 1000000 AS BIGINT)" % (
        end, start)


@compiler.compiles(Microseconds, "mysql")
@compiler.compiles(Microseconds, "mariadb")
def _mysql(element, sql, **kw):
    start, end = _columns(element, sql, kw)
    return "TIMESTAMPDIFF(MICROSECOND, %s, %s)" % (start, end)


def _sqlite_epoch(column):
    # 'YYYY-MM-DD HH:MM:SS.ffffff': strftime of the whole would round
    # .999999 up to the next second.
    return ("(CAST(strftime('%%s', substr(%s, 1, 19)) AS INTEGER) * 1000000"
            " + CAST(round(CAST(substr(%s, 20) AS REAL) * 1000000)"
            " AS INTEGER))" % (column, column))


@compiler.compiles(Microseconds, "sqlite")
def _sqlite(element, sql, **kw):
    start, end = _columns(element, sql, kw)
    return "(%s - %s)" % (_sqlite_epoch(end), _sqlite_epoch(start))
