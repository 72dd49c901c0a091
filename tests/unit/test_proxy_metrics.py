# SPDX-License-Identifier: Apache-2.0
"""The proxy's Prometheus metrics: names, labels, values, the endpoint.

A real :class:`ProxyService` (not started) gives the snapshot, the
families are rendered by prometheus_client and parsed back by its own
parser, as a Prometheus server would read them.
"""

import asyncio
import textwrap

from oslo_config import cfg
import pytest

from gvfs_openstack.cmd import proxy as proxy_cmd
from gvfs_openstack import metrics_server
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy import metrics
from gvfs_openstack.proxy import service
from tests import metrics_samples


@pytest.fixture
def proxy(tmp_path):
    """A caching client proxy with an endpoint on a free port."""
    path = tmp_path / "client.conf"
    path.write_text(textwrap.dedent("""\
        [proxy]
        role = client
        [upstream]
        tunnel = tcp
        host = 127.0.0.1
        port = 1
        [cache]
        directory = %s
        capacity_mb = 8
        bank_size_mb = 8
        [metrics]
        port = 0
        """ % (tmp_path / "cache")))
    conf = cfg.ConfigOpts()
    proxy_cmd.register_opts(conf)
    conf(["--config-file", str(path)])
    return service.ProxyService(conf)


def _scrape(endpoint, request=b"GET /metrics HTTP/1.0\r\n\r\n"):
    async def scenario():
        port = await endpoint.start()
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1",
                                                           port)
            writer.write(request)
            answer = await reader.read()
            writer.close()
            return answer
        finally:
            await endpoint.close()

    return asyncio.run(scenario())


def test_counters_are_named_by_convention(proxy):
    listener = proxy.counters.part(counters.ListenerCounters)
    listener.downstream_bytes_out = 5 * 1024 * 1024
    cache = proxy.counters.part(counters.CacheCounters)
    cache.cache_hits = 7
    cache.cache_bytes_fetched = 4096
    cache.export("/srv/images")["bytes_fetched"] = 4096
    proxy.counters.part(counters.RoleCounters).calls["nfs_read"] = 3
    up = proxy.counters.part(counters.UpstreamCounters)
    for seconds in (0.0004, 0.05, 0.05, 20.0):
        up.upstream_call_seconds.observe(seconds)
    text = _render(proxy)
    samples = metrics_samples.samples(text)
    assert samples[("gvfs_proxy_transferred_bytes_total",
                    (("direction", "out"), ("hop", "downstream")))] \
        == 5 * 1024 * 1024
    assert samples[("gvfs_proxy_cache_hits_total", ())] == 7
    assert samples[("gvfs_proxy_cache_fetched_bytes_total", ())] == 4096
    assert samples[("gvfs_proxy_cache_export_fetched_bytes_total",
                    (("export", "/srv/images"),))] == 4096
    assert samples[("gvfs_proxy_calls_total",
                    (("procedure", "nfs_read"),))] == 3
    assert samples[("gvfs_proxy_cache_capacity_bytes", ())] == 8 * 1024 ** 2
    assert samples[("gvfs_proxy_info", (("port", "0"),
                                        ("role", "client")))] == 1
    # Cumulative buckets, as Prometheus expects them.
    hist = "gvfs_proxy_upstream_call_seconds_bucket"
    assert samples[(hist, (("le", "0.0005"),))] == 1
    assert samples[(hist, (("le", "0.05"),))] == 3
    assert samples[(hist, (("le", "10.0"),))] == 3
    assert samples[(hist, (("le", "+Inf"),))] == 4
    assert samples[("gvfs_proxy_upstream_call_seconds_count", ())] == 4
    # No name carries its unit anywhere but last.
    for name, _ in samples:
        assert name.startswith("gvfs_proxy_"), name
        assert "_bytes_" not in name.replace("_bytes_total", ""), name
    # Every counter's samples end in _total.
    for family in metrics.families(proxy.snapshot()):
        if family.type == "counter":
            assert family.samples, family.name
            assert all(s.name.endswith("_total") for s in family.samples), \
                family.name


