# SPDX-License-Identifier: Apache-2.0
"""A boot storm: many compute hosts boot one golden image at once.

One DTN (NFS-Ganesha and a server proxy) across an emulated WAN (50 ms
RTT, 200 Mbit/s shared, as the ``boot`` benchmark); on the near side a
site of N compute hosts (:mod:`gvfs_lab.site`), each a network namespace
with a client proxy, its cache and a FUSE mount, on 1 Gbit/s LAN ports,
either each across the WAN to the DTN (``direct``) or behind k LAN
proxies (one per LAN segment, their ports 1 Gbit/s too; with two or
more, a site proxy in front of them crosses the WAN for all).  Every case
starts with empty caches everywhere but on the DTN, where the image's
boot profile sits beside it, as after its first boot anywhere.

What each host reads is a real boot: the lab's test guest (one O_DIRECT
64 KiB read at a time, scattered) booted once under QEMU from a local
proxy at the start of the run, whose profile records what it read and
when.  Every host replays that boot through its own mount at once
(:mod:`gvfs_lab.replay`: the guest's order and pacing, its reads
``O_DIRECT`` as QEMU's), so N reaches 32 on two cores without 32
guests.  The baseline is one host alone behind one LAN proxy in the
same run.  Figures:

* ``stormN_lanK_last_vs_single``: when the last of N hosts behind K LAN
  proxies finished, against the single host; ``storm16_lan_last_vs_
  single`` the best of them for 16 hosts (the target: how many LAN
  proxies is a choice, and one 1 Gbit/s port cannot carry 16 boots in
  the time of one);
* ``storm_wan_bytes_vs_boot_set``: bytes the DTN's server proxy sent per
  storm behind LAN proxies against the boot set, the worst case (each
  block should cross the WAN once, whatever N and k);
* ``model_error_vs_lab``: the largest relative error of the storm model
  (:mod:`tools.bench.storm_model`, its costs measured in this run)
  against the lab's last boot, over every case;
* the ``server-workers`` benchmark's figures, run after the storm: how
  evenly two server proxy workers share many client connections, and
  what spreading costs in CPU.

Each case also records the CPU seconds each tier spent (hosts' proxies
and mounts, LAN proxies, the server proxy, the DTN's NFS server) and the
bytes each sent.
"""

import dataclasses
import os
import shutil
import statistics
import tempfile

from gvfs_lab import guest
from gvfs_lab import guestvm
from gvfs_lab import libvirt
from gvfs_lab import process
from gvfs_lab import replay
from gvfs_lab import site as site_lab
from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_lab.topology import Lab
from gvfs_openstack.sidecar import profile
from tools.bench import boot
from tools.bench import charts
from tools.bench import cpu
from tools.bench import server_workers
from tools.bench import storm_model

MIB = 1024 * 1024
RTT_MS = 50
RATE_MBIT = 200
LAN_MBIT = 1000
IMAGE = "golden.qcow2"
#: Each host's and LAN proxy's ``[cache]``: the boot benchmark's.
CACHE = boot.CACHE
#: The recording's proxy writes the profile soon after the boot.
RECORDING_CACHE = dict(boot.CACHE, profile_quiet_seconds=2,
                       stream_images=False)
#: The single host's boot is measured this many times (median).
SINGLE_RUNS = 3


def _place(export, source, recorded=None, profile_bytes=None):
    """``source`` as the export's ``images/IMAGE``, owned by the DTN.

    With ``recorded`` (its :class:`~profile.Profile`), the image gets
    the mtime the profile was made for, and the profile sits beside it.
    """
    images = os.path.join(export, "images")
    os.makedirs(images, exist_ok=True)
    path = os.path.join(images, IMAGE)
    shutil.copyfile(source, path)
    placed = [images, path]
    if recorded is not None:
        os.utime(path, ns=(recorded.mtime_ns, recorded.mtime_ns))
        beside = os.path.join(images, profile.profile_name(IMAGE))
        with open(beside, "wb") as f:
            f.write(profile_bytes)
        placed.append(beside)
    for placed_path in placed:
        os.chown(placed_path, FILE_UID, FILE_GID)
    return path


