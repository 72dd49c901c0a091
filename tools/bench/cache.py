# SPDX-License-Identifier: Apache-2.0
"""The client cache over an emulated WAN, against plain NFS over it.

One lab, one run: the link between the client side and the DTN is an
emulated WAN link (gvfs_lab/wan.py) with a latency and a rate that every
connection crossing it shares.  Measured with
``nfs-cp`` (one call in flight, like a VM's sequential boot read):

* sequential read of one file: straight to Ganesha on loopback (the
  local-disk baseline), plain NFS over the WAN link (no proxy cache), and
  through a caching client proxy cold and then warm;
* 8 concurrent readers on 8 fresh client proxies behind one warm LAN proxy
  (second-level cache), against 8 readers straight over the WAN link;
* writing one file with the project's NFS client (8 UNSTABLE 1 MiB WRITEs
  in flight, one COMMIT at the end, as a kernel client flushing a file):
  the time until the COMMIT reply through a write-through proxy, then
  through a write-back proxy, and the write-back proxy's flush on its own.

The 8 plain readers straight over the WAN share its rate as the 8 leaf
proxies' misses would, as on a real WAN.
"""

import asyncio
import os
import subprocess
import tempfile
import time

from gvfs_lab import ganesha
from gvfs_lab.topology import Lab
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.proxy import control
from tools.bench import charts
from tools.bench import data

MIB = 1024 * 1024


def _read(url, dest):
    start = time.monotonic()
    subprocess.run(["nfs-cp", url, dest], check=True,
                   stdout=subprocess.DEVNULL, timeout=3600)
    elapsed = time.monotonic() - start
    os.unlink(dest)
    return elapsed


def _parallel_read(urls, dest_prefix):
    start = time.monotonic()
    procs = [subprocess.Popen(["nfs-cp", url, "%s.%d" % (dest_prefix, i)],
                              stdout=subprocess.DEVNULL)
             for i, url in enumerate(urls)]
    for proc in procs:
        if proc.wait(timeout=3600) != 0:
            raise RuntimeError("nfs-cp failed")
    elapsed = time.monotonic() - start
    for i in range(len(urls)):
        os.unlink("%s.%d" % (dest_prefix, i))
    return elapsed


def _write(lab, name, size):
    """Seconds until the writer of ``size`` bytes has its COMMIT reply."""
    block = os.urandom(16 * MIB)

    async def scenario():
        port = lab.client_proxy.port
        async with NfsClient("127.0.0.1", port, port,
                             timeout=3600) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.create(nfs.root, name)
            start = time.monotonic()
            await nfs.write_file(fh, (block for _ in range(size // len(
                block))), commit_every=size)
            return time.monotonic() - start

    return asyncio.run(scenario())


def _flush(lab):
    start = time.monotonic()
    control.request(lab.client_proxy.control_socket, "flush", timeout=3600)
    return time.monotonic() - start


