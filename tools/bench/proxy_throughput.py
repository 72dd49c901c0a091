# SPDX-License-Identifier: Apache-2.0
"""Sequential read and write with nfs-cp: direct vs proxies vs tunnels.

All paths are measured in one run on the same machine: directly against
NFS-Ganesha (the baseline), through the server proxy alone, through the
client -> server proxy chain over tcp, tls and ssh, and OpenSSH's own
``scp`` to and from the DTN (what a user without the proxies would use
over SSH).  The CPU time each proxy process spends per GiB moved does not
depend on what else shares the machine's cores; the CPU the whole machine
spends per GiB on each path (every process on it and the kernel) says how
fast the path could go with every core busy, and so how far apart two
paths can be on this machine whatever they do.
"""

import asyncio
import collections
import contextlib
import functools
import os
import statistics
import subprocess
import tempfile
import time

from gvfs_lab.topology import Lab
from gvfs_openstack.client.nfs import NfsClient
from tools.bench import charts
from tools.bench import cpu
from tools.bench import data

MIB = 1024 * 1024
#: ``[proxy] write_behind_mb`` of the write-behind client proxies.
WRITE_BEHIND_MB = 16


def _timed_copy(src, dst):
    if not dst.startswith("nfs://") and os.path.exists(dst):
        os.unlink(dst)
    start = time.monotonic()
    subprocess.run(["nfs-cp", src, dst], check=True,
                   stdout=subprocess.DEVNULL, timeout=3600)
    return time.monotonic() - start


async def _remove(lab, name):
    port = lab.ganesha.nfs_port
    async with NfsClient("127.0.0.1", port, lab.ganesha.mount_port) as nfs:
        root = await nfs.mount(lab.export)
        await nfs.remove(root, name)


def _make_file(path, size):
    data.random_file(path, size)
    os.sync()


def _scp(lab, src, dst):
    """OpenSSH's own copy to or from the DTN, the ssh baseline."""
    start = time.monotonic()
    subprocess.run(
        ["scp", "-q", "-P", str(lab.sshd.port), "-i", lab.sshd.admin_key,
         "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
         "-o", "UserKnownHostsFile=" + lab.sshd.known_hosts,
         "-c", "aes128-gcm@openssh.com", src, dst],
        check=True, timeout=3600)
    return time.monotonic() - start


