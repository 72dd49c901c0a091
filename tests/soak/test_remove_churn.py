# SPDX-License-Identifier: Apache-2.0
"""Files created and removed through a caching client proxy cost nothing.

The soak's clients create, write, read and remove files all the time;
the client proxy once kept what it knew of every file it saw (its
attributes, its export) until 65,536 of them, and its RSS grew in a
straight line.  Here ``GVFS_CHURN_CYCLES`` (default 20,000) cycles of
CREATE, WRITE, GETATTR, READ, REMOVE, by ``GVFS_CHURN_CLIENTS`` (8)
concurrent clients, on the lab with real Ganesha: once the first fifth
is done (allocator arenas grown, the cache's bank open) the client
proxy's RSS must stay flat.
"""

import asyncio
import os
import time

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient

MIB = 1024 * 1024
CYCLES = int(os.environ.get("GVFS_CHURN_CYCLES", "20000"))
CLIENTS = int(os.environ.get("GVFS_CHURN_CLIENTS", "8"))
CACHE = {"capacity_mb": 64, "write_policy": "writethrough",
         "coherence_window": 3.0}
#: Growth allowed after the warm-up: a proxy that kept 2 KiB per removed
#: file grew by 30 MiB over 16,000 cycles.
SLACK = 6 * MIB


def rss(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS for %d" % pid)


def test_file_churn_does_not_grow_the_client_proxy(lab_factory):
    lab = lab_factory("tcp", cache=CACHE)
    pid = lab.client_proxy.process.pid
    port = lab.client_proxy.port
    data = os.urandom(8192)
    samples = []

    async def main():
        done = 0
        nfs = NfsClient("127.0.0.1", port, port, uid=FILE_UID,
                        gid=FILE_GID, window=2 * CLIENTS, timeout=120)
        async with nfs:
            await nfs.mount(lab.export)
            dir_fh = await nfs.mkdir(nfs.root, "churn")

            async def client(first):
                nonlocal done
                for i in range(first, CYCLES, CLIENTS):
                    name = "f%07d" % i
                    fh = await nfs.create(dir_fh, name)
                    await nfs.write(fh, 0, data)
                    await nfs.getattr(fh)
                    assert bytes((await nfs.read(fh, 0, len(data))).data) \
                        == data
                    await nfs.remove(dir_fh, name)
                    done += 1
                    if done % (CYCLES // 10) == 0:
                        samples.append((done, time.monotonic(), rss(pid)))

            await asyncio.gather(*(client(c) for c in range(CLIENTS)))

    started = time.monotonic()
    samples.append((0, started, rss(pid)))
    asyncio.run(main())
    print("\n[churn] %d cycles by %d clients; client proxy RSS:" % (
        CYCLES, CLIENTS))
    for done, when, size in samples:
        print("  %6d cycles %6.1fs  %6.1f MiB" % (done, when - started,
                                                  size / MIB))
    warm = next(size for done, _, size in samples if done >= CYCLES // 5)
    assert samples[-1][2] - warm <= SLACK, \
        "the client proxy grew by %.1f MiB from cycle %d to %d" % (
            (samples[-1][2] - warm) / MIB, CYCLES // 5, CYCLES)
    assert os.listdir(os.path.join(lab.export, "churn")) == []