def run(quick=False, plot=None, rtt_ms=50, rate_mbit=200):
    size = (64 if quick else 1024) * MIB
    reader_size = (16 if quick else 256) * MIB
    readers = 8
    link_mbps = rate_mbit / 8.0 * 1e6 / MIB
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        src = os.path.join(work, "image")
        data.random_file(src, size)
        small = os.path.join(work, "small")
        data.random_file(small, reader_size)
        os.sync()
        dest = os.path.join(work, "out")
        cache = {"capacity_mb": 2 * size // MIB + 64}
        with Lab(os.path.join(work, "lab"), tunnel="tcp",
                 wan=(rtt_ms, rate_mbit), cache=cache) as lab:
            link = lab.shared_link
            plain_port = link.add_link("plain", lab.server_proxy.port)
            for path in (src, small):
                subprocess.run(["nfs-cp", path, lab.server_proxy_url(
                    os.path.basename(path))], check=True,
                    stdout=subprocess.DEVNULL)

            def plain(name):
                return ganesha.nfs_url(lab.export, name, plain_port,
                                       plain_port, host=link.host)

            times = {
                "loopback direct": _read(lab.direct_url("image"), dest),
                "plain NFS over WAN": _read(plain("image"), dest),
                "GVFS cold": _read(lab.client_url("image"), dest),
                "GVFS warm": _read(lab.client_url("image"), dest),
            }
            rss = [lab.client_proxy.stats()["peak_rss_kb"] / 1024]
            # Warm the LAN proxy (the lab's client proxy), then read from
            # 8 fresh leaf proxies at once.
            _read(lab.client_url("small"), dest)
            leaves = [lab.add_leaf("leaf%d" % i) for i in range(readers)]
            lan = _parallel_read([lab.leaf_url(leaf, "small")
                                  for leaf in leaves], dest)
            wan = _parallel_read([plain("small")] * readers, dest)
            rss += [leaf.stats()["peak_rss_kb"] / 1024 for leaf in leaves]
            rss.append(lab.client_proxy.stats()["peak_rss_kb"] / 1024)
            writes = {"write-through": _write(lab, "through", size)}
            rss.append(lab.client_proxy.stats()["peak_rss_kb"] / 1024)
            lab.restart_client_proxy(cache={
                "write_policy": "writeback", "writeback_idle_seconds": 0,
                "writeback_flush_mb": 2 * size // MIB,
                "writeback_max_mb": 2 * size // MIB})
            writes["write-back"] = _write(lab, "back", size)
            writes["write-back flush"] = _flush(lab)
            rss.append(lab.client_proxy.stats()["peak_rss_kb"] / 1024)
            rss.append(lab.server_proxy.stats()["peak_rss_kb"] / 1024)
    mbps = {name: size / MIB / t for name, t in times.items()}
    lan_mbps = readers * reader_size / MIB / lan
    wan_mbps = readers * reader_size / MIB / wan
    print("\ncache: %d MiB sequential read with nfs-cp; WAN link %d ms RTT, "
          "%d Mbit/s (%.1f MiB/s)" % (size // MIB, rtt_ms, rate_mbit,
                                      link_mbps))
    print("%-22s %10s %8s" % ("path", "MiB/s", "seconds"))
    for name, value in mbps.items():
        print("%-22s %10.1f %8.1f" % (name, value, times[name]))
    print("\n%d readers x %d MiB: behind a warm LAN proxy %.1f MiB/s, "
          "straight over the WAN %.1f MiB/s" % (
              readers, reader_size // MIB, lan_mbps, wan_mbps))
    print("\n%d MiB written, time until the COMMIT reply:" % (size // MIB))
    print("%-22s %10s %8s" % ("path", "MiB/s", "seconds"))
    for name, seconds in writes.items():
        print("%-22s %10.1f %8.1f" % (name, size / MIB / seconds, seconds))
    print("proxy peak RSS: %.1f MB" % max(rss))
    ratios = {
        "cold_vs_link": mbps["GVFS cold"] / link_mbps,
        "warm_vs_local": mbps["GVFS warm"] / mbps["loopback direct"],
        "cold_vs_plain_wan": mbps["GVFS cold"] / mbps["plain NFS over WAN"],
        "lan_aggregate_speedup": lan_mbps / wan_mbps,
        "writeback_speedup": writes["write-through"] / writes["write-back"],
    }
    for name, value in ratios.items():
        print("%-24s %6.2f" % (name, value))
    metrics = {"size_mib": size // MIB, "rtt_ms": rtt_ms,
               "rate_mbit": rate_mbit, "link_mibps": link_mbps,
               "proxy_peak_rss_mb": max(rss),
               "lan_aggregate_mibps": lan_mbps,
               "wan_aggregate_mibps": wan_mbps,
               "write_through_seconds": writes["write-through"],
               "write_back_seconds": writes["write-back"],
               "write_back_flush_seconds": writes["write-back flush"]}
    metrics.update(("%s_mibps" % k.replace(" ", "_").lower(), v)
                   for k, v in mbps.items())
    if plot:
        _plot(mbps, lan_mbps, wan_mbps, link_mbps, writes, plot)
    return {"scenario": "cache", "metrics": metrics, "ratios": ratios}


def _plot(mbps, lan_mbps, wan_mbps, link_mbps, writes, path):
    plt = charts.pyplot()
    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(14, 4))
    left.bar(list(mbps), list(mbps.values()),
             color=["grey", "tab:red", "tab:blue", "tab:green"])
    left.axhline(link_mbps, linestyle="--", color="black",
                 label="WAN link rate")
    left.set_ylabel("MiB/s")
    left.set_title("one sequential reader")
    left.tick_params(axis="x", labelrotation=20)
    left.legend()
    middle.bar(["8 over WAN", "8 behind LAN proxy"], [wan_mbps, lan_mbps],
               color=["tab:red", "tab:green"])
    middle.set_title("aggregate of 8 readers")
    middle.set_ylabel("MiB/s")
    right.bar(list(writes), list(writes.values()),
              color=["tab:red", "tab:green", "tab:olive"])
    right.set_title("writing one file: seconds to COMMIT")
    right.set_ylabel("seconds")
    right.tick_params(axis="x", labelrotation=20)
    charts.save(fig, path)
