# SPDX-License-Identifier: Apache-2.0
"""The conductor's Prometheus metrics, from a real sqlite job store.

Jobs, stage runs and a replication policy are written through the
store's own API; the families are served over HTTP by
:func:`metrics.server` and parsed with prometheus_client's
parser, as a Prometheus server reads them.
"""

import collections
import datetime
import random

import sqlalchemy as sa

from gvfs_openstack.conductor import metrics
from gvfs_openstack.migration.db import tables
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import states
from gvfs_openstack.replication import store as replication_store
from tests import metrics_samples

MIB = 1024 * 1024


def _image(n, size):
    return {"id": "00000000-0000-4000-8000-%012d" % n, "name": "img%d" % n,
            "size": size}


def test_jobs_runs_bytes_and_recovery_points(tmp_path):
    store = jobs.JobStore("sqlite:///%s" % (tmp_path / "jobs.sqlite"))
    first_id = store.create_job("east", "west", [_image(1, 8 * MIB)], 1)
    second_id = store.create_job("east", "west", [_image(2, 4 * MIB)], 1)
    store.set_job(first_id, state=states.DONE)
    store.finish_stage(first_id, 0, states.DONE, state=states.DONE)
    for stage, nbytes, outcome in ((states.LOCAL_COPY, 8 * MIB, "done"),
                                   (states.TRANSFER, 3 * MIB, "failed"),
                                   (states.TRANSFER, 8 * MIB, "done")):
        run = store.start_run(first_id, 0, stage, pid=1)
        store.end_run(run, outcome, nbytes)
    store.start_run(second_id, 0, states.LOCAL_COPY, pid=2)  # Running.

    policies = replication_store.ReplicationStore(store)
    policy = policies.create_policy("alpha", "u", "east", "west", "tag",
                                    ["dr"])
    changed = jobs.utcnow() - datetime.timedelta(seconds=600)
    policies.add(policy, _image(3, MIB), changed)

    server = metrics.server("127.0.0.1", 0, store)
    server.start()
    try:
        samples = metrics_samples.scrape(server.port)
    finally:
        server.stop()
    # Jobs by state; images by stage and state.
    assert samples[("gvfs_conductor_jobs", (("state", "queued"),))] == 1
    assert samples[("gvfs_conductor_jobs", (("state", "done"),))] == 1
    assert samples[("gvfs_conductor_jobs", (("state", "failed"),))] == 0
    assert samples[("gvfs_conductor_images", (
        ("stage", "done"), ("state", "done")))] == 1
    # Finished runs only; bytes by stage, failed runs' included.
    assert samples[("gvfs_conductor_moved_bytes_total",
                    (("stage", "transfer"),))] == 11 * MIB
    assert samples[("gvfs_conductor_moved_bytes_total",
                    (("stage", "local_copy"),))] == 8 * MIB
    assert samples[("gvfs_conductor_stage_run_seconds_count", (
        ("outcome", "failed"), ("stage", "transfer")))] == 1
    assert samples[("gvfs_conductor_stage_run_seconds_count", (
        ("outcome", "done"), ("stage", "local_copy")))] == 1
    # Stages and outcomes with no run yet are there, at 0, so that a
    # rate sees their first runs.
    assert samples[("gvfs_conductor_moved_bytes_total",
                    (("stage", "remote_copy"),))] == 0
    assert samples[("gvfs_conductor_stage_run_seconds_count", (
        ("outcome", "cancelled"), ("stage", "remote_copy")))] == 0
    # The policy's one change has waited about ten minutes.
    point = samples[("gvfs_conductor_replication_recovery_point_seconds",
                     (("policy", policy),))]
    assert 600 <= point < 700


def _samples(families, *names):
    """``{(sample name, labels): value}`` of the families ``names``."""
    return {(sample.name, tuple(sorted(sample.labels.items()))):
            sample.value for family in families if family.name in names
            for sample in family.samples}


def test_run_aggregates_match_every_run_summed_in_python(tmp_path):
    """Many runs summed by the database: as if each were read and summed.

    To the microsecond.  Durations of odd microseconds (``.999999``
    must not round up a second), runs that finished "before" they
    started (two conductors' clocks) and runs still going.
    """
    store = jobs.JobStore("sqlite:///%s" % (tmp_path / "jobs.sqlite"))
    rng = random.Random(61)
    base = datetime.datetime(2026, 1, 1)
    rows = []
    for n in range(20000):
        started = base + datetime.timedelta(
            seconds=rng.randrange(10 ** 6),
            microseconds=rng.choice((0, 1, 999999, rng.randrange(10 ** 6))))
        took = datetime.timedelta(microseconds=rng.randrange(-10 ** 6,
                                                             10 ** 10))
        rows.append({
            "job_id": "job-%d" % (n % 97), "position": 0,
            "stage": rng.choice(states.STAGES), "pid": 1,
            "started_at": started, "resumed_from": 0,
            "finished_at": None if n % 10 == 0 else started + took,
            "outcome": None if n % 10 == 0 else rng.choice(
                states.FINISHED),
            "bytes": rng.randrange(10 ** 12)})
    with store.engine.begin() as db:
        db.execute(tables.STAGE_RUNS.insert(), rows)

    # What the scrape exported when it read every run.
    count = collections.Counter()
    took = collections.defaultdict(datetime.timedelta)
    moved = collections.Counter()
    for row in rows:
        if row["finished_at"] is None:
            continue
        key = (row["stage"], row["outcome"])
        count[key] += 1
        took[key] += max(datetime.timedelta(),
                         row["finished_at"] - row["started_at"])
        moved[row["stage"]] += row["bytes"]

    statements = []
    sa.event.listen(store.engine, "before_cursor_execute",
                    lambda *args: statements.append(args[2]))
    samples = _samples(list(metrics.families(store)),
                       "gvfs_conductor_stage_run_seconds",
                       "gvfs_conductor_moved_bytes")
    for stage in states.STAGES:
        assert samples[("gvfs_conductor_moved_bytes_total",
                        (("stage", stage),))] == moved[stage]
        for outcome in states.FINISHED:
            labels = (("outcome", outcome), ("stage", stage))
            assert samples[("gvfs_conductor_stage_run_seconds_count",
                            labels)] == count[(stage, outcome)]
            assert samples[("gvfs_conductor_stage_run_seconds_sum",
                            labels)] == \
                took[(stage, outcome)].total_seconds()
    # A row per stage and outcome came back, not one per run.
    assert all("GROUP BY" in statement for statement in statements
               if "stage_runs" in statement)
