# SPDX-License-Identifier: Apache-2.0
"""The job store: migration jobs and the stage each of their images reached.

Every stage records its completion here before the image moves on, so a
conductor killed at any point resumes from the last completed stage (and
the local copy from its last committed byte).  The store is SQLAlchemy
Core over sqlite for one conductor, or PostgreSQL/MySQL shared by several,
on an engine oslo.db makes as it makes every OpenStack service's: its
connection retries at start, pool sizes, MySQL's strict SQL mode and the
``[database]`` options that tune them.  Each stage worker opens its own
engine after the fork.

The tables are :mod:`gvfs_openstack.migration.db.tables`; the revisions
in :mod:`gvfs_openstack.migration.db` upgrade a store made by an earlier
release (``gvfs-manage db sync``).
"""

import datetime
import uuid

import sqlalchemy as sa

from gvfs_openstack import exceptions
from gvfs_openstack.migration.db import engine as store_engine
from gvfs_openstack.migration.db import schema
from gvfs_openstack.migration.db import tables
from gvfs_openstack.migration import states

#: What a job's ``notified`` says was announced last.
NOTIFIED_START = "start"
NOTIFIED_END = "end"

#: The ``[database]`` options that tune the engine, by the name of
#: oslo.db's ``create_engine`` argument each sets.
ENGINE_OPTIONS = (
    "sqlite_synchronous", "mysql_sql_mode", "mysql_wsrep_sync_wait",
    "connection_recycle_time", "connection_debug", "max_pool_size",
    "max_overflow", "pool_timeout", "connection_trace", "max_retries",
    "retry_interval", "connection_parameters")


class Cancelled(Exception):
    """The job was cancelled while a stage ran."""


