# SPDX-License-Identifier: Apache-2.0
"""A server proxy with two workers in front of NFS-Ganesha.

The client proxy keeps eight tunnel connections; the supervisor deals
them to its workers by their open connections, each worker serves its
share, ``stats`` adds them up, a worker killed is started again while
the clients carry on, and SIGTERM leaves no worker behind.
"""

import asyncio
import hashlib
import os
import signal

from gvfs_lab import process
from gvfs_lab.topology import Lab
from gvfs_openstack.client.nfs import NfsClient
from tests.functional.conftest import random_file
from tests.functional.conftest import sha256
from tests import metrics_samples

MIB = 1024 * 1024


def _read(lab, name):
    """The file's bytes, read through the client proxy, 16 READs at once."""
    async def scenario():
        port = lab.client_proxy.port
        async with NfsClient("127.0.0.1", port, port, timeout=60,
                             window=16) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path(name)
            return b"".join([data async for _, data in nfs.read_file(fh)])

    return asyncio.run(scenario())


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_two_workers_share_the_tunnel_connections(tmp_path):
    with Lab(str(tmp_path / "lab"), tunnel="tcp", upstream_connections=8,
             server_workers=2, metrics=True) as lab:
        path = os.path.join(lab.export, "shared.img")
        random_file(path, 32 * MIB)
        digest = sha256(path)
        assert hashlib.sha256(_read(lab, "shared.img")).hexdigest() == digest
        stats = lab.server_proxy.stats()
        served = stats["workers"]
        assert [w["connections"] for w in served] == [4, 4], served
        assert all(w["downstream_bytes_out"] > 0 for w in served), served
        assert stats["downstream_bytes_out"] == sum(
            w["downstream_bytes_out"] for w in served) >= 32 * MIB
        assert stats["role"] == "server" and stats["connections"] == 8
        assert stats["port"] == lab.server_proxy.port
        # The supervisor's Prometheus endpoint serves the sum (read from
        # the workers every second).
        process.wait_until(
            lambda: metrics_samples.scrape(lab.server_proxy.metrics_port)[(
                "gvfs_proxy_transferred_bytes_total",
                (("direction", "out"), ("hop", "downstream")))]
            == lab.server_proxy.stats()["downstream_bytes_out"],
            "the workers' bytes in the supervisor's metrics", timeout=30,
            interval=0.5)

        # A worker killed: started again; the clients reconnect.
        killed = served[0]["pid"]
        os.kill(killed, signal.SIGKILL)
        process.wait_until(
            lambda: [w["pid"] for w in lab.server_proxy.stats()["workers"]
                     if w["worker"] == 0] not in ([], [killed]),
            "worker 0 started again", timeout=60, interval=0.2)
        assert hashlib.sha256(_read(lab, "shared.img")).hexdigest() == digest
        pids = [w["pid"] for w in lab.server_proxy.stats()["workers"]]
        assert "worker 0 (pid %d) exited" % killed in open(
            lab.server_proxy.process.log_path).read()
    # The lab's SIGTERM to the supervisor stopped both workers.
    assert not any(_alive(pid) for pid in pids), pids
