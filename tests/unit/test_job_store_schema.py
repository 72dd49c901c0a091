# SPDX-License-Identifier: Apache-2.0
"""The job store's schema revisions, ``gvfs-manage db``, and paging jobs.

Real sqlite files: stores as the releases before versioned schemas left
them, and as revision 0001 made them, upgraded by ``db sync``.
"""

import contextlib
import datetime
import subprocess
import sys

from alembic import autogenerate
from alembic.runtime import migration
import pytest
import sqlalchemy as sa

from gvfs_lab import job_store
from gvfs_openstack import exceptions
from gvfs_openstack.migration.db import engine as store_engine
from gvfs_openstack.migration.db import schema
from gvfs_openstack.migration.db import sync
from gvfs_openstack.migration.db import tables
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import states

IMAGES = job_store.IMAGES
_store_at_0001 = job_store.store_at_0001

#: The store the first release of the conductor made (sqlite's DDL of its
#: create_all): no jobs.pack, job_images.transfer_task or transfer_done.
FIRST_RELEASE = """
CREATE TABLE jobs (
    id VARCHAR(36) NOT NULL,
    source VARCHAR(255) NOT NULL,
    destination VARCHAR(255) NOT NULL,
    state VARCHAR(16) NOT NULL,
    images_in_flight INTEGER NOT NULL,
    cancel_requested BOOLEAN NOT NULL,
    error TEXT,
    owner VARCHAR(255),
    heartbeat DATETIME,
    created_at DATETIME NOT NULL,
    updated_at DATETIME NOT NULL,
    PRIMARY KEY (id)
);
CREATE TABLE stage_runs (
    id INTEGER NOT NULL,
    job_id VARCHAR(36) NOT NULL,
    position INTEGER NOT NULL,
    stage VARCHAR(16) NOT NULL,
    pid INTEGER,
    started_at DATETIME NOT NULL,
    finished_at DATETIME,
    resumed_from BIGINT NOT NULL,
    bytes BIGINT NOT NULL,
    outcome VARCHAR(16),
    PRIMARY KEY (id)
);
CREATE INDEX ix_stage_runs_job_id ON stage_runs (job_id);
CREATE TABLE job_images (
    job_id VARCHAR(36) NOT NULL,
    position INTEGER NOT NULL,
    image_id VARCHAR(36) NOT NULL,
    name VARCHAR(255),
    size BIGINT,
    stage VARCHAR(16) NOT NULL,
    state VARCHAR(16) NOT NULL,
    stage_bytes BIGINT NOT NULL,
    source_path TEXT,
    hash_algo VARCHAR(32),
    hash_value VARCHAR(256),
    destination_image_id VARCHAR(36),
    attempts INTEGER NOT NULL,
    error TEXT,
    updated_at DATETIME NOT NULL,
    PRIMARY KEY (job_id, position),
    FOREIGN KEY(job_id) REFERENCES jobs (id)
);
INSERT INTO jobs VALUES ('j1', 'east', 'west', 'running', 2, 0, NULL,
    NULL, NULL, '2024-05-01 10:00:00.000000', '2024-05-01 10:00:00.000000');
INSERT INTO job_images VALUES ('j1', 0, 'i0', 'n0', 10, 'transfer',
    'running', 5, '/export/i0', 'sha512', 'h0', NULL, 0, NULL,
    '2024-05-01 10:00:00.000000');
INSERT INTO job_images VALUES ('j1', 1, 'i1', 'n1', 20, 'local_copy',
    'queued', 0, NULL, 'sha512', 'h1', NULL, 0, NULL,
    '2024-05-01 10:00:00.000000');
"""


def _url(tmp_path, name="jobs.sqlite"):
    return "sqlite:///%s" % (tmp_path / name)


def _run_sql(url, script):
    engine = store_engine.create_engine(url)
    try:
        with engine.begin() as db:
            for statement in script.split(";"):
                if statement.strip():
                    db.execute(sa.text(statement))
    finally:
        engine.dispose()


@contextlib.contextmanager
def _engine(url):
    engine = store_engine.create_engine(url)
    try:
        yield engine
    finally:
        engine.dispose()


