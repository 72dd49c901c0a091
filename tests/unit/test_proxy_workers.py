# SPDX-License-Identifier: Apache-2.0
"""``[proxy] workers``: how many, and their counters added up."""

import textwrap

from oslo_config import cfg
import pytest

from gvfs_openstack.cmd import proxy as proxy_cmd
from gvfs_openstack import exceptions
from gvfs_openstack.proxy import control
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy import workers


def _conf(tmp_path, text):
    path = tmp_path / "proxy.conf"
    path.write_text(textwrap.dedent(text))
    conf = cfg.ConfigOpts()
    proxy_cmd.register_opts(conf)
    conf(["--config-file", str(path)])
    return conf


def test_zero_means_one_per_core(tmp_path, monkeypatch):
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 6)
    conf = _conf(tmp_path, "[proxy]\nrole = server\nworkers = 0\n")
    assert workers.count(conf) == 6


def test_by_default_a_server_proxy_runs_on_every_core_up_to_eight(
        tmp_path, monkeypatch):
    server = _conf(tmp_path, "[proxy]\nrole = server\n")
    for cores, expected in ((1, 1), (2, 2), (8, 8), (96, 8)):
        monkeypatch.setattr(workers.os, "cpu_count", lambda: cores)
        assert workers.count(server) == expected
    monkeypatch.setattr(workers.os, "cpu_count", lambda: None)
    assert workers.count(server) == 1
    # Said outright, more than eight is taken.
    monkeypatch.setattr(workers.os, "cpu_count", lambda: 96)
    assert workers.count(_conf(tmp_path, "[proxy]\nrole = server\n"
                                         "workers = 12\n")) == 12


def test_a_client_proxy_keeps_one_process(tmp_path):
    conf = _conf(tmp_path, "[proxy]\nrole = client\nworkers = 2\n")
    with pytest.raises(exceptions.InvalidConfig) as e:
        workers.count(conf)
    assert "[proxy] workers" in str(e.value)
    assert workers.count(_conf(tmp_path, "[proxy]\nrole = client\n")) == 1
    assert workers.count(_conf(tmp_path, "[proxy]\nrole = client\n"
                                         "workers = 0\n")) == 1


def _snapshot(calls, read, latency, started_at, inflight):
    every = counters.Counters()
    every.part(counters.ListenerCounters).downstream_bytes_out = read
    every.part(counters.ListenerCounters).max_inflight_seen = inflight
    every.part(counters.RoleCounters).calls.update(calls)
    upstream = every.part(counters.UpstreamCounters)
    for seconds in latency:
        upstream.upstream_call_seconds.observe(seconds)
    return dict(every.as_dict(), started_at=started_at, role="server",
                port=2049, upstream=["tcp 127.0.0.1:2049"])


def test_the_workers_counters_add_up():
    first = _snapshot({"nfs_read": 3, "nfs_getattr": 1}, 300, [0.001],
                      100.0, 4)
    second = _snapshot({"nfs_read": 5}, 500, [0.001, 2.0], 90.0, 7)
    total = workers.merged([first, second])
    assert total["downstream_bytes_out"] == 800
    assert total["calls"] == {"nfs_read": 8, "nfs_getattr": 1}
    histogram = total["upstream_call_seconds"]
    assert sum(histogram["counts"]) == 3
    assert histogram["sum"] == pytest.approx(2.002)
    # Not added: the highest load seen, the first start, who it is.
    assert total["max_inflight_seen"] == 7
    assert total["started_at"] == 90.0
    assert (total["role"], total["port"]) == ("server", 2049)
    # The inputs are left as they were.
    assert first["calls"] == {"nfs_read": 3, "nfs_getattr": 1}


def test_the_workers_split_the_nfs_servers_connections():
    assert [workers.Worker(0, None, count).share(total)
            for count, total in ((2, 2), (2, 5), (4, 1), (1, 3))] \
        == [1, 3, 1, 3]


def test_a_retired_workers_counters_keep_counting_without_its_gauges():
    last = _snapshot({"nfs_read": 3}, 300, [0.001], 100.0, 4)
    last["cache_capacity"] = 1 << 20
    last["cache_exports"] = {"/export": {"hits": 2, "dirty_bytes": 9}}
    kept = workers.counted(last)
    assert kept["downstream_bytes_out"] == 300
    assert kept["calls"] == {"nfs_read": 3}
    assert kept["cache_exports"] == {"/export": {"hits": 2}}
    assert sum(kept["upstream_call_seconds"]["counts"]) == 1
    for gone in ("cache_capacity", "max_inflight_seen", "started_at",
                 "port", "role", "upstream"):
        assert gone not in kept, gone


class _Process:
    """What the supervisor reads of a worker's process."""

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None


@pytest.mark.asyncio
async def test_the_supervisors_sum_never_falls(tmp_path):
    """The sum a supervisor exports never falls.

    A worker slow to answer counts as it last did; one that exited and
    was started again adds to what it had counted, so Prometheus never
    sees a fall (it would read a reset).  Real control sockets answer
    for the workers.
    """
    conf = _conf(tmp_path, "[proxy]\nrole = server\nworkers = 2\n"
                 "control_socket = %s\n" % (tmp_path / "control"))
    supervisor = workers.Supervisor(conf, 2, argv=["unused"])
    answers = {0: 100, 1: 10}
    servers = []
    for index in (0, 1):
        async def stats(request, index=index):
            if answers[index] is None:
                raise OSError("not answering")
            return {"downstream_bytes_out": answers[index],
                    "cache_capacity": 5}
        server = control.ControlServer(
            workers.worker_socket(str(tmp_path / "control"), index),
            {"stats": stats})
        await server.start()
        servers.append(server)
        supervisor.workers[index].process = _Process(1000 + index)
    try:
        first = await supervisor._worker_stats()
        assert first["downstream_bytes_out"] == 110
        # Worker 1's socket gone (slow or dying): its last answer counts.
        await servers[1].close()
        assert (await supervisor._worker_stats())[
            "downstream_bytes_out"] == 110
        # Worker 1 exited, its counters retired; its successor starts
        # at 0 and counts on from the sum.
        supervisor.workers[1].process.returncode = -9
        supervisor._retire(supervisor.workers[1])
        answers[1] = 3
        await servers[1].start()
        supervisor.workers[1].process = _Process(2001)
        after = await supervisor._worker_stats()
        assert after["downstream_bytes_out"] == 113
        # Gauges are the live workers' only.
        assert after["cache_capacity"] == 10
    finally:
        for server in servers:
            await server.close()