def record_boot(work, golden):
    """Boot ``golden`` once from a local proxy; its profile, and bytes.

    The guest under QEMU (TCG) reads its disk's backing file on a GVFS
    mount through a client proxy on this machine, with no WAN: the gaps
    between its reads are the guest's own work.  The proxy writes the
    boot's profile beside the image.
    """
    with libvirt.Libvirt(os.path.join(work, "libvirt")) as hv, \
            Lab(os.path.join(work, "recording"), tunnel="tcp",
                cache=RECORDING_CACHE) as lab:
        _place(lab.export, golden.qcow2)
        mount = lab.mount(os.path.join(hv.mounts_dir, "gvfs"),
                          read_cache_mb=boot.READ_CACHE_MB)
        overlay = guestvm.make_overlay(
            os.path.join(mount.mountpoint, "images", IMAGE), "qcow2",
            os.path.join(work, "recording.qcow2"))
        domain = guestvm.Domain(hv, work, "recording", golden, overlay)
        try:
            marker = domain.wait_for_marker(boot.MARKER_TIMEOUT)
        finally:
            domain.destroy()
        if marker.digest != golden.expected_digest:
            raise process.LabError("the recorded guest read other bytes")
        beside = os.path.join(lab.export, "images",
                              profile.profile_name(IMAGE))
        process.wait_until(lambda: os.path.exists(beside),
                           "the recorded boot's profile", timeout=120)
        with open(beside, "rb") as f:
            data = f.read()
    recorded = profile.parse(data)
    trace = replay.Trace.from_profile(recorded)
    print("recorded boot: %d blocks (%.1f MiB) over %.1f s; the guest's "
          "boot reads took %.1f s of its uptime"
          % (len(trace.reads), trace.bytes / MIB, trace.seconds,
             marker.uptime - marker.io_start))
    return recorded, data


def _tiers(lab, site):
    """PIDs of each tier's processes."""
    return {
        "server": server_workers.server_pids(lab),
        "nfs": [lab.ganesha.process.pid],
        "lan": [p.process.pid for p in site.lan_proxies] + (
            [site.site_proxy.process.pid] if site.site_proxy else []),
        "host_proxies": [h.proxy.process.pid for h in site.hosts],
        "mounts": [h.mount.process.pid for h in site.hosts],
    }


def _cpu(pids):
    return {tier: sum(cpu.process_seconds(p) for p in ps)
            for tier, ps in pids.items()}


def _served(stats):
    """Bytes a server proxy sent, bulk replies counted before zstd."""
    return stats["downstream_bytes_out"] - stats.get("bulk_wire_bytes", 0) \
        + stats.get("bulk_raw_bytes", 0)


def _storm(lab, trace, expected, hosts, lan_proxies):
    """N hosts replay the boot at once; what each took, and the costs."""
    with site_lab.Site(lab, hosts=hosts, lan_proxies=lan_proxies,
                       cache=CACHE, mount_options={
                           "read_cache_mb": boot.READ_CACHE_MB},
                       lan_rate_mbit=LAN_MBIT,
                       host_rate_mbit=LAN_MBIT) as site:
        pids = _tiers(lab, site)
        cpu_before = _cpu(pids)
        before = lab.server_proxy.stats()
        link_before = lab.shared_link.bytes_sent()
        with cpu.Meter() as machine:
            results = replay.replay_together(
                [h.path(os.path.join("images", IMAGE)) for h in site.hosts],
                trace)
        after = lab.server_proxy.stats()
        wan_bytes = after["downstream_bytes_out"] - \
            before["downstream_bytes_out"]
        wan_raw_bytes = _served(after) - _served(before)
        link_bytes = lab.shared_link.bytes_sent() - link_before
        cpu_after = _cpu(pids)
        lan_stats = [p.stats() for p in site.lan_proxies]
        lan_bytes = sum(s["downstream_bytes_out"] for s in lan_stats)
    wrong = [i for i, r in enumerate(results) if r.digest != expected]
    if wrong:
        raise process.LabError("hosts %s read other bytes" % wrong)
    seconds = sorted(r.seconds for r in results)
    return {
        "hosts": hosts, "lan_proxies": lan_proxies,
        "seconds": [r.seconds for r in results],
        "last": seconds[-1], "median": statistics.median(seconds),
        "first": seconds[0],
        "read_seconds": statistics.median(r.read_seconds for r in results),
        "wan_bytes": wan_bytes, "wan_raw_bytes": wan_raw_bytes,
        "link_bytes": link_bytes,
        "lan_bytes": lan_bytes,
        "lan_fetched": [{key: s.get(key, 0) for key in (
            "cache_misses", "cache_collapsed", "cache_readahead_blocks",
            "prefetch_blocks", "upstream_bytes_in")} for s in lan_stats],
        "cpu": {tier: cpu_after[tier] - cpu_before[tier]
                for tier in cpu_before},
        #: Every process's and the kernel's, the replays' own included.
        "machine_cpu": machine.seconds,
    }


