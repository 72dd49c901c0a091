# SPDX-License-Identifier: Apache-2.0
"""Prometheus scrapes of both real proxies during and after a transfer.

An image is read cold through the client proxy (every block crosses the
tunnel from the server proxy, which reads it from NFS-Ganesha); each
proxy's ``/metrics`` is scraped over HTTP while the read runs and after
it, parsed with prometheus_client's own parser, and checked against the
bytes that moved and against ``gvfs-proxy stats``.
"""

import asyncio
import json
import os

from gvfs_lab import process
from gvfs_lab import prometheus
from gvfs_openstack.client.nfs import NfsClient
from tests.functional.conftest import random_file
from tests import metrics_samples

MIB = 1024 * 1024
SIZE = 24 * MIB


def _moved(samples, hop, direction):
    return samples[("gvfs_proxy_transferred_bytes_total",
                    (("direction", direction), ("hop", hop)))]


def _read_through(lab, name, scrape_every):
    """Bytes read of ``name``, and a scrape after each ``scrape_every``.

    The scrapes run between the reader's own steps, so each is taken
    mid-transfer however fast the read goes; with one READ in flight,
    the proxy cannot have sent more than the reader took and one READ
    more (with eight, two scrapes could fall in one burst of replies the
    reader had not yet taken).
    """
    async def scenario():
        port = lab.client_proxy.port
        scrapes = []
        read = 0
        async with NfsClient("127.0.0.1", port, port, timeout=60,
                             window=1) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path(name)
            async for _, data in nfs.read_file(fh):
                before = read
                read += len(data)
                if read < SIZE and read // scrape_every > \
                        before // scrape_every:
                    scrapes.append(await asyncio.to_thread(
                        metrics_samples.scrape,
                        lab.client_proxy.metrics_port))
        return read, scrapes

    return asyncio.run(scenario())


def test_scrapes_match_what_moved(lab_factory):
    lab = lab_factory("tcp", cache={"capacity_mb": 128}, metrics=True)
    random_file(os.path.join(lab.export, "golden.img"), SIZE)
    read, during = _read_through(lab, "golden.img", SIZE // 4)
    assert read == SIZE
    client = metrics_samples.scrape(lab.client_proxy.metrics_port)
    server = metrics_samples.scrape(lab.server_proxy.metrics_port)
    stats = lab.client_proxy.stats()

    # The client sent the image down and fetched it all from upstream.
    assert _moved(client, "downstream", "out") \
        == stats["downstream_bytes_out"] >= SIZE
    assert _moved(client, "upstream", "in") \
        == stats["upstream_bytes_in"] >= SIZE
    assert client[("gvfs_proxy_cache_fetched_bytes_total", ())] \
        == stats["cache_bytes_fetched"] >= SIZE
    assert client[("gvfs_proxy_cache_export_fetched_bytes_total",
                   (("export", lab.export),))] >= SIZE
    assert client[("gvfs_proxy_calls_total",
                   (("procedure", "nfs_read"),))] \
        == stats["calls"]["nfs_read"]
    calls = client[("gvfs_proxy_upstream_call_seconds_count", ())]
    assert calls == sum(stats["upstream_call_seconds"]["counts"]) > 0
    assert client[("gvfs_proxy_upstream_call_seconds_bucket",
                   (("le", "+Inf"),))] == calls
    # The server read it from NFS-Ganesha and sent it up the tunnel.
    assert _moved(server, "upstream", "in") >= SIZE
    assert _moved(server, "downstream", "out") >= SIZE
    assert server[("gvfs_proxy_info", (
        ("port", str(lab.server_proxy.port)), ("role", "server")))] == 1
    # Scrapes during the read saw the counters only grow.
    seen = [_moved(s, "downstream", "out") for s in during]
    assert len(seen) == 3 and seen[0] < seen[1] < seen[2], seen
    assert all(value <= _moved(client, "downstream", "out")
               for value in seen)


def _dashboard(name):
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "etc", "grafana", name)
    with open(path) as f:
        return json.load(f)


def test_a_prometheus_server_scrapes_both_proxies(lab_factory, tmp_path):
    """A real Prometheus: its samples match the counters.

    Every query of both dashboards is PromQL it evaluates; the panels of
    the proxies' dashboard that the read feeds (bytes per hop, calls,
    upstream latency) have series.
    """
    lab = lab_factory("tcp", cache={"capacity_mb": 64}, metrics=True)
    ports = {"client": lab.client_proxy.metrics_port,
             "server": lab.server_proxy.metrics_port}
    server = prometheus.Prometheus(str(tmp_path / "prometheus"),
                                   {"gvfs-proxy": list(ports.values())},
                                   interval=0.5)
    try:
        selector = ('gvfs_proxy_transferred_bytes_total{job="gvfs-proxy",'
                    'instance="127.0.0.1:%d",hop="downstream",'
                    'direction="out"}' % ports["client"])
        # Prometheus finds its targets within 5 s; the read starts once it
        # scrapes them.
        process.wait_until(
            lambda: [value for _, value in server.query(
                "count_over_time(%s[30s])" % selector)] >= [2.0],
            "two scrapes of the client proxy", timeout=60, interval=0.2)
        random_file(os.path.join(lab.export, "scraped.img"), 8 * MIB)
        read, _ = _read_through(lab, "scraped.img", SIZE)
        assert read == 8 * MIB
        moved = lab.client_proxy.stats()["downstream_bytes_out"]
        process.wait_until(
            lambda: [value for _, value in server.query(selector)]
            == [moved], "Prometheus's sample of the bytes sent down",
            timeout=30, interval=0.2)
        # The hop panel's rate saw the read go by.
        [(_, rate)] = server.query(
            'sum(rate(%s[30s]))' % selector)
        assert rate > 0
        assert set(server.targets_up().values()) == {"up"}
        fed = {"Bytes through each hop", "Calls by procedure",
               "Upstream call latency"}

        def panels_with_series():
            """Titles of panels with series; a bad query raises."""
            shown = set()
            for name in ("gvfs-proxies.json", "gvfs-mounts-and-jobs.json"):
                for panel in _dashboard(name)["panels"]:
                    if any(server.query(prometheus.grafana_query(
                            target["expr"], "30s", job="gvfs-proxy"))
                            for target in panel["targets"]):
                        shown.add(panel["title"])
            return shown

        # Series that began with the read need a second scrape to rate.
        process.wait_until(lambda: fed <= panels_with_series(),
                           "series in the panels the read fed",
                           timeout=30, interval=0.5)
    finally:
        server.stop()
