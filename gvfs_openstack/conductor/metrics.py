# SPDX-License-Identifier: Apache-2.0
"""The conductor's Prometheus metrics, read from the job store.

Stages run in forked runner processes and conductors may share one job
store, so the store, not a process's memory, is the record of what
every job did: a scrape counts jobs by state and images by stage, sums
the bytes and seconds of the stage runs, and computes each replication
policy's recovery point (:func:`plan.recovery_point`) -- the same for
every conductor that serves the store.  Labels are bounded: states and
stages are fixed sets, policies are as many as operators made.
"""

from prometheus_client import core
import sqlalchemy as sa

from gvfs_openstack import metrics_server
from gvfs_openstack.migration.db import tables
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import states
from gvfs_openstack.replication import plan
from gvfs_openstack.replication import store as replication_store

PREFIX = "gvfs_conductor_"


def families(store, now=None):
    """The metric families of the job store ``store`` now."""
    now = now or jobs.utcnow()
    with store.engine.connect() as db:
        by_state = db.execute(sa.select(
            tables.JOBS.c.state, sa.func.count()).group_by(
                tables.JOBS.c.state)).all()
        images = db.execute(sa.select(
            tables.IMAGES.c.stage, tables.IMAGES.c.state,
            sa.func.count()).group_by(tables.IMAGES.c.stage,
                                      tables.IMAGES.c.state)).all()
        runs = db.execute(sa.select(
            tables.STAGE_RUNS.c.stage, tables.STAGE_RUNS.c.outcome,
            tables.STAGE_RUNS.c.started_at, tables.STAGE_RUNS.c.finished_at,
            tables.STAGE_RUNS.c.bytes).where(
                tables.STAGE_RUNS.c.finished_at.is_not(None))).all()
    gauge = core.GaugeMetricFamily(PREFIX + "jobs", "Jobs by state.",
                                   labels=["state"])
    # Every state, 0 included: an alert on "failed" needs the series.
    counts = dict.fromkeys(states.JOB_STATES, 0)
    counts.update(by_state)
    for state, count in sorted(counts.items()):
        gauge.add_metric([state], count)
    yield gauge
    gauge = core.GaugeMetricFamily(
        PREFIX + "images", "Images of jobs by the stage they are at and "
        "their state.", labels=["stage", "state"])
    for stage, state, count in sorted(images):
        gauge.add_metric([stage, state], count)
    yield gauge
    yield from _runs(runs)
    yield _recovery_points(replication_store.ReplicationStore(store), now)


def _runs(runs):
    # Every stage and outcome from the start, 0 included: a series that
    # appeared with its first value would show Prometheus no increase.
    count = {(stage, outcome): 0 for stage in states.STAGES
             for outcome in states.FINISHED}
    seconds = dict.fromkeys(count, 0.0)
    moved = dict.fromkeys(states.STAGES, 0)
    for stage, outcome, started, finished, nbytes in runs:
        key = (stage, outcome or "")
        count[key] = count.get(key, 0) + 1
        seconds[key] = seconds.get(key, 0.0) + max(
            0.0, (finished - started).total_seconds())
        moved[stage] = moved.get(stage, 0) + (nbytes or 0)
    summary = core.SummaryMetricFamily(
        PREFIX + "stage_run_seconds",
        "Finished stage runs and their durations, by stage and outcome.",
        labels=["stage", "outcome"])
    for key in sorted(count):
        summary.add_metric(list(key), count[key], seconds[key])
    yield summary
    counter = core.CounterMetricFamily(
        PREFIX + "moved_bytes",
        "Bytes moved by finished stage runs, by stage (a transfer run's "
        "are those that crossed between the DTNs).", labels=["stage"])
    for stage in sorted(moved):
        counter.add_metric([stage], moved[stage])
    yield counter


def _recovery_points(policies, now):
    gauge = core.GaugeMetricFamily(
        PREFIX + "replication_recovery_point_seconds",
        "Seconds since the oldest change of a policy's images not yet at "
        "its destination; 0 when every change arrived.",
        labels=["policy"])
    for policy in policies.policies():
        gauge.add_metric([policy["id"]], plan.recovery_point(
            policies.records(policy["id"]).values(), now))
    return gauge


def server(host, port, store):
    """A :class:`metrics_server.MetricsServer` of the job store ``store``."""
    return metrics_server.MetricsServer(
        host, port, metrics_server.registry_of(lambda: families(store)))
