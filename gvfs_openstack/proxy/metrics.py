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

The endpoint runs on the proxy's event loop, so a scrape never reads a
counter while the loop changes it.
"""

import asyncio

from oslo_log import log as logging
from prometheus_client import core
from prometheus_client import exposition

from gvfs_openstack import metrics_server
from gvfs_openstack.proxy import counters as counters_mod

LOG = logging.getLogger(__name__)

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
    for field, labels in HOPS.items():
        if field in snapshot:
            moved.add_metric(list(labels), snapshot[field])
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
            yield _histogram(field, value)
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


def _histogram(field, value):
    """A :class:`counters.Histogram` as Prometheus' cumulative buckets."""
    buckets, total = [], 0
    bounds = [str(b) for b in counters_mod.LATENCY_BUCKETS] + ["+Inf"]
    for bound, count in zip(bounds, value["counts"]):
        total += count
        buckets.append((bound, total))
    family = core.HistogramMetricFamily(PREFIX + field, _help(field))
    family.add_metric([], buckets, value["sum"])
    return family


class MetricsEndpoint:
    """``GET /metrics`` over HTTP/1.0, on the running event loop."""

    #: A scrape's request head must come within this many seconds.
    READ_TIMEOUT = 10.0

    def __init__(self, host, port, snapshot):
        """``snapshot()`` returns the counters, as ``gvfs-proxy stats``."""
        self.host = host
        self.port = port
        self.registry = metrics_server.registry_of(
            lambda: families(snapshot()))
        self._server = None

    async def start(self):
        self._server = await asyncio.start_server(self._serve, self.host,
                                                  self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        LOG.info("Prometheus metrics on http://%s:%d/metrics", self.host,
                 self.port)
        return self.port

    async def close(self):
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader, writer):
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"),
                                          self.READ_TIMEOUT)
            status, body, kind = self._answer(head)
            writer.write(b"HTTP/1.0 %s\r\nContent-Type: %s\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n"
                         % (status, kind, len(body)) + body)
            await writer.drain()
        except (asyncio.TimeoutError, asyncio.IncompleteReadError,
                asyncio.LimitOverrunError, ConnectionError):
            pass  # A scraper gone or too slow: nothing to answer.
        finally:
            writer.close()

    def _answer(self, head):
        method, _, rest = head.partition(b" ")
        path = rest.split(b" ", 1)[0].split(b"?", 1)[0]
        if method != b"GET":
            return b"405 Method Not Allowed", b"GET only\n", b"text/plain"
        if path != b"/metrics":
            return b"404 Not Found", b"see /metrics\n", b"text/plain"
        return (b"200 OK", exposition.generate_latest(self.registry),
                exposition.CONTENT_TYPE_LATEST.encode())