def test_export_labels_are_bounded():
    """Past the first exports seen, the rest share one label.

    Clients name the paths they mount, so paths alone are unbounded.
    """
    cache = counters.CacheCounters()
    for n in range(metrics.MAX_EXPORTS + 8):
        cache.export("/srv/export-%02d" % n)["bytes_fetched"] = 10
    samples = [s for family in metrics.families(
        {"cache_exports": cache.cache_exports})
        for s in family.samples
        if s.name == "gvfs_proxy_cache_export_fetched_bytes_total"]
    labels = {s.labels["export"]: s.value for s in samples}
    assert len(labels) == metrics.MAX_EXPORTS + 1
    assert labels["other"] == 8 * 10
    assert labels["/srv/export-00"] == 10
    assert sum(labels.values()) == (metrics.MAX_EXPORTS + 8) * 10


def _render(proxy):
    from prometheus_client import exposition
    return exposition.generate_latest(proxy.metrics.registry).decode()


def test_the_endpoint_serves_metrics_and_nothing_else(proxy):
    answer = _scrape(proxy.metrics)
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200 OK")
    assert b"Content-Type: text/plain; version=" in head
    samples = metrics_samples.samples(body.decode())
    assert ("gvfs_proxy_transferred_bytes_total", (
        ("direction", "in"), ("hop", "downstream"))) in samples
    assert _scrape(proxy.metrics, b"GET /stats HTTP/1.0\r\n\r\n") \
        .startswith(b"HTTP/1.0 404")
    assert _scrape(proxy.metrics, b"POST /metrics HTTP/1.0\r\n\r\n") \
        .startswith(b"HTTP/1.0 405")
    # A request that never ends its head is dropped, not answered.
    metrics_server.LoopEndpoint.READ_TIMEOUT = 0.2
    try:
        assert _scrape(proxy.metrics, b"GET /metrics") == b""
    finally:
        metrics_server.LoopEndpoint.READ_TIMEOUT = 10.0


def test_counter_names_put_the_unit_last():
    assert metrics.counter_name("downstream_bytes_in") \
        == "gvfs_proxy_downstream_in_bytes"
    assert metrics.counter_name("cache_hits") == "gvfs_proxy_cache_hits"


def test_the_grafana_dashboard_names_only_exported_metrics():
    """etc/grafana/gvfs-proxies.json queries metrics a proxy serves."""
    import dataclasses
    import json
    import os
    import re

    every = counters.Counters()
    for kind in vars(counters).values():
        if dataclasses.is_dataclass(kind) and kind.__name__.endswith(
                "Counters"):
            every.part(kind)
    every.part(counters.RoleCounters).calls["nfs_read"] = 1
    every.part(counters.CacheCounters).export("/srv/images")
    snapshot = dict(every.as_dict(), role="client", port=1,
                    writeback_dirty_bytes=0, journal_bytes=0,
                    cache_capacity=0)
    # The names of the samples a scrape returns, exactly.
    exported = {sample.name for family in metrics.families(snapshot)
                for sample in family.samples}
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "etc", "grafana", "gvfs-proxies.json")
    with open(path) as f:
        dashboard = json.load(f)
    queried = {name for panel in dashboard["panels"]
               for target in panel["targets"]
               for name in re.findall(r"gvfs_proxy_\w+", target["expr"])}
    assert queried and queried <= exported, queried - exported


def test_every_hop_is_exported_at_zero_before_any_snapshot():
    """A scrape before the first snapshot finds every hop's series at 0.

    The supervisor of several workers reads theirs a moment after it
    starts; a scrape meanwhile found no series at all.
    """
    from prometheus_client import exposition
    registry = metrics_server.registry_of(lambda: metrics.families({}))
    found = metrics_samples.samples(
        exposition.generate_latest(registry).decode())
    for hop, direction in metrics.HOPS.values():
        assert found[("gvfs_proxy_transferred_bytes_total", (
            ("direction", direction), ("hop", hop)))] == 0
