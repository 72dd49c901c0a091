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

The tables below are the newest schema revision's; the revisions in
:mod:`gvfs_openstack.migration.db` upgrade a store made by an earlier
release (``gvfs-manage db sync``).  A change to a table here needs a new
revision there.
"""

import datetime
import uuid

from oslo_db import exception as db_exception
from oslo_db.sqlalchemy import engines
from oslo_db.sqlalchemy import exc_filters
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from gvfs_openstack import exceptions
from gvfs_openstack.migration import states

#: What a job's ``notified`` says was announced last.
NOTIFIED_START = "start"
NOTIFIED_END = "end"

#: The option naming the store, in the errors about it.
STORE_OPTION = "[database] connection"

#: sqlite: seconds a writer waits for another's lock before failing.
#: Stage workers write concurrently.
SQLITE_BUSY_TIMEOUT = 60

#: The ``[database]`` options that tune the engine, by the name of
#: oslo.db's ``create_engine`` argument each sets.
ENGINE_OPTIONS = (
    "sqlite_synchronous", "mysql_sql_mode", "mysql_wsrep_sync_wait",
    "connection_recycle_time", "connection_debug", "max_pool_size",
    "max_overflow", "pool_timeout", "connection_trace", "max_retries",
    "retry_interval", "connection_parameters")


class Cancelled(Exception):
    """The job was cancelled while a stage ran."""


#: Timestamps to the microsecond on every database: MySQL's DATETIME
#: keeps whole seconds unless told otherwise.
TIMESTAMP = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), "mysql",
                                       "mariadb")

METADATA = sa.MetaData()

JOBS = sa.Table(
    "jobs", METADATA,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("source", sa.String(255), nullable=False),
    sa.Column("destination", sa.String(255), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("images_in_flight", sa.Integer, nullable=False),
    #: How the images cross the DTN link together (``tar``), or None: one
    #: transfer each, pipelined.
    sa.Column("pack", sa.String(16)),
    #: Set by a cancel; the job's runner undoes the job and ends it.
    sa.Column("cancel_requested", sa.Boolean, nullable=False,
              default=False),
    sa.Column("error", sa.Text),
    #: The runner working on the job, and when it last said so: a lease
    #: that keeps two runners (of one conductor or of several) apart.
    sa.Column("owner", sa.String(255)),
    sa.Column("heartbeat", TIMESTAMP),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
    #: The Keystone project and user that asked for the job; None for
    #: jobs made before revision 0002, or over RPC without a context.
    sa.Column("project_id", sa.String(64), index=True),
    sa.Column("user_id", sa.String(64)),
    #: The Keystone trust with which the conductor reads the source
    #: images as the user (gvfs-api makes it), deleted when the job ends.
    sa.Column("trust_id", sa.String(64)),
    #: The last notification sent of the job (:data:`NOTIFIED_START`,
    #: :data:`NOTIFIED_END`), or None: which changes are still to announce.
    sa.Column("notified", sa.String(16)),
)

IMAGES = sa.Table(
    "job_images", METADATA,
    sa.Column("job_id", sa.String(36), sa.ForeignKey("jobs.id"),
              primary_key=True),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("image_id", sa.String(36), nullable=False),
    sa.Column("name", sa.String(255)),
    sa.Column("size", sa.BigInteger),
    #: The next stage to run (states.DONE when all ran).
    sa.Column("stage", sa.String(16), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    #: Bytes of the current stage that are safely done (resume point).
    sa.Column("stage_bytes", sa.BigInteger, nullable=False, default=0),
    #: Where the image's bytes are on the source DTN (for the transfer).
    sa.Column("source_path", sa.Text),
    #: The algorithm and digest all copies are checked against.
    sa.Column("hash_algo", sa.String(32)),
    sa.Column("hash_value", sa.String(256)),
    sa.Column("destination_image_id", sa.String(36)),
    #: The Globus task moving the image, while one is (dtn_transfer =
    #: globus): a restarted runner waits for it rather than start another.
    sa.Column("transfer_task", sa.String(64)),
    #: Bytes from the image's start that a segmented GridFTP transfer
    #: has completed at the destination DTN (whole segments): where a
    #: restarted transfer goes on.  stage_bytes shows its live progress.
    sa.Column("transfer_done", sa.BigInteger),
    sa.Column("attempts", sa.Integer, nullable=False, default=0),
    sa.Column("error", sa.Text),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
    #: The destination image a new version is sent as a delta against:
    #: asked for (``--base``), or found by the transfer.
    sa.Column("delta_base", sa.String(36)),
    #: Bytes that crossed the DTN link for the image (a delta's, or the
    #: whole file's); NULL until it crossed.
    sa.Column("sent_bytes", sa.BigInteger),
)

#: When each stage of each image ran: progress, ETA and the timeline plot.
STAGE_RUNS = sa.Table(
    "stage_runs", METADATA,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("job_id", sa.String(36), nullable=False, index=True),
    sa.Column("position", sa.Integer, nullable=False),
    sa.Column("stage", sa.String(16), nullable=False),
    sa.Column("pid", sa.Integer),
    sa.Column("started_at", TIMESTAMP, nullable=False),
    sa.Column("finished_at", TIMESTAMP),
    #: Where the run started in the stage's bytes (> 0: it resumed).
    sa.Column("resumed_from", sa.BigInteger, nullable=False, default=0),
    sa.Column("bytes", sa.BigInteger, nullable=False, default=0),
    sa.Column("outcome", sa.String(16)),
)


#: Replication policies (:mod:`gvfs_openstack.replication`): which images
#: of a project keep themselves copied to a site.
REPLICATION_POLICIES = sa.Table(
    "replication_policies", METADATA,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("name", sa.String(255)),
    sa.Column("project_id", sa.String(64), nullable=False, index=True),
    sa.Column("user_id", sa.String(64)),
    #: The site whose images it selects: its conductors reconcile it.
    sa.Column("source", sa.String(255), nullable=False),
    sa.Column("destination", sa.String(255), nullable=False),
    #: ``tag``, ``property`` or ``images``, and its JSON: {"tag": T},
    #: {"key": K, "value": V} or {"images": [ID, ...]}.
    sa.Column("selector_kind", sa.String(16), nullable=False),
    sa.Column("selector", sa.Text, nullable=False),
    sa.Column("delete_follows", sa.Boolean, nullable=False),
    sa.Column("paused", sa.Boolean, nullable=False),
    #: When a conductor last compared the source with the policy.
    sa.Column("reconciled_at", TIMESTAMP),
    sa.Column("created_at", TIMESTAMP, nullable=False),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
)

#: Each image a policy has seen, and where it is (see
#: :mod:`gvfs_openstack.replication.plan`).
REPLICATED_IMAGES = sa.Table(
    "replicated_images", METADATA,
    sa.Column("policy_id", sa.String(36),
              sa.ForeignKey("replication_policies.id"), primary_key=True),
    sa.Column("image_id", sa.String(36), primary_key=True),
    sa.Column("name", sa.String(255)),
    sa.Column("size", sa.BigInteger),
    sa.Column("state", sa.String(16), nullable=False),
    #: The migration job copying it (state ``copying``) or that did.
    sa.Column("job_id", sa.String(36)),
    #: When the change still to arrive happened at the source: the
    #: recovery point counts from the oldest.
    sa.Column("changed_at", TIMESTAMP, nullable=False),
    sa.Column("synced_at", TIMESTAMP),
    #: Digest of the attributes the copy has (plan.properties_digest).
    sa.Column("synced_properties", sa.String(64)),
    sa.Column("error", sa.Text),
    sa.Column("updated_at", TIMESTAMP, nullable=False),
)


def utcnow():
    """Now in UTC, naive, as the store's timestamps are kept."""
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


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


