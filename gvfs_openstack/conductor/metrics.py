# SPDX-License-Identifier: Apache-2.0
"""The conductor's Prometheus metrics, read from the job store.

Stages run in forked runner processes and conductors may share one job
store, so the store, not a process's memory, is the record of what
every job did: a scrape counts jobs by state and images by stage, sums
the bytes and seconds of the stage runs, and computes each replication
policy's recovery point (:func:`plan.recovery_point`) -- the same for
every conductor that serves the store.  Labels are bounded: states and
stages are fixed sets, policies are as many as operators made.  The
database counts and sums the stage runs, a row per stage and outcome
coming back: what a scrape reads does not grow with the runs the store
keeps.
"""

from prometheus_client import core
import sqlalchemy as sa

from gvfs_openstack import metrics_server
from gvfs_openstack.migration.db import durations
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
        totals = db.execute(_run_totals()).all()
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
    yield from _runs(totals)
    yield _recovery_points(replication_store.ReplicationStore(store), now)


def _run_totals():
    """Finished stage runs' totals by stage and outcome, in SQL.

    Rows of ``(stage, outcome, runs, microseconds, bytes)``.  A run
    that finished before it started (the clocks of two conductors
    disagree) counts no time, as it never did.
    """
    runs = tables.STAGE_RUNS.c
    took = sa.case((runs.finished_at > runs.started_at,
                    durations.Microseconds(runs.started_at,
                                           runs.finished_at)), else_=0)
    return sa.select(
        runs.stage, runs.outcome, sa.func.count(), sa.func.sum(took),
        sa.func.sum(runs.bytes)).where(
            runs.finished_at.is_not(None)).group_by(runs.stage,
                                                    runs.outcome)


def _runs(totals):
    # Every stage and outcome from the start, 0 included: a series that
    # appeared with its first value would show Prometheus no increase.
    count = {(stage, outcome): 0 for stage in states.STAGES
             for outcome in states.FINISHED}
    microseconds = dict.fromkeys(count, 0)
    moved = dict.fromkeys(states.STAGES, 0)
    for stage, outcome, runs, took, nbytes in totals:
        # Sums come back as Decimal from PostgreSQL and MySQL.
        key = (stage, outcome or "")
        count[key] = count.get(key, 0) + runs
        microseconds[key] = microseconds.get(key, 0) + int(took or 0)
        moved[stage] = moved.get(stage, 0) + int(nbytes or 0)
    seconds = {key: took / 10 ** 6 for key, took in microseconds.items()}
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


def server(host, port, store, token=None):
    """A :class:`metrics_server.MetricsServer` of the job store ``store``."""
    return metrics_server.MetricsServer(
        host, port, metrics_server.registry_of(lambda: families(store)),
        token=token)
