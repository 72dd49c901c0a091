# SPDX-License-Identifier: Apache-2.0
"""Prometheus scrapes of both real proxies during and after a transfer.

An image is read cold through the client proxy (every block crosses the
tunnel from the server proxy, which reads it from NFS-Ganesha); each
proxy's ``/metrics`` is scraped over HTTP while the read runs and after
it, parsed with prometheus_client's own parser, and checked against the
bytes that moved and against ``gvfs-proxy stats``.
"""

import asyncio
import os
import threading

from gvfs_openstack.client.nfs import NfsClient
from tests.functional.conftest import random_file
from tests import metrics_samples

MIB = 1024 * 1024
SIZE = 24 * MIB


def _moved(samples, hop, direction):
    return samples[("gvfs_proxy_transferred_bytes_total",
                    (("direction", direction), ("hop", hop)))]


def _read_through(lab, name):
    async def scenario():
        port = lab.client_proxy.port
        async with NfsClient("127.0.0.1", port, port, timeout=60) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path(name)
            return sum([len(d) async for _, d in nfs.read_file(fh)])

    return asyncio.run(scenario())


def test_scrapes_match_what_moved(lab_factory):
    lab = lab_factory("tcp", cache={"capacity_mb": 128}, metrics=True)
    random_file(os.path.join(lab.export, "golden.img"), SIZE)
    during = []
    done = threading.Event()

    def scrape_while_reading():
        while not done.is_set():
            during.append(
                metrics_samples.scrape(lab.client_proxy.metrics_port))
            done.wait(0.05)

    scraper = threading.Thread(target=scrape_while_reading)
    scraper.start()
    try:
        assert _read_through(lab, "golden.img") == SIZE
    finally:
        done.set()
        scraper.join()
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
    assert len(seen) >= 2 and seen == sorted(seen)
    assert all(value <= _moved(client, "downstream", "out")
               for value in seen)