class JobStore:
    """The job store at ``url``, at the newest schema revision.

    An empty database is made one; a store at another revision raises
    InvalidConfig, naming the command that upgrades it.
    """

    def __init__(self, url, **options):
        # Imported here: the OSC plugin imports this module for its
        # constants, and needs no alembic.
        from gvfs_openstack.migration.db import schema

        self.url = url
        self.engine = create_engine(url, **options)
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
            db.execute(JOBS.insert().values(
                id=job_id, source=source, destination=destination,
                state=states.QUEUED, images_in_flight=images_in_flight,
                pack=pack, cancel_requested=False,
                project_id=project_id, user_id=user_id, trust_id=trust_id,
                created_at=now, updated_at=now))
            for position, image in enumerate(images):
                db.execute(IMAGES.insert().values(
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
            row = db.execute(JOBS.select().where(
                JOBS.c.id == job_id)).mappings().first()
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
        query = JOBS.select().order_by(JOBS.c.created_at, JOBS.c.id)
        if states:
            query = query.where(JOBS.c.state.in_(states))
        if project_id is not None:
            query = query.where(JOBS.c.project_id == project_id)
        with self.engine.connect() as db:
            if marker is not None:
                query = query.where(self._after(db, marker, project_id))
            if limit is not None:
                query = query.limit(limit)
            return [dict(r) for r in db.execute(query).mappings()]

    @staticmethod
    def _after(db, marker, project_id):
        """The condition on the jobs after job ``marker`` in creation order."""
        lookup = sa.select(JOBS.c.created_at).where(JOBS.c.id == marker)
        if project_id is not None:
            lookup = lookup.where(JOBS.c.project_id == project_id)
        created_at = db.execute(lookup).scalar_one_or_none()
        if created_at is None:
            raise exceptions.JobNotFound(job=marker)
        return sa.or_(JOBS.c.created_at > created_at,
                      sa.and_(JOBS.c.created_at == created_at,
                              JOBS.c.id > marker))

    def to_notify(self):
        """Jobs with a change not yet announced: started or ended."""
        query = JOBS.select().where(sa.or_(
            JOBS.c.notified.is_(None),
            sa.and_(JOBS.c.state.in_(states.FINISHED),
                    JOBS.c.notified != NOTIFIED_END))).order_by(
            JOBS.c.created_at, JOBS.c.id)
        with self.engine.connect() as db:
            return [dict(r) for r in db.execute(query).mappings()]

    def mark_notified(self, job_id, was, now):
        """Record that ``now`` is announced, if ``was`` still is the last.

        One conditional UPDATE: of two conductors announcing one change,
        exactly one sees its row updated, and only it sends.
        """
        last = JOBS.c.notified.is_(None) if was is None else \
            JOBS.c.notified == was
        with self.engine.begin() as db:
            return db.execute(JOBS.update().where(
                JOBS.c.id == job_id, last).values(notified=now)).rowcount == 1

    def set_job(self, job_id, **values):
        values["updated_at"] = utcnow()
        with self.engine.begin() as db:
            db.execute(JOBS.update().where(JOBS.c.id == job_id).values(
                **values))

    def claim(self, job_id, owner, lease_seconds):
        """Take the job for ``owner`` unless a live lease is someone else's.

        One conditional UPDATE: of two runners racing for a job, in one
        database, exactly one sees its row updated.
        """
        now = utcnow()
        expired = now - datetime.timedelta(seconds=lease_seconds)
        with self.engine.begin() as db:
            taken = db.execute(JOBS.update().where(
                JOBS.c.id == job_id,
                sa.or_(JOBS.c.owner.is_(None), JOBS.c.owner == owner,
                       JOBS.c.heartbeat < expired)).values(
                owner=owner, heartbeat=now)).rowcount
        return taken == 1

    def heartbeat(self, job_id, owner):
        """Renew the lease; False if it was lost to another runner."""
        with self.engine.begin() as db:
            return db.execute(JOBS.update().where(
                JOBS.c.id == job_id, JOBS.c.owner == owner).values(
                heartbeat=utcnow())).rowcount == 1

    def release(self, job_id, owner):
        with self.engine.begin() as db:
            db.execute(JOBS.update().where(
                JOBS.c.id == job_id, JOBS.c.owner == owner).values(
                owner=None, heartbeat=None))

    # --- images --------------------------------------------------------------

    def images(self, job_id):
        with self.engine.connect() as db:
            return [dict(r) for r in db.execute(
                IMAGES.select().where(IMAGES.c.job_id == job_id).order_by(
                    IMAGES.c.position)).mappings()]

    def image(self, job_id, position):
        with self.engine.connect() as db:
            return dict(db.execute(IMAGES.select().where(
                IMAGES.c.job_id == job_id,
                IMAGES.c.position == position)).mappings().one())

    def set_image(self, job_id, position, **values):
        values["updated_at"] = utcnow()
        with self.engine.begin() as db:
            db.execute(IMAGES.update().where(
                IMAGES.c.job_id == job_id,
                IMAGES.c.position == position).values(**values))

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
            return db.execute(STAGE_RUNS.insert().values(
                job_id=job_id, position=position, stage=stage, pid=pid,
                started_at=utcnow(), resumed_from=resumed_from,
                bytes=0)).inserted_primary_key[0]

    def end_run(self, run_id, outcome, nbytes):
        with self.engine.begin() as db:
            db.execute(STAGE_RUNS.update().where(
                STAGE_RUNS.c.id == run_id).values(
                    finished_at=utcnow(), outcome=outcome, bytes=nbytes))

    def runs(self, job_id):
        with self.engine.connect() as db:
            return [dict(r) for r in db.execute(
                STAGE_RUNS.select().where(
                    STAGE_RUNS.c.job_id == job_id).order_by(
                        STAGE_RUNS.c.id)).mappings()]