def _case(lab, trace, expected, hosts, lan_proxies):
    found = _storm(lab, trace, expected, hosts, lan_proxies)
    print("%d hosts, %s: last done at %.2f s" % (
        hosts, _label(lan_proxies), found["last"]), flush=True)
    return found


def _cases(quick):
    if quick:
        return [(8, 0), (8, 1), (16, 1), (16, 2), (16, 4)]
    return [(n, k) for n in (8, 16, 32) for k in (0, 1, 2, 4)]


def _label(lan_proxies):
    return "direct" if lan_proxies == 0 else "%d LAN" % lan_proxies


def run(quick=False, plot=None):
    golden = guest.golden()
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        recorded, profile_bytes = record_boot(work, golden)
        trace = replay.Trace.from_profile(recorded)
        with Lab(os.path.join(work, "dtn"), tunnel="tcp",
                 wan=(RTT_MS, RATE_MBIT)) as lab:
            path = _place(lab.export, golden.qcow2, recorded, profile_bytes)
            expected = replay.expected_digest(path, trace)
            singles = [_case(lab, trace, expected, 1, 1)
                       for _ in range(1 if quick else SINGLE_RUNS)]
            storms = [_case(lab, trace, expected, n, k)
                      for n, k in _cases(quick)]
    single = statistics.median(s["last"] for s in singles)
    print("\nstorm: hosts replaying one recorded boot (%d blocks, %.1f MiB, "
          "%.1f s recorded) at once; WAN %d ms / %d Mbit/s, LAN ports "
          "%d Mbit/s" % (len(trace.reads), trace.bytes / MIB, trace.seconds,
                         RTT_MS, RATE_MBIT, LAN_MBIT))
    cores = os.cpu_count()
    print("%-6s %-8s %8s %8s %8s %9s %9s %8s %8s %9s" % (
        "hosts", "behind", "first s", "median s", "last s", "last/one",
        "WAN MiB", "WAN/set", "CPU s", "CPU/cores"))
    for s in singles[-1:] + storms:
        print("%-6d %-8s %8.2f %8.2f %8.2f %9.2f %9.1f %8.2f %8.1f %9.2f" % (
            s["hosts"], _label(s["lan_proxies"]), s["first"], s["median"],
            s["last"], s["last"] / single, s["wan_bytes"] / MIB,
            s["wan_bytes"] / trace.bytes, s["machine_cpu"],
            s["machine_cpu"] / cores))
    ratios = {"storm%d_%s_last_vs_single" % (
        s["hosts"], "direct" if not s["lan_proxies"] else
        "lan%d" % s["lan_proxies"]): s["last"] / single for s in storms}
    behind_lan = [s for s in storms if s["lan_proxies"]]
    sixteen = [s for s in behind_lan if s["hosts"] == 16]
    if sixteen:
        ratios["storm16_lan_last_vs_single"] = min(
            s["last"] for s in sixteen) / single
    ratios["storm_wan_bytes_vs_boot_set"] = max(
        s["wan_bytes"] / trace.bytes for s in behind_lan)
    metrics = {
        "trace_blocks": len(trace.reads), "trace_bytes": trace.bytes,
        "trace_seconds": trace.seconds, "rtt_ms": RTT_MS,
        "wan_mbit": RATE_MBIT, "lan_mbit": LAN_MBIT, "cores": cores,
        "singles": singles, "storms": storms,
        "trace": [list(read) for read in trace.reads]}
    costs, modelled = storm_model.validate(metrics, trace.reads)
    ratios["model_error_vs_lab"] = _print_model(costs, modelled)
    metrics["model"] = {"costs": dataclasses.asdict(costs), "last": [
        m for _, m, _ in modelled]}
    metrics["sizing"] = _print_sizing(costs, trace.reads)
    print()
    workers = server_workers.run(quick=quick, plot=None)
    ratios.update(workers["ratios"])
    metrics["server_workers"] = workers["metrics"]
    print()
    for name, value in sorted(ratios.items()):
        print("%-36s %6.2f" % (name, value))
    if plot:
        _plot(plot, single, storms, trace, modelled, metrics["sizing"])
    return {"scenario": "storm", "ratios": ratios, "metrics": metrics}


