# SPDX-License-Identifier: Apache-2.0
"""A mount's numbers in Prometheus' text format: ``[mount] metrics_port``.

The mount is where a guest's reads meet the node: what the kernel asked
(reads and writes, bytes), what the RAM cache answered and let go, what
boot profiles prefilled, what went to the client proxy and how long its
answers took, what is written and not yet safe.  The proxies' metrics
say what happened behind it; these say what the guests saw.

Read at each scrape from the objects that count (:mod:`counters`, the
:class:`readcache.ReadCache`, the :class:`prefill.Prefill`), on the
mount's event loop (:class:`metrics_server.LoopEndpoint`), so a scrape
never reads a number while a request changes it.
"""

from prometheus_client import core

from gvfs_openstack import metrics_server

PREFIX = "gvfs_mount_"


def _counter(name, documentation, value):
    return core.CounterMetricFamily(PREFIX + name, documentation,
                                    value=value)


def _labelled(name, documentation, label, counts):
    family = core.CounterMetricFamily(PREFIX + name, documentation,
                                      labels=[label])
    for value, count in sorted(counts.items()):
        family.add_metric([value], count)
    return family


def _gauge(name, documentation, value):
    return core.GaugeMetricFamily(PREFIX + name, documentation, value=value)


def families(fs):
    """The metric families of the mount served by ``fs`` (a GvfsFuse)."""
    session = fs.session
    info = core.InfoMetricFamily(PREFIX.rstrip("_"),
                                 "The export mounted and the proxy it is "
                                 "mounted through.")
    info.add_metric([], {"export": session.export,
                         "proxy": "%s:%d" % (session.host, session.port)})
    yield info
    kernel = fs.counters
    yield _labelled("requests", "The kernel's requests, by FUSE operation.",
                    "operation", kernel.requests)
    yield _labelled("request_failures",
                    "Requests answered with an error, by errno.", "errno",
                    kernel.failures)
    yield _counter("read_bytes", "Bytes the mount returned to reads.",
                   kernel.read_bytes)
    yield _counter("written_bytes", "Bytes the mount took in writes.",
                   kernel.written_bytes)
    yield _gauge("open_files", "File handles the kernel holds open.",
                 fs.open_files)
    yield _gauge("write_buffered_bytes",
                 "Bytes written through the mount and not yet committed "
                 "by the client proxy.", fs.buffered_bytes)
    yield from _read_cache(fs.read_cache)
    yield _counter("prefilled_bytes",
                   "Bytes read ahead into the RAM cache from boot "
                   "profiles.",
                   fs.prefill.bytes_read if fs.prefill is not None else 0)
    upstream = session.counters
    yield metrics_server.histogram(
        PREFIX + "upstream_call_seconds",
        "Seconds the client proxy took to answer the mount's NFS calls, "
        "by procedure.", upstream.call_seconds, label="procedure")
    yield _labelled("upstream_failures",
                    "NFS calls that failed, by the errno the caller got.",
                    "errno", upstream.failures)
    yield _counter("upstream_reconnects",
                   "Times the mount connected to its proxy again.",
                   upstream.reconnects)


def _read_cache(cache):
    """The RAM cache's families; zeros for a mount without one."""
    yield _counter("read_cache_hits", "Reads answered from the RAM cache.",
                   cache.hits if cache else 0)
    yield _counter("read_cache_misses",
                   "Reads the RAM cache could not answer.",
                   cache.misses if cache else 0)
    yield _counter("read_cache_evictions",
                   "Blocks the RAM cache let go to make room.",
                   cache.evictions if cache else 0)
    yield _gauge("read_cache_used_bytes", "Bytes the RAM cache holds.",
                 cache.used if cache else 0)
    yield _gauge("read_cache_capacity_bytes",
                 "What the RAM cache may hold ([mount] read_cache_mb).",
                 cache.capacity if cache else 0)


def endpoint(host, port, fs, token=None):
    """The endpoint serving ``fs``'s families at ``host``:``port``."""
    return metrics_server.LoopEndpoint(host, port, metrics_server.registry_of(
        lambda: families(fs)), token=token)
