# SPDX-License-Identifier: Apache-2.0
"""``gvfs-manage db purge --before``: the job history's retention.

Nothing ever removed a job, so the store grew with every migration and
every replication round.  Purged: finished jobs (done, failed,
cancelled) last changed before the date, with their images and stage
runs.  Kept: anything newer, and every job not finished however old.
Run through the real ``gvfs-manage`` on a sqlite store.
"""

import datetime
import subprocess
import sys

import sqlalchemy as sa

from gvfs_openstack.migration.db import tables
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import states

IMAGES = [{"id": "i0", "name": "a", "size": 1},
          {"id": "i1", "name": "b", "size": 2}]
OLD = datetime.datetime(2026, 1, 1)
CUT = "2026-06-01"


def _job(store, state, updated_at):
    job_id = store.create_job("east", "west", IMAGES, 2)
    run = store.start_run(job_id, 0, states.TRANSFER, 1)
    store.end_run(run, "done", 10)
    with store.engine.begin() as db:
        db.execute(tables.JOBS.update().where(
            tables.JOBS.c.id == job_id).values(state=state,
                                               updated_at=updated_at))
    return job_id


def _manage(tmp_path, url, *args):
    conf = tmp_path / "gvfs-conductor.conf"
    conf.write_text("[database]\nconnection = %s\n" % url)
    return subprocess.run(
        [sys.executable, "-c",
         "import sys; from gvfs_openstack.cmd import manage; "
         "sys.exit(manage.main())", "--config-file", str(conf)] + list(args),
        cwd=tmp_path, capture_output=True, text=True, timeout=120)


def _count(store, table, job_id):
    column = table.c.id if table is tables.JOBS else table.c.job_id
    with store.engine.connect() as db:
        return db.execute(sa.select(sa.func.count()).select_from(
            table).where(column == job_id)).scalar()


def test_old_finished_jobs_go_the_rest_stays(tmp_path):
    url = "sqlite:///%s" % (tmp_path / "jobs.sqlite")
    store = jobs.JobStore(url)
    gone = [_job(store, state, OLD) for state in states.FINISHED]
    kept = [_job(store, states.DONE, jobs.utcnow()),
            # Not finished, however old: still someone's migration.
            _job(store, states.QUEUED, OLD),
            _job(store, states.RUNNING, OLD)]
    with store.engine.begin() as db:
        db.execute(tables.REPLICATION_POLICIES.insert().values(
            id="p1", project_id="alpha", source="east", destination="west",
            selector_kind="tag", selector='{"tag": "dr"}',
            delete_follows=False, paused=False,
            created_at=OLD, updated_at=OLD))
        db.execute(tables.REPLICATED_IMAGES.insert().values(
            policy_id="p1", image_id="i0", state="synced", job_id=gone[0],
            changed_at=OLD, updated_at=OLD))

    dry = _manage(tmp_path, url, "db", "purge", "--before", CUT,
                  "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert dry.stdout.strip() == (
        "Would purge 3 finished jobs last changed before 2026-06-01 "
        "00:00:00 UTC, with 6 images and 3 stage runs.")
    assert all(_count(store, tables.JOBS, j) == 1 for j in gone + kept)

    done = _manage(tmp_path, url, "db", "purge", "--before", CUT)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("Purged 3 finished jobs")
    for job_id in gone:
        for table in (tables.JOBS, tables.IMAGES, tables.STAGE_RUNS):
            assert _count(store, table, job_id) == 0
    for job_id in kept:
        assert (_count(store, tables.JOBS, job_id),
                _count(store, tables.IMAGES, job_id),
                _count(store, tables.STAGE_RUNS, job_id)) == (1, 2, 1)
    # The replicated image keeps its record, without the link.
    with store.engine.connect() as db:
        assert db.execute(sa.select(
            tables.REPLICATED_IMAGES.c.job_id,
            tables.REPLICATED_IMAGES.c.state)).all() == [(None, "synced")]
    again = _manage(tmp_path, url, "db", "purge", "--before", CUT)
    assert again.stdout.startswith("Purged 0 finished jobs")
    store.dispose()


def test_a_time_with_its_zone_is_taken_in_utc(tmp_path):
    url = "sqlite:///%s" % (tmp_path / "jobs.sqlite")
    store = jobs.JobStore(url)
    job_id = _job(store, states.DONE, datetime.datetime(2026, 6, 1, 11))
    # 12:00+02:00 is 10:00 UTC: the job (11:00 UTC) is after it.
    _manage(tmp_path, url, "db", "purge", "--before",
            "2026-06-01T12:00+02:00")
    assert _count(store, tables.JOBS, job_id) == 1
    _manage(tmp_path, url, "db", "purge", "--before", "2026-06-01T12:00")
    assert _count(store, tables.JOBS, job_id) == 0
    store.dispose()


def test_a_bad_date_and_an_unsynced_store_are_refused(tmp_path):
    url = "sqlite:///%s" % (tmp_path / "jobs.sqlite")
    bad = _manage(tmp_path, url, "db", "purge", "--before", "last week")
    assert bad.returncode == 1
    assert "--before" in bad.stderr and "2026-06-30" in bad.stderr
    # An empty database is not made a store by a purge.
    empty = _manage(tmp_path, url, "db", "purge", "--before", CUT)
    assert empty.returncode == 1
    assert "gvfs-manage db sync" in empty.stderr
