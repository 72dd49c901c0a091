# SPDX-License-Identifier: Apache-2.0
"""``gvfs-proxy warm`` of a whole image against the WAN link's rate.

One DTN across the lab's shared WAN link (50 ms RTT, 200 Mbit/s, as
``boot``), an image of incompressible bytes on its export, and a client
proxy with an empty cache on this side.  The baseline, measured first in
the same run, is the link itself: the same number of bytes sent by one
TCP connection through it to a sink.  Then the image is warmed into a
cold proxy with its default ``[cache] prefetch_window_kb`` (a window of
READs in flight), and, for comparison, into another cold proxy whose
window holds one READ of ``max_fetch`` (1 MiB) -- what warming did
before it kept a window.  ``warm_vs_link`` is the first's rate over the
link's.
"""

import os
import random
import tempfile
import time

from gvfs_lab.topology import Lab
from gvfs_openstack.proxy import control
from tools.bench import charts
from tools.bench import wan_link

MIB = 1024 * 1024
CACHE = {"capacity_mb": 2048, "consistency": "immutable"}


def _image(path, size):
    rng = random.Random(7)
    with open(path, "wb") as f:
        for _ in range(size // MIB):
            f.write(rng.randbytes(MIB))


def _warm(proxy, path):
    """MiB/s of one warm of ``path`` into ``proxy``, as it reports."""
    start = time.monotonic()
    done = control.request(proxy.control_socket, "warm", timeout=900,
                           path=path, rate_mib=10000)
    elapsed = time.monotonic() - start
    if done["fetched"] != done["size"]:
        raise RuntimeError("warm fetched %d of %d bytes"
                           % (done["fetched"], done["size"]))
    return done["size"] / elapsed / MIB


def run(quick=False, plot=None, rtt_ms=50, rate_mbit=200):
    size = (128 if quick else 512) * MIB
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        with Lab(os.path.join(work, "lab"), tunnel="tcp",
                 wan=(rtt_ms, rate_mbit), cache=CACHE) as lab:
            path = os.path.join(lab.export, "golden.img")
            _image(path, size)
            sink = wan_link._Sink()
            try:
                port = lab.shared_link.add_link("sink", sink.port)
                link = size / wan_link._send_all(lab.shared_link.host, port,
                                                 size, 1) / MIB
            finally:
                sink.shutdown()
            windowed = _warm(lab.client_proxy, path)
            one = lab.add_client("one-read", cache=dict(
                CACHE, prefetch_window_kb=1024))
            single = _warm(one, path)
    rows = [("the link: one TCP stream", link),
            ("warm, default window of READs in flight", windowed),
            ("warm, one 1 MiB READ in flight", single)]
    print("\nwarm: %d MiB of incompressible bytes across the WAN link "
          "(%d ms RTT, %d Mbit/s = %.1f MiB/s nominal)"
          % (size // MIB, rtt_ms, rate_mbit, rate_mbit * 1e6 / 8 / MIB))
    print("%-44s %10s" % ("", "MiB/s"))
    for label, mibps in rows:
        print("%-44s %10.1f" % (label, mibps))
    ratios = {"warm_vs_link": windowed / link,
              "one_read_warm_vs_link": single / link}
    for name, value in ratios.items():
        print("%-34s %6.2f" % (name, value))
    if plot:
        plt = charts.pyplot()
        fig, ax = plt.subplots(figsize=(7, 3))
        ax.barh([r[0] for r in rows], [r[1] for r in rows])
        ax.invert_yaxis()
        ax.set_xlabel("MiB/s")
        charts.save(fig, plot)
    return {"scenario": "warm", "ratios": ratios, "metrics": {
        "rtt_ms": rtt_ms, "rate_mbit": rate_mbit, "bytes": size,
        "mibps": {label: mibps for label, mibps in rows}}}