def run(quick=False, plot=None):
    size = (128 if quick else 1024) * MIB
    repeat = 1 if quick else 3
    times = collections.defaultdict(lambda: {"write": [], "read": []})
    #: (path, hop) -> CPU seconds the proxy process of that hop spent.
    hop_cpu = collections.defaultdict(float)
    #: path -> op -> CPU seconds the whole machine spent per copy.
    machine = collections.defaultdict(lambda: {"write": [], "read": []})
    #: path -> bytes it moved (both ways).
    moved = collections.Counter()
    rss = []
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work, \
            contextlib.ExitStack() as stack:
        local = os.path.join(work, "payload")
        back = os.path.join(work, "back")
        _make_file(local, size)
        labs = {tunnel: stack.enter_context(
            Lab(os.path.join(work, tunnel), tunnel=tunnel))
            for tunnel in ("tcp", "tls", "ssh")}
        tcp = labs["tcp"]
        paths = [("direct", tcp.direct_url),
                 ("server proxy", tcp.server_proxy_url)]
        paths += [("chain/" + t, lab.client_url) for t, lab in labs.items()]
        lab_of = {"direct": tcp, "server proxy": tcp}
        lab_of.update(("chain/" + t, lab) for t, lab in labs.items())
        hops = {"server proxy": {"server": tcp.server_proxy}}
        hops.update(("chain/" + t, {"client": lab.client_proxy,
                                    "server": lab.server_proxy})
                    for t, lab in labs.items())
        # The same chains with [proxy] write_behind_mb: writes only, the
        # reads are the chain's.
        behind = {t: lab.add_client("client-write-behind",
                                    write_behind_mb=WRITE_BEHIND_MB)
                  for t, lab in labs.items()}
        paths += [("behind/" + t, functools.partial(
            lab.client_url, proxy=behind[t])) for t, lab in labs.items()]
        lab_of.update(("behind/" + t, lab) for t, lab in labs.items())
        hops.update(("behind/" + t, {"client": behind[t],
                                     "server": lab.server_proxy})
                    for t, lab in labs.items())
        ssh = labs["ssh"]
        remote = "%s@127.0.0.1:%s" % (ssh.sshd.user,
                                      os.path.join(ssh.workdir, "scp.bin"))
        behind_paths = {"behind/" + t for t in labs}
        # Rounds interleave the paths so that whatever else the machine
        # does (page cache writeback, other tenants) hits them alike.
        for _ in range(repeat):
            for name, url_of in paths:
                target = url_of("bench.bin")
                before = {hop: cpu.process_seconds(proxy.process.pid)
                          for hop, proxy in hops.get(name, {}).items()}
                ops = [("write", local, target), ("read", target, back)]
                for op, src, dst in ops[:1 if name in behind_paths else 2]:
                    with cpu.Meter() as meter:
                        times[name][op].append(_timed_copy(src, dst))
                    machine[name][op].append(meter.seconds)
                    moved[name] += size
                for hop, proxy in hops.get(name, {}).items():
                    hop_cpu[name, hop] += \
                        cpu.process_seconds(proxy.process.pid) - before[hop]
                if os.path.exists(back):
                    os.unlink(back)
                # Through NFS: removing it behind Ganesha's back would leave
                # a stale entry in Ganesha's directory cache.
                asyncio.run(_remove(lab_of[name], "bench.bin"))
                os.sync()
            for op, src, dst in (("write", local, remote),
                                 ("read", remote, back)):
                with cpu.Meter() as meter:
                    times["scp"][op].append(_scp(ssh, src, dst))
                machine["scp"][op].append(meter.seconds)
            os.unlink(back)
            os.unlink(os.path.join(ssh.workdir, "scp.bin"))
            os.sync()
        for t, lab in labs.items():
            for proxy in (lab.client_proxy, lab.server_proxy, behind[t]):
                rss.append(proxy.stats()["peak_rss_kb"] / 1024)
    rows = {name: {op + "_mbps": size / MIB / statistics.median(t[op])
                   for op in ("write", "read") if t[op]}
            for name, t in times.items()}
    base = rows["direct"]
    print("\nproxy-throughput: %d MiB sequential with nfs-cp (one call in "
          "flight), median of %d; scp is OpenSSH's own copy to and from "
          "the DTN" % (size // MIB, repeat))
    print("%-14s %10s %10s %9s %9s" % ("path", "write MB/s", "read MB/s",
                                       "write x", "read x"))
    for name, row in rows.items():
        print("%-14s %10s %10s %9s %9s" % ((name,) + tuple(
            "%.1f" % row[op + "_mbps"] if op + "_mbps" in row else "-"
            for op in ("write", "read")) + tuple(
            "%.2f" % (row[op + "_mbps"] / base[op + "_mbps"])
            if op + "_mbps" in row else "-" for op in ("write", "read"))))
    print("behind/*: the chain's client proxy with [proxy] write_behind_mb "
          "= %d (UNSTABLE WRITEs answered before the server has them)"
          % WRITE_BEHIND_MB)
    per_gib = {(name, hop): cpu.per_gib(seconds, moved[name])
               for (name, hop), seconds in hop_cpu.items()}
    print("proxy CPU seconds per GiB moved, per hop (independent of what "
          "else shares the cores):")
    for (name, hop), value in sorted(per_gib.items()):
        print("  %-14s %-7s %6.2f" % (name, hop, value))
    print("proxy peak RSS: %.1f MB" % max(rss))
    machine_per_gib = {
        name: {op: cpu.per_gib(statistics.median(seconds), size)
               for op, seconds in ops.items() if seconds}
        for name, ops in machine.items()}
    _print_ceilings(machine_per_gib)
    ratios = {}
    for name, key in (("chain/tcp", "tcp_chain"), ("chain/tls", "tls_chain"),
                      ("chain/ssh", "ssh_chain"),
                      ("server proxy", "server_proxy")):
        for op in ("read", "write"):
            ratios["%s_%s_vs_direct" % (op, key)] = \
                rows[name][op + "_mbps"] / base[op + "_mbps"]
    for op in ("read", "write"):
        ratios["%s_ssh_chain_vs_scp" % op] = \
            rows["chain/ssh"][op + "_mbps"] / rows["scp"][op + "_mbps"]
    for t in ("tcp", "tls", "ssh"):
        ratios["write_%s_write_behind_vs_direct" % t] = \
            rows["behind/" + t]["write_mbps"] / base["write_mbps"]
    ratios["write_ssh_write_behind_vs_scp"] = \
        rows["behind/ssh"]["write_mbps"] / rows["scp"]["write_mbps"]
    metrics = {"size_mib": size // MIB, "repeat": repeat,
               "cores": os.cpu_count(),
               "proxy_peak_rss_mb": max(rss),
               "proxy_cpu_s_per_gib_per_hop": max(per_gib.values())}
    for name, ops in machine_per_gib.items():
        for op, value in ops.items():
            key = name.replace(" ", "_").replace("/", "_")
            metrics["%s_%s_machine_cpu_s_per_gib" % (key, op)] = value
    for op in ("read", "write"):
        # What ssh_chain_vs_scp can reach where both are CPU-bound.
        metrics["%s_ssh_chain_vs_scp_cpu_bound" % op] = \
            machine_per_gib["scp"][op] / machine_per_gib["chain/ssh"][op]
    for (name, hop), value in per_gib.items():
        metrics["%s_%s_cpu_s_per_gib" % (
            name.replace(" ", "_").replace("/", "_"), hop)] = value
    for name, row in rows.items():
        for key, value in row.items():
            metrics["%s_%s" % (name.replace(" ", "_").replace("/", "_"),
                               key)] = value
    if plot:
        _plot(rows, plot)
    return {"scenario": "proxy-throughput", "metrics": metrics,
            "ratios": ratios}


def _print_ceilings(machine_per_gib):
    """Each path's CPU per GiB on the whole machine, and what it allows.

    A path needing C CPU seconds per GiB moves at most cores / C GiB/s
    however it is built; two paths bound that way compare as the inverse
    of their C.
    """
    print("machine CPU seconds per GiB moved (every process and the "
          "kernel), and the rate that allows on %d cores:"
          % os.cpu_count())
    print("%-14s %10s %10s %12s %12s" % ("path", "write", "read",
                                         "write MB/s", "read MB/s"))
    for name, ops in machine_per_gib.items():
        print("%-14s %10s %10s %12s %12s" % ((name,) + tuple(
            "%.2f" % ops[op] if op in ops else "-"
            for op in ("write", "read")) + tuple(
            "%.0f" % cpu.ceiling_mib_s(ops[op]) if op in ops else "-"
            for op in ("write", "read"))))


def _plot(rows, path):
    plt = charts.pyplot()
    names = list(rows)
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.4
    xs = range(len(names))
    ax.bar([x - width / 2 for x in xs],
           [rows[n]["write_mbps"] for n in names], width, label="write")
    ax.bar([x + width / 2 for x in xs],
           [rows[n].get("read_mbps", 0) for n in names], width, label="read")
    ax.set_xticks(list(xs), names)
    ax.set_ylabel("MB/s")
    ax.set_title("gvfs-proxy sequential throughput (nfs-cp)")
    ax.legend()
    charts.save(fig, path)
