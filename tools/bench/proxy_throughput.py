"""Sequential read and write with nfs-cp: direct vs proxies vs tunnels.

All paths are measured in one run on the same machine: directly against
NFS-Ganesha (the baseline), through the server proxy alone, and through
the client -> server proxy chain over tcp, tls and ssh.
"""

import os
import statistics
import subprocess
import tempfile
import time

from gvfs_openstack.lab.topology import Lab

MIB = 1024 * 1024


def _timed_copy(src, dst):
    if not dst.startswith("nfs://") and os.path.exists(dst):
        os.unlink(dst)
    start = time.monotonic()
    subprocess.run(["nfs-cp", src, dst], check=True,
                   stdout=subprocess.DEVNULL, timeout=3600)
    return time.monotonic() - start


def _measure(name, url_of, local, size, back, repeat):
    """Median MB/s of ``repeat`` writes and reads (one client, nfs-cp)."""
    writes, reads = [], []
    for i in range(repeat):
        target = url_of("bench-%s-%d.bin" % (name, i))
        writes.append(_timed_copy(local, target))
        reads.append(_timed_copy(target, back))
        os.unlink(back)
    return {"write_mbps": size / MIB / statistics.median(writes),
            "read_mbps": size / MIB / statistics.median(reads)}


def _make_file(path, size):
    with open(path, "wb") as f:
        for _ in range(size // (16 * MIB)):
            f.write(os.urandom(16 * MIB))


def run(quick=False, plot=None):
    size = (128 if quick else 1024) * MIB
    repeat = 1 if quick else 3
    rows = {}
    rss = []
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        local = os.path.join(work, "payload")
        back = os.path.join(work, "back")
        _make_file(local, size)
        for tunnel in ("tcp", "tls", "ssh"):
            with Lab(os.path.join(work, tunnel), tunnel=tunnel) as lab:
                if tunnel == "tcp":
                    rows["direct"] = _measure("direct", lab.direct_url,
                                              local, size, back, repeat)
                    rows["server proxy"] = _measure(
                        "server", lab.server_proxy_url, local, size, back,
                        repeat)
                rows["chain/" + tunnel] = _measure(
                    tunnel, lab.client_url, local, size, back, repeat)
                for proxy in (lab.client_proxy, lab.server_proxy):
                    rss.append(proxy.stats()["peak_rss_kb"] / 1024)
    base = rows["direct"]
    print("\nproxy-throughput: %d MiB sequential with nfs-cp, median of %d"
          % (size // MIB, repeat))
    print("%-14s %10s %10s %9s %9s" % ("path", "write MB/s", "read MB/s",
                                       "write x", "read x"))
    for name, row in rows.items():
        print("%-14s %10.1f %10.1f %9.2f %9.2f" % (
            name, row["write_mbps"], row["read_mbps"],
            row["write_mbps"] / base["write_mbps"],
            row["read_mbps"] / base["read_mbps"]))
    print("proxy peak RSS: %.1f MB" % max(rss))
    ratios = {}
    for tunnel in ("tcp", "tls", "ssh"):
        row = rows["chain/" + tunnel]
        ratios["read_%s_chain_vs_direct" % tunnel] = \
            row["read_mbps"] / base["read_mbps"]
        ratios["write_%s_chain_vs_direct" % tunnel] = \
            row["write_mbps"] / base["write_mbps"]
    ratios["read_server_proxy_vs_direct"] = \
        rows["server proxy"]["read_mbps"] / base["read_mbps"]
    ratios["write_server_proxy_vs_direct"] = \
        rows["server proxy"]["write_mbps"] / base["write_mbps"]
    metrics = {"size_mib": size // MIB, "proxy_peak_rss_mb": max(rss)}
    for name, row in rows.items():
        for key, value in row.items():
            metrics["%s_%s" % (name.replace(" ", "_").replace("/", "_"),
                               key)] = value
    if plot:
        _plot(rows, plot)
    return {"scenario": "proxy-throughput", "metrics": metrics,
            "ratios": ratios}


def _plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rows)
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.4
    xs = range(len(names))
    ax.bar([x - width / 2 for x in xs],
           [rows[n]["write_mbps"] for n in names], width, label="write")
    ax.bar([x + width / 2 for x in xs],
           [rows[n]["read_mbps"] for n in names], width, label="read")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("MB/s")
    ax.set_title("gvfs-proxy sequential throughput (nfs-cp)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    print("plot written to %s" % path)
