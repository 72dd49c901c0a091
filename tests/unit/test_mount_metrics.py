# SPDX-License-Identifier: Apache-2.0
"""The mount's Prometheus metrics: what its requests and calls counted.

A real :class:`GvfsFuse` over an in-memory file (the read cache tests'
session), with the real :class:`ProxySession` counters; its families
rendered by prometheus_client, served by the endpoint and parsed back by
prometheus_client's own parser.
"""

import asyncio
import errno
import os
import urllib.request

import pyfuse3
import pytest

from gvfs_openstack.fuse import counters
from gvfs_openstack.fuse import fusefs
from gvfs_openstack.fuse import metrics
from gvfs_openstack.fuse import session as fuse_session
from tests import metrics_samples
from tests.unit import test_mount_read_cache as in_memory

BLOCK = 64 * 1024


class CountingSession(in_memory.Session):
    """The in-memory session, counting its calls as ProxySession does."""

    host = "127.0.0.1"
    port = 2049
    export = "/srv/images"

    def __init__(self, file):
        super().__init__(file)
        self.counters = counters.UpstreamCounters()

    async def call(self, method, fh, *args, **kwargs):
        if fh != in_memory.FH:
            self.counters.failed(errno.ESTALE)
            raise fuse_session.OperationFailed(errno.ESTALE, "stale")
        self.counters.answered(method, 0.003)
        return await super().call(method, fh, *args, **kwargs)


def _mounted(data, read_cache_bytes):
    file = in_memory.File(data)
    ops = fusefs.GvfsFuse(CountingSession(file), fusefs.MountOptions(
        read_cache_bytes=read_cache_bytes))
    return file, ops, ops.inodes.remember(in_memory.FH)


def _scrape(ops):
    """The samples of a real ``GET /metrics`` of ``ops``'s endpoint."""
    async def scenario():
        endpoint = metrics.endpoint("127.0.0.1", 0, ops)
        port = await endpoint.start()
        try:
            return await asyncio.to_thread(metrics_samples.scrape, port)
        finally:
            await endpoint.close()

    return asyncio.run(scenario())


def _read_all(ops, inode, size, step):
    async def scenario():
        fh = (await ops.open(inode, os.O_RDONLY, None)).fh
        data = b"".join([await ops.read(fh, off, step)
                         for off in range(0, size, step)])
        await ops.release(fh)
        return data

    return asyncio.run(scenario())


def test_reads_hits_misses_and_evictions_are_counted():
    data = os.urandom(8 * BLOCK)
    file, ops, inode = _mounted(data, read_cache_bytes=4 * BLOCK)
    assert _read_all(ops, inode, len(data), BLOCK) == data
    assert _read_all(ops, inode, 2 * BLOCK, BLOCK) == data[:2 * BLOCK]
    samples = _scrape(ops)

    def value(name, **labels):
        return samples[("gvfs_mount_" + name, tuple(sorted(labels.items())))]

    assert value("info", export="/srv/images", proxy="127.0.0.1:2049") == 1
    assert value("requests_total", operation="read") == 10
    assert value("requests_total", operation="open") == 2
    assert value("read_bytes_total") == 10 * BLOCK
    # Eight blocks through a cache of four: four let go, among them the
    # first two, so the second pass missed them and let two more go.
    assert value("read_cache_evictions_total") == 6
    assert value("read_cache_misses_total") == 10 == file.reads
    assert value("read_cache_used_bytes") == 4 * BLOCK
    assert value("read_cache_capacity_bytes") == 4 * BLOCK
    assert value("upstream_call_seconds_count", procedure="read") == 10
    assert value("upstream_call_seconds_count", procedure="getattr") == 2
    assert value("upstream_call_seconds_bucket", procedure="read",
                 le="0.005") == 10
    assert value("upstream_call_seconds_bucket", procedure="read",
                 le="0.0025") == 0
    assert value("open_files") == 0
    assert value("prefilled_bytes_total") == 0