def _print_sizing(costs, trace):
    """The model's answers for a cloud (``storm_model.CLOUD``)."""
    cloud = storm_model.CLOUD
    print("\nsizing a cloud with the model: WAN %d Mbit/s, %d ms; LAN "
          "ports %d Mbit/s; %d cores per host, %d per LAN proxy, %d per "
          "DTN worker" % (cloud["wan_mbit"], cloud["wan_rtt"] * 1000,
                          cloud["lan_mbit"], cloud["host_cores"],
                          cloud["lan_cores"], cloud["dtn_cores"]))
    hosts, single, host_rows = storm_model.hosts_per_lan_proxy(costs, trace)
    print("one boot alone: %.2f s; hosts one LAN proxy serves before the "
          "last boot grows by a quarter: %d" % (single, hosts))
    print("  " + ", ".join("%d: %.1f s" % row for row in host_rows))
    workers, _, _ = storm_model.hosts_per_lan_proxy(
        costs, trace, lan_cores=2, lan_workers=2)
    print("  with two cores and two processes sharing its cache (client-"
          "role workers, which a LAN proxy does not have): %d" % workers)
    lans, _, lan_rows = storm_model.lan_proxies_per_dtn_worker(costs, trace)
    print("LAN proxies one DTN worker serves (a host booting behind each) "
          "before the last boot grows by a quarter: %d" % lans)
    print("  " + ", ".join("%d: %.1f s" % row for row in lan_rows))
    cloud_rows = storm_model.thousand_host_cloud(costs, trace)
    print("500 instances of one image on a 1,000-host cloud, 10 LAN "
          "proxies, 2 DTNs (within 2 x one boot?):")
    for lan_mbit, lan_cores, last, alone, fits in cloud_rows:
        print("  LAN ports %5d Mbit/s, %d core(s) per LAN proxy: last "
              "%.1f s, one alone %.1f s: %s" % (
                  lan_mbit, lan_cores, last, alone,
                  "within" if fits else "not within"))
    return {"hosts_per_lan_proxy": hosts, "host_rows": host_rows,
            "hosts_per_lan_proxy_with_two_workers": workers,
            "lan_proxies_per_dtn_worker": lans, "lan_rows": lan_rows,
            "single": single, "thousand_hosts": cloud_rows}


def _print_model(costs, modelled):
    """The model's boots against the lab's; the largest relative error."""
    print("\nthe model (costs measured in this run, per block: host %.2f "
          "ms, a read %.2f ms, LAN %.2f ms, DTN %.2f ms of CPU)" % (
              costs.host * 1000, costs.read * 1000, costs.lan * 1000,
              costs.dtn * 1000))
    print("%-6s %-8s %10s %10s %8s" % ("hosts", "behind", "lab s",
                                       "model s", "error"))
    errors = []
    for case, model_s, lab_s in modelled:
        errors.append(abs(model_s - lab_s) / lab_s)
        print("%-6d %-8s %10.2f %10.2f %+8.2f" % (
            case["hosts"], _label(case["lan_proxies"]), lab_s, model_s,
            (model_s - lab_s) / lab_s))
    return max(errors)


def _plot(path, single, storms, trace, modelled, sizing):
    plt = charts.pyplot()
    fig, (left, right, model) = plt.subplots(1, 3, figsize=(14, 3.5))
    for k in sorted({s["lan_proxies"] for s in storms}):
        rows = [s for s in storms if s["lan_proxies"] == k]
        left.plot([s["hosts"] for s in rows], [s["last"] for s in rows],
                  marker="o", label=_label(k))
        right.plot([s["hosts"] for s in rows],
                   [s["wan_bytes"] / trace.bytes for s in rows],
                   marker="o", label=_label(k))
    left.scatter([c["hosts"] for c, _, _ in modelled[1:]],
                 [m for _, m, _ in modelled[1:]], marker="x", color="black",
                 label="model", zorder=3)
    left.axhline(single, color="grey", linestyle="--", label="one host")
    left.axhline(1.5 * single, color="red", linestyle=":",
                 label="1.5 x one host")
    left.set_xlabel("hosts booting at once")
    left.set_ylabel("last host done (s)")
    left.legend(fontsize="small")
    right.axhline(1.1, color="red", linestyle=":", label="1.1")
    right.set_xlabel("hosts booting at once")
    right.set_ylabel("WAN bytes / boot set")
    right.set_yscale("log")
    right.legend(fontsize="small")
    rows = sizing["host_rows"]
    model.plot([h for h, _ in rows], [t for _, t in rows], marker="o",
               label="model, one LAN proxy")
    model.axhline(1.25 * sizing["single"], color="red", linestyle=":",
                  label="1.25 x one boot")
    model.set_xscale("log", base=2)
    model.set_xlabel("hosts behind one LAN proxy (a cloud)")
    model.set_ylabel("last host done (s)")
    model.legend(fontsize="small")
    charts.save(fig, path)