def _sync(url):
    with _engine(url) as engine:
        return sync.sync(engine)


def _revision(url):
    with _engine(url) as engine, engine.connect() as db:
        return schema.current(db)


def _ddl(url):
    with _engine(url) as engine, engine.connect() as db:
        return sorted(db.execute(sa.text(
            "SELECT name, sql FROM sqlite_master")).all())


def _shape(url):
    """Each table's columns, keys and indexes, as sqlite reflects them."""
    engine = store_engine.create_engine(url)
    try:
        inspector = sa.inspect(engine)
        return {table: (
            [(c["name"], str(c["type"]), c["nullable"])
             for c in inspector.get_columns(table)],
            inspector.get_pk_constraint(table)["constrained_columns"],
            sorted((i["name"], tuple(i["column_names"]))
                   for i in inspector.get_indexes(table)),
            [(f["constrained_columns"], f["referred_table"])
             for f in inspector.get_foreign_keys(table)])
            for table in inspector.get_table_names()}
    finally:
        engine.dispose()


@pytest.fixture
def store(tmp_path):
    store = jobs.JobStore(_url(tmp_path))
    yield store
    store.dispose()


# --- opening a store ---------------------------------------------------------

def test_an_empty_store_opens_at_the_newest_revision(tmp_path):
    url = _url(tmp_path)
    jobs.JobStore(url).dispose()
    assert _revision(url) == schema.head() == "0005"
    store = jobs.JobStore(url)  # Opened again as it is.
    store.create_job("east", "west", IMAGES, 2, project_id="p1",
                     user_id="u1")
    store.dispose()
    assert _revision(url) == schema.head()


def test_the_tables_are_the_revisions_run_one_by_one(tmp_path):
    """What an empty store is made with is what ``db sync`` makes."""
    made, synced = _url(tmp_path, "made.sqlite"), _url(tmp_path, "sync.sqlite")
    jobs.JobStore(made).dispose()
    assert _sync(synced) == (None, schema.head())
    assert _shape(made) == _shape(synced)
    engine = store_engine.create_engine(synced)
    with engine.connect() as db:
        assert autogenerate.compare_metadata(
            migration.MigrationContext.configure(db), tables.METADATA) == []
    engine.dispose()


def test_a_store_at_an_older_revision_is_refused_until_db_sync(tmp_path):
    url = _url(tmp_path)
    _store_at_0001(url)
    with pytest.raises(exceptions.InvalidConfig) as raised:
        jobs.JobStore(url)
    message = str(raised.value)
    assert "[database] connection" in message
    assert "revision 0001" in message and "needs revision 0005" in message
    assert "gvfs-manage db sync" in message

    assert _sync(url) == ("0001", "0005")
    store = jobs.JobStore(url)
    job = store.job("j1")
    assert (job["pack"], job["project_id"], job["user_id"]) == \
        ("tar", None, None)
    assert [(i["image_id"], i["transfer_task"]) for i in store.images("j1")] \
        == [("i0", "task-0"), ("i1", "task-1")]
    new = store.create_job("east", "west", IMAGES, 2, project_id="p1",
                           user_id="u1")
    assert (store.job(new)["project_id"], store.job(new)["user_id"]) == \
        ("p1", "u1")
    assert [j["id"] for j in store.jobs(project_id="p1")] == [new]
    assert [j["id"] for j in store.jobs()] == ["j1", new]
    store.dispose()


def test_a_store_of_the_first_release_is_synced(tmp_path):
    """No version table, and three nullable columns added since then."""
    url = _url(tmp_path)
    _run_sql(url, FIRST_RELEASE)
    with pytest.raises(exceptions.InvalidConfig,
                       match="no schema revision.*gvfs-manage db sync"):
        jobs.JobStore(url)

    assert _sync(url) == (None, "0005")
    store = jobs.JobStore(url)
    job = store.job("j1")
    assert (job["state"], job["pack"], job["project_id"]) == \
        ("running", None, None)
    images = store.images("j1")
    assert [(i["image_id"], i["stage"], i["stage_bytes"]) for i in images] \
        == [("i0", states.TRANSFER, 5), ("i1", states.LOCAL_COPY, 0)]
    store.set_image("j1", 0, transfer_task="task-1", transfer_done=4)
    image = store.image("j1", 0)
    assert (image["transfer_task"], image["transfer_done"]) == ("task-1", 4)
    store.dispose()


