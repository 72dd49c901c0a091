# SPDX-License-Identifier: Apache-2.0
"""The server proxy with one worker and with two, under many connections.

NFS-Ganesha and a server proxy on this machine; a client proxy without a
cache whose eight tunnel connections carry the READs of four readers at
once, each reading an image of its own (so that every byte is read from
the DTN through the server proxy).  The same run with ``[proxy]
workers`` 1 (the baseline) and 2, each ``runs`` times.

Two cores cannot show a second worker as more throughput: the readers,
the client proxy, Ganesha and the workers share them.  What two cores
can show is how evenly the workers share the work and what spreading it
costs, which a machine with more cores turns into throughput:

* ``server_worker_balance``: the bytes the least-loaded worker sent
  down over those of the most-loaded (1.0: even);
* ``server_workers2_cpu_per_gib_vs_1``: the server proxy tier's CPU
  seconds (supervisor and workers, user and system) per GiB sent, with
  two workers against one.
"""

import asyncio
import os
import statistics
import tempfile
import time

from gvfs_lab import process
from gvfs_lab.topology import Lab
from gvfs_openstack.client.nfs import NfsClient
from tools.bench import charts
from tools.bench import cpu
from tools.bench import data

MIB = 1024 * 1024
GIB = 1024 * MIB
READERS = 4
CONNECTIONS = 8


def _cpu_seconds(pids):
    """User and system seconds the processes ``pids`` have used."""
    return sum(cpu.process_seconds(pid) for pid in pids)


def server_pids(lab):
    pids = [lab.server_proxy.process.pid]
    return pids + [w["pid"] for w in lab.server_proxy.stats().get(
        "workers", [])]


def _read_all(lab, names):
    async def one(name):
        port = lab.client_proxy.port
        async with NfsClient("127.0.0.1", port, port, timeout=300,
                             window=4) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path(name)
            return sum([len(chunk) async for _, chunk in nfs.read_file(fh)])

    async def scenario():
        return sum(await asyncio.gather(*(one(n) for n in names)))

    return asyncio.run(scenario())


def _measure(work, workers, size, run):
    with Lab(os.path.join(work, "lab-%d-%d" % (workers, run)), tunnel="tcp",
             upstream_connections=CONNECTIONS,
             server_workers=workers) as lab:
        names = []
        for i in range(READERS):
            names.append("image-%d.img" % i)
            data.random_file(os.path.join(lab.export, names[-1]), size)
        pids = server_pids(lab)
        before = _cpu_seconds(pids)
        sent_before = lab.server_proxy.stats()["downstream_bytes_out"]
        started = time.monotonic()
        read = _read_all(lab, names)
        seconds = time.monotonic() - started
        cpu = _cpu_seconds(pids) - before
        stats = lab.server_proxy.stats()
        if read != READERS * size:
            raise process.LabError("read %d bytes of %d" % (
                read, READERS * size))
        sent = stats["downstream_bytes_out"] - sent_before
        served = [w["downstream_bytes_out"] for w in stats.get(
            "workers", [])] or [sent]
    return {"workers": workers, "seconds": seconds, "cpu_seconds": cpu,
            "sent_bytes": sent, "cpu_per_gib": cpu / (sent / GIB),
            "mibps": read / seconds / MIB,
            "balance": min(served) / max(served), "served": served}


def run(quick=False, plot=None):
    size = (64 if quick else 512) * MIB
    runs = 1 if quick else 3
    results = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        for run_number in range(runs):
            for workers in (1, 2):     # Alternated: drift hits both.
                results[workers].append(_measure(work, workers, size,
                                                 run_number))
    median = {w: {key: statistics.median(r[key] for r in rs)
                  for key in ("seconds", "cpu_seconds", "cpu_per_gib",
                              "mibps", "balance")}
              for w, rs in results.items()}
    print("\nserver-workers: %d readers, %d MiB each, through a client "
          "proxy's %d tunnel connections (medians of %d)"
          % (READERS, size // MIB, CONNECTIONS, runs))
    print("%-10s %9s %9s %12s %9s %9s" % (
        "workers", "seconds", "MiB/s", "CPU s/GiB", "balance",
        "served MiB"))
    for workers, rs in results.items():
        m = median[workers]
        print("%-10d %9.2f %9.1f %12.2f %9.2f %s" % (
            workers, m["seconds"], m["mibps"], m["cpu_per_gib"],
            m["balance"], " / ".join("%.0f" % (b / MIB)
                                     for b in rs[-1]["served"])))
    ratios = {
        "server_worker_balance": median[2]["balance"],
        "server_workers2_cpu_per_gib_vs_1":
            median[2]["cpu_per_gib"] / median[1]["cpu_per_gib"],
        "server_workers2_throughput_vs_1":
            median[2]["mibps"] / median[1]["mibps"],
    }
    for name, value in ratios.items():
        print("%-36s %6.2f" % (name, value))
    if plot:
        plt = charts.pyplot()
        fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3))
        labels = ["1 worker", "2 workers"]
        left.bar(labels, [median[1]["cpu_per_gib"],
                          median[2]["cpu_per_gib"]])
        left.set_ylabel("server tier CPU s per GiB")
        served = results[2][-1]["served"]
        right.bar(["worker %d" % i for i in range(len(served))],
                  [b / MIB for b in served])
        right.set_ylabel("MiB sent (2 workers)")
        charts.save(fig, plot)
    return {"scenario": "server-workers", "ratios": ratios, "metrics": {
        "readers": READERS, "connections": CONNECTIONS,
        "image_mib": size // MIB, "runs": results}}