def test_a_failed_request_counts_its_errno():
    _, ops, _ = _mounted(b"x" * BLOCK, read_cache_bytes=0)
    stale = ops.inodes.remember(b"another-fh")
    with pytest.raises(pyfuse3.FUSEError):
        asyncio.run(ops.getattr(stale))
    samples = _scrape(ops)
    assert samples[("gvfs_mount_request_failures_total",
                    (("errno", "ESTALE"),))] == 1
    assert samples[("gvfs_mount_upstream_failures_total",
                    (("errno", "ESTALE"),))] == 1
    assert samples[("gvfs_mount_requests_total",
                    (("operation", "getattr"),))] == 1


def test_bytes_written_and_not_committed_show_until_the_close():
    _, ops, inode = _mounted(b"\0" * BLOCK, read_cache_bytes=BLOCK)

    async def scenario():
        fh = (await ops.open(inode, os.O_WRONLY, None)).fh
        await ops.write(fh, 0, b"y" * 1000)
        held = ops.buffered_bytes, ops.open_files
        await ops.release(fh)
        return held

    assert asyncio.run(scenario()) == (1000, 1)
    samples = _scrape(ops)
    assert samples[("gvfs_mount_written_bytes_total", ())] == 1000
    assert samples[("gvfs_mount_write_buffered_bytes", ())] == 0


def test_the_endpoint_serves_nothing_but_metrics():
    _, ops, _ = _mounted(b"", read_cache_bytes=0)

    async def scenario():
        endpoint = metrics.endpoint("127.0.0.1", 0, ops)
        port = await endpoint.start()
        try:
            request = urllib.request.Request(
                "http://127.0.0.1:%d/stats" % port)
            with pytest.raises(urllib.error.HTTPError) as e:
                await asyncio.to_thread(urllib.request.urlopen, request)
            return e.value.code
        finally:
            await endpoint.close()

    assert asyncio.run(scenario()) == 404


def _sample_names(families):
    """The names of the samples ``families`` can give, as scraped."""
    suffixes = {"counter": ("_total",), "gauge": ("",), "info": ("_info",),
                "histogram": ("_bucket", "_count", "_sum"),
                "summary": ("_count", "_sum")}
    return {family.name + suffix for family in families
            for suffix in suffixes[family.type]}


def test_the_mounts_and_jobs_dashboard_names_only_served_metrics(tmp_path):
    """etc/grafana/gvfs-mounts-and-jobs.json asks for what is served."""
    import json
    import re

    from gvfs_openstack.api import metrics as api_metrics
    from gvfs_openstack.conductor import metrics as conductor_metrics
    from gvfs_openstack.migration import jobs

    _, ops, _ = _mounted(b"", read_cache_bytes=0)
    store = jobs.JobStore("sqlite:///%s" % (tmp_path / "jobs.sqlite"))
    served = _sample_names(metrics.families(ops)) \
        | _sample_names(conductor_metrics.families(store)) \
        | _sample_names(api_metrics.RequestMetrics(
            lambda environ: "other").registry.collect())
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "etc", "grafana",
        "gvfs-mounts-and-jobs.json")
    with open(path) as f:
        dashboard = json.load(f)
    queried = {name for panel in dashboard["panels"]
               for target in panel["targets"]
               for name in re.findall(r"gvfs_\w+", target["expr"])}
    assert {name.split("_")[1] for name in queried} \
        == {"mount", "conductor", "api"}
    assert queried <= served, queried - served


def test_the_proxys_own_metrics_port_is_refused_at_start(tmp_path):
    import subprocess
    import sys

    config = tmp_path / "mount.conf"
    config.write_text("[metrics]\nport = 9471\n[mount]\nexport = /srv\n"
                      "proxy_port = 2049\nmetrics_port = 9471\n")
    refused = subprocess.run(
        [sys.executable, "-m", "gvfs_openstack.cmd.proxy", "--config-file",
         str(config), "mount", str(tmp_path)], capture_output=True,
        text=True, timeout=60)
    assert refused.returncode == 2
    assert refused.stderr.strip() == (
        "gvfs-proxy mount: [mount] metrics_port 9471 is the proxy's "
        "[metrics] port: give the mount a port of its own")
