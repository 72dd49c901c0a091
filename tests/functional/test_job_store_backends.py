# SPDX-License-Identifier: Apache-2.0
"""The job store on the databases several conductors share: a real
PostgreSQL and a real MariaDB, each started for this module.

``gvfs-manage db sync`` upgrades a store the previous release's schema
made, the live tables are what the revisions made on that database, the
conditional UPDATEs that keep conductors apart (claims, notifications)
let exactly one of two racing writers through, timestamps keep their
microseconds, the metrics' sums of stage runs (SQL each database spells
its own way) are exact, and a store that does not answer fails in one
line after oslo.db's retries.
"""

import datetime
import os
import subprocess
import sys
import threading

from alembic import autogenerate
from alembic.runtime import migration
import pytest

from gvfs_lab import job_store
from gvfs_lab import mariadb
from gvfs_lab import postgres
from gvfs_lab import process
from gvfs_openstack.conductor import metrics
from gvfs_openstack.migration.db import schema
from gvfs_openstack.migration.db import tables
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import states

SERVERS = {"postgresql": postgres.PostgreSQL, "mariadb": mariadb.MariaDB}


@pytest.fixture(scope="module", params=sorted(SERVERS))
def server(request, tmp_path_factory):
    server = SERVERS[request.param](
        str(tmp_path_factory.mktemp(request.param)))
    yield server
    server.stop()


@pytest.fixture
def url(server, request):
    return server.database("jobs_%d" % abs(hash(request.node.name)))


def _manage(tmp_path, url, *args):
    conf = tmp_path / "gvfs-conductor.conf"
    conf.write_text("[database]\nconnection = %s\n" % url)
    return subprocess.run(
        [sys.executable, "-m", "gvfs_openstack.cmd.manage",
         "--config-file", str(conf)] + list(args),
        cwd=tmp_path, capture_output=True, text=True, timeout=180)


def test_db_sync_upgrades_a_store_of_the_previous_release(url, tmp_path):
    job_store.store_at_0001(url)
    synced = _manage(tmp_path, url, "db", "sync")
    assert synced.returncode == 0, synced.stderr
    assert synced.stdout.strip() == \
        "The job store is at revision %s (was 0001)." % schema.head()
    version = _manage(tmp_path, url, "db", "version")
    assert version.stdout.splitlines()[0] == \
        "job store revision: %s" % schema.head()

    store = jobs.JobStore(url)
    try:
        job = store.job("j1")
        assert (job["pack"], job["project_id"], job["notified"]) == \
            ("tar", None, None)
        assert [(i["image_id"], i["transfer_task"])
                for i in store.images("j1")] == \
            [("i0", "task-0"), ("i1", "task-1")]
        new = store.create_job("east", "west", job_store.IMAGES, 2,
                               project_id="p1", user_id="u1")
        assert [j["id"] for j in store.jobs(project_id="p1")] == [new]
        with store.engine.connect() as db:
            assert autogenerate.compare_metadata(
                migration.MigrationContext.configure(db),
                tables.METADATA) == []
    finally:
        store.dispose()
    again = _manage(tmp_path, url, "db", "sync")
    assert again.stdout.strip() == \
        "The job store is at revision %s already." % schema.head()


def test_an_empty_database_is_made_at_the_newest_revision(url):
    store = jobs.JobStore(url)
    try:
        with store.engine.connect() as db:
            assert schema.current(db) == schema.head()
            assert autogenerate.compare_metadata(
                migration.MigrationContext.configure(db),
                tables.METADATA) == []
    finally:
        store.dispose()


