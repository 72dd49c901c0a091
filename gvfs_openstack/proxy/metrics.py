# SPDX-License-Identifier: Apache-2.0
"""The proxy's counters in Prometheus' text format, on ``GET /metrics``.

The counters of :mod:`gvfs_openstack.proxy.counters` stay the one
record of what moved: a scrape reads the same snapshot ``gvfs-proxy
stats`` prints and renames it by Prometheus' conventions (a ``gvfs_proxy_``
prefix, the unit last, ``_total`` on counters).  Bytes that cross the
proxy are one family labelled by hop and direction; calls are labelled
by procedure (bounded by the protocol) and the cache's per-export
counters by export: the first :data:`MAX_EXPORTS` the proxy saw, the
rest summed under ``other``, since clients name the paths they mount.

The endpoint (:class:`metrics_server.LoopEndpoint`) runs on the
proxy's event loop, so a scrape never reads a counter while the loop
changes it.
"""

from prometheus_client import core

from gvfs_openstack import latency
from gvfs_openstack import metrics_server
from gvfs_openstack.proxy import counters as counters_mod

PREFIX = "gvfs_proxy_"

#: Bytes across the proxy: (hop, direction) of each counter.
HOPS = {
    "downstream_bytes_in": ("downstream", "in"),
    "downstream_bytes_out": ("downstream", "out"),
    "upstream_bytes_in": ("upstream", "in"),
    "upstream_bytes_out": ("upstream", "out"),
}

#: Values read at the scrape rather than counted: their metric names,
#: and the factor to the unit the name gives.
GAUGES = {
    "max_inflight_seen": ("downstream_max_inflight_calls", 1),
    "cache_capacity": ("cache_capacity_bytes", 1),
    "writeback_dirty_bytes": ("writeback_dirty_bytes", 1),
    "journal_bytes": ("journal_bytes", 1),
    "peak_rss_kb": ("peak_resident_memory_bytes", 1024),
    "drc_entries": ("duplicate_request_cache_entries", 1),
    "started_at": ("start_time_seconds", 1),
}

#: Exports labelled by their path; those seen later count as ``other``.
MAX_EXPORTS = 32

#: The per-export counter that is a gauge: data not yet written back.
EXPORT_GAUGE = "dirty_bytes"

#: What a snapshot holds that is not a number to export as such.
NOT_COUNTED = {"role", "port", "upstream", "calls", "cache_exports"}


def counter_name(field):
    """A counter field's metric name, without ``_total``: unit last."""
    parts = field.split("_")
    if "bytes" in parts:
        parts.remove("bytes")
        parts.append("bytes")
    return PREFIX + "_".join(parts)


def families(snapshot):
    """The metric families of one ``gvfs-proxy stats`` snapshot."""
    info = core.InfoMetricFamily(PREFIX.rstrip("_"),
                                 "The proxy's role and NFS port.")
    info.add_metric([], {"role": str(snapshot.get("role", "")),
                         "port": str(snapshot.get("port", ""))})
    yield info
    moved = core.CounterMetricFamily(
        PREFIX + "transferred_bytes",
        "Bytes through the proxy, by hop (downstream: its NFS clients; "
        "upstream: the next proxy or NFS server) and direction.",
        labels=["hop", "direction"])
    # Every hop's series from the start, at 0 until bytes move: a
    # scrape taken before the first snapshot (the supervisor of several
    # workers reads theirs a moment after it starts) finds the series.
    for field, labels in HOPS.items():
        moved.add_metric(list(labels), snapshot.get(field, 0))
    yield moved
    calls = core.CounterMetricFamily(
        PREFIX + "calls", "Calls answered, by RPC program and procedure.",
        labels=["procedure"])
    for procedure, count in sorted(snapshot.get("calls", {}).items()):
        calls.add_metric([procedure], count)
    yield calls
    yield from _exports(snapshot.get("cache_exports", {}))
    for field, value in sorted(snapshot.items()):
        if field in NOT_COUNTED or field in HOPS:
            continue
        if isinstance(value, dict) and "counts" in value:
            # As gvfs-proxy stats shows it: a histogram made a dict.
            yield metrics_server.histogram(PREFIX + field, _help(field),
                                           latency.Histogram(**value))
        elif field in GAUGES:
            name, factor = GAUGES[field]
            yield core.GaugeMetricFamily(PREFIX + name, _help(field),
                                         value=value * factor)
        elif isinstance(value, (int, float)):
            yield core.CounterMetricFamily(counter_name(field),
                                           _help(field), value=value)


def _help(field):
    return "gvfs-proxy stats: %s." % field


def _bounded(exports):
    """``{label: {field: value}}`` of at most ``MAX_EXPORTS + 1`` labels.

    The first :data:`MAX_EXPORTS` exports seen keep their paths; the
    others are summed under ``other``.
    """
    labelled = {}
    for export, values in exports.items():     # In the order first seen.
        label = export if len(labelled) < MAX_EXPORTS \
            or export in labelled else "other"
        into = labelled.setdefault(label, dict.fromkeys(values, 0))
        for field, value in values.items():
            into[field] = into.get(field, 0) + value
    return labelled


def _exports(exports):
    labelled = _bounded(exports)
    for field in counters_mod.EXPORT_COUNTERS:
        if field == EXPORT_GAUGE:
            continue
        family = core.CounterMetricFamily(
            counter_name("cache_export_" + field),
            "The cache's %s, by export." % field, labels=["export"])
        for export, values in sorted(labelled.items()):
            family.add_metric([export], values.get(field, 0))
        yield family
    dirty = core.GaugeMetricFamily(
        PREFIX + "cache_export_" + EXPORT_GAUGE,
        "Bytes written to the cache and not yet to the server, by export.",
        labels=["export"])
    for export, values in sorted(labelled.items()):
        dirty.add_metric([export], values.get(EXPORT_GAUGE, 0))
    yield dirty


def endpoint(host, port, snapshot, token=None):
    """The proxy's endpoint; ``snapshot()`` gives ``gvfs-proxy stats``."""
    return metrics_server.LoopEndpoint(host, port, metrics_server.registry_of(
        lambda: families(snapshot())), token=token)