def utcnow():
    """Now in UTC, naive, as the store's timestamps are kept."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def store_url(conf):
    """The job store's URL in ``conf``.

    ``[database] connection``, unless the deprecated ``[conductor]
    job_store`` is set (oslo.config logs its deprecation).
    """
    return conf.conductor.job_store or conf.database.connection


def open_store(conf, url=None):
    """The job store of ``conf``, or the one at ``url``.

    Its engine is tuned by ``conf``'s ``[database]`` group.
    """
    return JobStore(url or store_url(conf), **engine_options(conf))


def engine_options(conf):
    """The engine's tuning from ``conf``'s ``[database]`` group."""
    return {name: conf.database[name] for name in ENGINE_OPTIONS}


def store_error_reason(error):
    """Why the job store could not be used, in one line.

    oslo.db's errors wrap SQLAlchemy's, which wrap the driver's, whose
    message says why.
    """
    inner = getattr(error, "inner_exception", error)
    return " ".join(str(getattr(inner, "orig", None) or inner).split())


def purge(engine, before, dry_run=False):
    """Delete finished jobs last changed before ``before`` (UTC).

    With their images and stage runs; a replicated image that names
    one keeps its record, without the link.  Jobs not finished are
    never touched, however old.  ``{"jobs": n, "images": n,
    "stage_runs": n}`` of what went (or would go, ``dry_run``).
    """
    old = sa.select(tables.JOBS.c.id).where(
        tables.JOBS.c.state.in_(states.FINISHED),
        tables.JOBS.c.updated_at < before)
    counted = {}
    with engine.begin() as db:
        for name, table, column in (
                ("stage_runs", tables.STAGE_RUNS,
                 tables.STAGE_RUNS.c.job_id),
                ("images", tables.IMAGES, tables.IMAGES.c.job_id),
                ("jobs", tables.JOBS, tables.JOBS.c.id)):
            where = column.in_(old)
            counted[name] = db.execute(sa.select(sa.func.count()).where(
                where).select_from(table)).scalar()
        if not dry_run and counted["jobs"]:
            db.execute(tables.REPLICATED_IMAGES.update().where(
                tables.REPLICATED_IMAGES.c.job_id.in_(old)).values(
                    job_id=None))
            # Children first: job_images refer to jobs.
            db.execute(tables.STAGE_RUNS.delete().where(
                tables.STAGE_RUNS.c.job_id.in_(old)))
            db.execute(tables.IMAGES.delete().where(
                tables.IMAGES.c.job_id.in_(old)))
            db.execute(tables.JOBS.delete().where(
                tables.JOBS.c.id.in_(sa.select(old.subquery().c.id))))
    return counted


class JobStore:
    """The job store at ``url``, at the newest schema revision.

    An empty database is made one; a store at another revision raises
    InvalidConfig, naming the command that upgrades it.
    """

    def __init__(self, url, **options):
        self.url = url
        self.engine = store_engine.create_engine(url, **options)
        try:
            schema.prepare(self.engine)
        except BaseException:
            self.engine.dispose()
            raise

    def dispose(self):
        self.engine.dispose()

    # --- jobs ----------------------------------------------------------------

    def create_job(self, source, destination, images, images_in_flight,
                   pack=None, project_id=None, user_id=None, trust_id=None,
                   delta_base=None):
        """A new queued job; ``images`` are the source images' dicts.

        ``project_id``, ``user_id``: the Keystone project and user asking;
        ``trust_id``: the trust they delegated to the conductor;
        ``delta_base``: the image every one is sent as a delta against.
        """
        job_id = str(uuid.uuid4())
        now = utcnow()
        with self.engine.begin() as db:
            db.execute(tables.JOBS.insert().values(
                id=job_id, source=source, destination=destination,
                state=states.QUEUED, images_in_flight=images_in_flight,
                pack=pack, cancel_requested=False,
                project_id=project_id, user_id=user_id, trust_id=trust_id,
                created_at=now, updated_at=now))
            for position, image in enumerate(images):
                db.execute(tables.IMAGES.insert().values(
                    job_id=job_id, position=position, image_id=image["id"],
                    name=image.get("name"), size=image.get("size"),
                    stage=states.LOCAL_COPY, state=states.QUEUED,
                    stage_bytes=0,
                    hash_algo=image.get("os_hash_algo"),
                    hash_value=image.get("os_hash_value"), attempts=0,
                    delta_base=delta_base, updated_at=now))
        return job_id

    def job(self, job_id):
        with self.engine.connect() as db:
            row = db.execute(tables.JOBS.select().where(
                tables.JOBS.c.id == job_id)).mappings().first()
        if row is None:
            raise exceptions.JobNotFound(job=job_id)
        return dict(row)

    def jobs(self, states=None, project_id=None, limit=None, marker=None):
        """Jobs oldest first (by creation, then id), a page at a time.

        ``states``: only jobs in these; ``project_id``: only this
        project's.  ``marker``: a job id, the last of the previous page:
        the jobs after it (JobNotFound if there is no such job, or none
        of ``project_id``'s).  ``limit``: at most this many.
        """
        query = tables.JOBS.select().order_by(tables.JOBS.c.created_at,
                                              tables.JOBS.c.id)
        if states:
            query = query.where(tables.JOBS.c.state.in_(states))
        if project_id is not None:
            query = query.where(tables.JOBS.c.project_id == project_id)
        with self.engine.connect() as db:
            if marker is not None:
                query = query.where(self._after(db, marker, project_id))
            if limit is not None:
                query = query.limit(limit)
            return [dict(r) for r in db.execute(query).mappings()]

    @staticmethod
    def _after(db, marker, project_id):
        """The condition on the jobs after job ``marker`` in creation order."""
        lookup = sa.select(tables.JOBS.c.created_at).where(
            tables.JOBS.c.id == marker)
        if project_id is not None:
            lookup = lookup.where(tables.JOBS.c.project_id == project_id)
        created_at = db.execute(lookup).scalar_one_or_none()
        if created_at is None:
            raise exceptions.JobNotFound(job=marker)
        return sa.or_(tables.JOBS.c.created_at > created_at,
                      sa.and_(tables.JOBS.c.created_at == created_at,
                              tables.JOBS.c.id > marker))

    def to_notify(self):
        """Jobs with a change not yet announced: started or ended."""
        query = tables.JOBS.select().where(sa.or_(
            tables.JOBS.c.notified.is_(None),
            sa.and_(tables.JOBS.c.state.in_(states.FINISHED),
                    tables.JOBS.c.notified != NOTIFIED_END))).order_by(
            tables.JOBS.c.created_at, tables.JOBS.c.id)
        with self.engine.connect() as db:
            return [dict(r) for r in db.execute(query).mappings()]

    def mark_notified(self, job_id, was, now):
        """Record that ``now`` is announced, if ``was`` still is the last.

        One conditional UPDATE: of two conductors announcing one change,
        exactly one sees its row updated, and only it sends.
        """
        last = tables.JOBS.c.notified.is_(None) if was is None else \
            tables.JOBS.c.notified == was
        with self.engine.begin() as db:
            return db.execute(tables.JOBS.update().where(
                tables.JOBS.c.id == job_id, last).values(
                    notified=now)).rowcount == 1

    def set_job(self, job_id, **values):
        values["updated_at"] = utcnow()
        with self.engine.begin() as db:
            db.execute(tables.JOBS.update().where(
                tables.JOBS.c.id == job_id).values(**values))

    def claim(self, job_id, owner, lease_seconds):
        """Take the job for ``owner`` unless a live lease is someone else's.

        One conditional UPDATE: of two runners racing for a job, in one
        database, exactly one sees its row updated.
        """
        now = utcnow()
        expired = now - datetime.timedelta(seconds=lease_seconds)
        with self.engine.begin() as db:
            taken = db.execute(tables.JOBS.update().where(
                tables.JOBS.c.id == job_id,
                sa.or_(tables.JOBS.c.owner.is_(None),
                       tables.JOBS.c.owner == owner,
                       tables.JOBS.c.heartbeat < expired)).values(
                owner=owner, heartbeat=now)).rowcount
        return taken == 1

    def heartbeat(self, job_id, owner):
        """Renew the lease; False if it was lost to another runner."""
        with self.engine.begin() as db:
            return db.execute(tables.JOBS.update().where(
                tables.JOBS.c.id == job_id,
                tables.JOBS.c.owner == owner).values(
                    heartbeat=utcnow())).rowcount == 1

    def release(self, job_id, owner):
        with self.engine.begin() as db:
            db.execute(tables.JOBS.update().where(
                tables.JOBS.c.id == job_id,
                tables.JOBS.c.owner == owner).values(owner=None,
                                                     heartbeat=None))

    # --- images --------------------------------------------------------------

    def images(self, job_id):
        with self.engine.connect() as db:
            return [dict(r) for r in db.execute(
                tables.IMAGES.select().where(
                    tables.IMAGES.c.job_id == job_id).order_by(
                        tables.IMAGES.c.position)).mappings()]

    def image(self, job_id, position):
        with self.engine.connect() as db:
            return dict(db.execute(tables.IMAGES.select().where(
                tables.IMAGES.c.job_id == job_id,
                tables.IMAGES.c.position == position)).mappings().one())

    def set_image(self, job_id, position, **values):
        values["updated_at"] = utcnow()
        with self.engine.begin() as db:
            db.execute(tables.IMAGES.update().where(
                tables.IMAGES.c.job_id == job_id,
                tables.IMAGES.c.position == position).values(**values))

    def progress(self, job_id, position, stage_bytes):
        """The current stage's resume point (bytes safely done)."""
        self.set_image(job_id, position, stage_bytes=stage_bytes)

    def finish_stage(self, job_id, position, next_stage, **values):
        """Record a completed stage: the image's next stage starts at 0."""
        self.set_image(job_id, position, stage=next_stage, stage_bytes=0,
                       attempts=0, error=None, **values)

    # --- stage runs ----------------------------------------------------------

    def start_run(self, job_id, position, stage, pid, resumed_from=0):
        with self.engine.begin() as db:
            return db.execute(tables.STAGE_RUNS.insert().values(
                job_id=job_id, position=position, stage=stage, pid=pid,
                started_at=utcnow(), resumed_from=resumed_from,
                bytes=0)).inserted_primary_key[0]

    def end_run(self, run_id, outcome, nbytes):
        with self.engine.begin() as db:
            db.execute(tables.STAGE_RUNS.update().where(
                tables.STAGE_RUNS.c.id == run_id).values(
                    finished_at=utcnow(), outcome=outcome, bytes=nbytes))

    def runs(self, job_id):
        with self.engine.connect() as db:
            return [dict(r) for r in db.execute(
                tables.STAGE_RUNS.select().where(
                    tables.STAGE_RUNS.c.job_id == job_id).order_by(
                        tables.STAGE_RUNS.c.id)).mappings()]
