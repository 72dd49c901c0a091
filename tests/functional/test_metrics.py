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