def test_db_sync_twice_changes_nothing(tmp_path):
    url = _url(tmp_path)
    _run_sql(url, FIRST_RELEASE)
    _sync(url)
    ddl = _ddl(url)
    assert _sync(url) == ("0005", "0005")
    assert _ddl(url) == ddl
    jobs.JobStore(url).dispose()


def test_an_unversioned_store_without_a_required_column_is_not_synced(
        tmp_path):
    url = _url(tmp_path)
    _run_sql(url, FIRST_RELEASE.replace(
        "    image_id VARCHAR(36) NOT NULL,\n", "").replace(
        "'i0', 'n0'", "'n0'").replace("'i1', 'n1'", "'n1'"))
    with pytest.raises(exceptions.InvalidConfig,
                       match="job_images lacks the column image_id"):
        _sync(url)
    assert _revision(url) is None  # Nothing was stamped.


def test_a_store_of_a_newer_release_is_refused(tmp_path):
    url = _url(tmp_path)
    jobs.JobStore(url).dispose()
    _run_sql(url, "UPDATE alembic_version SET version_num = '0099'")
    with pytest.raises(exceptions.InvalidConfig) as raised:
        jobs.JobStore(url)
    message = str(raised.value)
    assert "revision 0099" in message and "newer release" in message
    assert "db sync" not in message
    with pytest.raises(exceptions.InvalidConfig, match="0099"):
        _sync(url)
    assert _revision(url) == "0099"


def test_a_string_that_is_no_store_url_is_invalid_config(tmp_path):
    with pytest.raises(exceptions.InvalidConfig,
                       match="connection: it is not an SQLAlchemy URL"):
        jobs.JobStore("pass:word@/jobs")
    with pytest.raises(exceptions.InvalidConfig) as raised:
        jobs.JobStore("nosuchdb://gvfs:s3cret@db.example.org/gvfs")
    assert "s3cret" not in str(raised.value)
    assert "gvfs:***@db.example.org" in str(raised.value)


# --- gvfs-manage -------------------------------------------------------------

def _manage(tmp_path, url, *args, group="database", option="connection"):
    conf = tmp_path / "gvfs-conductor.conf"
    conf.write_text("[%s]\n%s = %s\n" % (group, option, url))
    return subprocess.run(
        [sys.executable, "-c",
         "import sys; from gvfs_openstack.cmd import manage; "
         "sys.exit(manage.main())", "--config-file", str(conf)] + list(args),
        cwd=tmp_path, capture_output=True, text=True, timeout=120)


def test_gvfs_manage_db_sync_and_version(tmp_path):
    url = _url(tmp_path)
    _store_at_0001(url)
    version = _manage(tmp_path, url, "db", "version")
    assert version.returncode == 0, version.stderr
    assert version.stdout.splitlines() == [
        "job store revision: 0001", "newest revision: 0005"]

    synced = _manage(tmp_path, url, "db", "sync")
    assert synced.returncode == 0, synced.stderr
    assert "revision 0005 (was 0001)" in synced.stdout
    assert "Running upgrade 0001 -> 0002" in synced.stderr  # Logged.
    assert _revision(url) == "0005"
    assert _manage(tmp_path, url, "db", "version").stdout.splitlines()[0] \
        == "job store revision: 0005"
    store = jobs.JobStore(url)
    assert store.job("j1")["pack"] == "tar"
    store.dispose()