def _race(stores, attempt):
    """Run ``attempt(store)`` in a thread per store, all at once."""
    barrier = threading.Barrier(len(stores))
    results = [None] * len(stores)

    def one(n):
        barrier.wait()
        results[n] = attempt(stores[n])

    threads = [threading.Thread(target=one, args=(n,))
               for n in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_two_conductors_racing_for_a_job_or_a_notice_one_wins(url):
    """Each conductor has its own engine, as on two hosts."""
    a, b = jobs.JobStore(url), jobs.JobStore(url)
    try:
        for _ in range(20):
            job_id = a.create_job("east", "west", job_store.IMAGES, 2)
            claims = _race([a, b], lambda store, job_id=job_id: store.claim(
                job_id, "conductor-%d" % id(store), lease_seconds=60))
            assert sorted(claims) == [False, True]
            notices = _race([a, b], lambda store, job_id=job_id:
                            store.mark_notified(job_id, None,
                                                jobs.NOTIFIED_START))
            assert sorted(notices) == [False, True]
    finally:
        a.dispose()
        b.dispose()


def test_timestamps_keep_their_microseconds(url):
    """A lease renewed within a second of its claim is still newer."""
    store = jobs.JobStore(url)
    try:
        job_id = store.create_job("east", "west", job_store.IMAGES, 2)
        beat = datetime.datetime(2026, 11, 24, 12, 0, 0, 123456)
        store.set_job(job_id, heartbeat=beat)
        assert store.job(job_id)["heartbeat"] == beat
    finally:
        store.dispose()


def test_the_metrics_sum_stage_runs_to_the_microsecond(url):
    """The database sums the runs' durations, each in its own SQL.

    To the microsecond, none negative, across a second's edge.
    """
    store = jobs.JobStore(url)
    start = datetime.datetime(2026, 11, 24, 12, 0, 0, 999999)
    took = [datetime.timedelta(microseconds=1),
            datetime.timedelta(days=2, seconds=3, microseconds=999999),
            datetime.timedelta(seconds=-5)]     # Two conductors' clocks.
    try:
        with store.engine.begin() as db:
            db.execute(tables.STAGE_RUNS.insert(), [{
                "job_id": "job", "position": 0, "stage": states.TRANSFER,
                "started_at": start, "finished_at": start + each,
                "outcome": states.DONE, "bytes": 2 ** 40} for each in took])
        summary = {sample.name: sample.value
                   for family in metrics.families(store)
                   for sample in family.samples
                   if sample.labels == {"stage": states.TRANSFER,
                                        "outcome": states.DONE}}
        moved = {sample.labels["stage"]: sample.value
                 for family in metrics.families(store)
                 if family.name == "gvfs_conductor_moved_bytes"
                 for sample in family.samples}
    finally:
        store.dispose()
    assert summary == {
        "gvfs_conductor_stage_run_seconds_count": 3,
        "gvfs_conductor_stage_run_seconds_sum": (took[0] + took[1])
        .total_seconds()}
    assert moved[states.TRANSFER] == 3 * 2 ** 40


def test_a_purge_deletes_old_finished_jobs_only(url):
    """The statements of ``db purge`` as each server takes them.

    MySQL and MariaDB refuse a DELETE whose subquery reads the table it
    deletes from, unless the subquery is materialised.
    """
    store = jobs.JobStore(url)
    try:
        old = datetime.datetime(2026, 1, 1)
        made = {}
        for state in (states.DONE, states.FAILED, states.QUEUED):
            job_id = store.create_job("east", "west", job_store.IMAGES, 2)
            store.end_run(store.start_run(job_id, 0, states.TRANSFER, 1),
                          "done", 1)
            store.set_job(job_id, state=state)
            with store.engine.begin() as db:
                db.execute(tables.JOBS.update().where(
                    tables.JOBS.c.id == job_id).values(updated_at=old))
            made[state] = job_id
        assert jobs.purge(store.engine, datetime.datetime(2026, 6, 1)) == {
            "jobs": 2, "images": 2 * len(job_store.IMAGES),
            "stage_runs": 2}
        assert [j["id"] for j in store.jobs()] == [made[states.QUEUED]]
        assert len(store.images(made[states.QUEUED])) == \
            len(job_store.IMAGES)
    finally:
        store.dispose()


def test_a_store_that_does_not_answer_fails_in_one_line(server, tmp_path):
    closed = process.free_port()
    scheme = "postgresql+psycopg2" if isinstance(
        server, postgres.PostgreSQL) else "mysql+pymysql"
    conf = tmp_path / "gvfs-conductor.conf"
    conf.write_text("[database]\nconnection = %s://gvfs:s3cret@127.0.0.1:%d"
                    "/gvfs\nmax_retries = 2\nretry_interval = 1\n"
                    % (scheme, closed))
    failed = subprocess.run(
        [sys.executable, "-m", "gvfs_openstack.cmd.manage", "--config-file",
         str(conf), "db", "version"], cwd=tmp_path, capture_output=True,
        text=True, timeout=120, env=dict(os.environ, LC_ALL="C"))
    assert failed.returncode == 1
    lines = failed.stderr.splitlines()
    assert lines[-1].startswith("gvfs-manage: cannot use the job store: ")
    assert "refused" in lines[-1].lower()
    assert "s3cret" not in failed.stderr
    # oslo.db tried again, as configured, before giving up.
    assert sum("SQL connection failed" in line for line in lines) == 2