def _conductor(tmp_path, url):
    """The real ``gvfs-conductor`` program on the store at ``url``."""
    conf = tmp_path / "gvfs-conductor.conf"
    conf.write_text("[database]\nconnection = %s\n"
                    "[conductor]\nverify_callers = false\n" % url)
    return subprocess.run(
        [sys.executable, "-c",
         "import sys; from gvfs_openstack.cmd import conductor; "
         "sys.exit(conductor.main())", "--config-file", str(conf)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("made", ["empty", "0001"])
def test_gvfs_conductor_refuses_a_store_not_synced(tmp_path, made):
    """An empty database is not a new job history until db sync.

    A wrong connection string must not start a fresh, empty history:
    the conductor exits saying what to run, and makes nothing.
    """
    url = _url(tmp_path)
    if made == "0001":
        _store_at_0001(url)
    else:
        _run_sql(url, "CREATE TABLE unrelated (x INTEGER)")
    refused = _conductor(tmp_path, url)
    said = refused.stdout + refused.stderr     # Its log, where it goes.
    assert refused.returncode == 2, said[-2000:]
    assert "gvfs-manage db sync" in said
    assert ("it is empty" in said) == (made == "empty")
    assert _revision(url) == (None if made == "empty" else "0001")
    assert _manage(tmp_path, url, "db", "sync").returncode == 0
    assert _revision(url) == schema.head()


def test_gvfs_manage_fails_in_one_line(tmp_path):
    url = _url(tmp_path)
    jobs.JobStore(url).dispose()
    _run_sql(url, "UPDATE alembic_version SET version_num = '0099'")
    ahead = _manage(tmp_path, url, "db", "sync")
    assert ahead.returncode == 1
    assert ahead.stderr.count("\n") == 1
    assert ahead.stderr.startswith("gvfs-manage: ")
    assert "0099" in ahead.stderr

    bad = _manage(tmp_path, "nosuchdb://gvfs:s3cret@db/gvfs", "db", "sync")
    assert bad.returncode == 1
    assert bad.stderr.count("\n") == 1 and "[database] connection" in \
        bad.stderr
    assert "s3cret" not in bad.stderr


# --- listing jobs ------------------------------------------------------------

def test_jobs_page_by_marker_and_limit_within_a_project(store):
    made = [store.create_job("east", "west", IMAGES[:1], 1,
                             project_id="p%d" % (n % 2), user_id="u")
            for n in range(6)]
    # Oldest first; jobs made in the same microsecond are ordered by id.
    seconds = [0, 1, 2, 3, 2, 1]
    for job_id, second in zip(made, seconds):
        store.set_job(job_id, created_at=datetime.datetime(
            2026, 1, 1, 0, 0, second))
    ordered = [job_id for _, job_id in sorted(zip(seconds, made))]
    assert [j["id"] for j in store.jobs()] == ordered

    p0 = [j for j in ordered if store.job(j)["project_id"] == "p0"]
    assert [j["id"] for j in store.jobs(project_id="p0")] == p0
    assert store.jobs(project_id="nobody") == []
    assert [j["id"] for j in store.jobs(limit=2)] == ordered[:2]
    assert [j["id"] for j in store.jobs(marker=ordered[2])] == ordered[3:]
    assert [j["id"] for j in store.jobs(marker=ordered[2], limit=2)] == \
        ordered[3:5]
    assert store.jobs(marker=ordered[-1]) == []
    assert [j["id"] for j in store.jobs(project_id="p0", marker=p0[0],
                                        limit=1)] == p0[1:2]

    store.set_job(ordered[4], state=states.FAILED)
    assert [j["id"] for j in store.jobs(states=(states.QUEUED,),
                                        marker=ordered[1])] == \
        ordered[2:4] + ordered[5:]


def test_an_unknown_marker_is_a_job_not_found(store):
    theirs = store.create_job("east", "west", [], 1, project_id="p1")
    with pytest.raises(exceptions.JobNotFound, match="no-such-job"):
        store.jobs(marker="no-such-job")
    # Another project's job is no marker of this project's list.
    with pytest.raises(exceptions.JobNotFound):
        store.jobs(project_id="p2", marker=theirs)
    assert store.jobs(project_id="p1", marker=theirs) == []


def test_the_deprecated_job_store_option_still_names_the_store(tmp_path):
    url = _url(tmp_path)
    _store_at_0001(url)
    synced = _manage(tmp_path, url, "db", "sync", group="conductor",
                     option="job_store")
    assert synced.returncode == 0, synced.stderr
    assert "revision 0005 (was 0001)" in synced.stdout
    assert "job_store" in synced.stderr and "deprecated" in synced.stderr
