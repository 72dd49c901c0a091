# SPDX-License-Identifier: Apache-2.0
"""A boot storm: many compute hosts boot one golden image at once.

One DTN (NFS-Ganesha and a server proxy) across an emulated WAN (50 ms
RTT, 200 Mbit/s shared, as the ``boot`` benchmark); on the near side a
site of N compute hosts (:mod:`gvfs_lab.site`), each a network namespace
with a client proxy, its cache and a FUSE mount, on 1 Gbit/s LAN ports,
either each across the WAN to the DTN (``direct``) or behind k LAN
proxies (one per LAN segment, their ports 1 Gbit/s too).  Every case
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
  proxies finished, against the single host;
* ``storm_wan_bytes_vs_boot_set``: bytes the DTN's server proxy sent per
  storm behind LAN proxies against the boot set, the worst case (each
  block should cross the WAN once, whatever N);
* the ``server-workers`` benchmark's figures, run after the storm: how
  evenly two server proxy workers share many client connections, and
  what spreading costs in CPU.

Each case also records the CPU seconds each tier spent (hosts' proxies
and mounts, LAN proxies, the server proxy) and the bytes each sent.
"""

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
    server = [lab.server_proxy.process.pid] + [
        w["pid"] for w in lab.server_proxy.stats().get("workers", [])]
    return {
        "server": server,
        "lan": [p.process.pid for p in site.lan_proxies],
        "host_proxies": [h.proxy.process.pid for h in site.hosts],
        "mounts": [h.mount.process.pid for h in site.hosts],
    }


def _cpu(pids):
    return {tier: sum(cpu.process_seconds(p) for p in ps)
            for tier, ps in pids.items()}


def _storm(lab, trace, expected, hosts, lan_proxies):
    """N hosts replay the boot at once; what each took, and the costs."""
    with site_lab.Site(lab, hosts=hosts, lan_proxies=lan_proxies,
                       cache=CACHE, mount_options={
                           "read_cache_mb": boot.READ_CACHE_MB},
                       lan_rate_mbit=LAN_MBIT,
                       host_rate_mbit=LAN_MBIT) as site:
        pids = _tiers(lab, site)
        cpu_before = _cpu(pids)
        sent_before = lab.server_proxy.stats()["downstream_bytes_out"]
        link_before = lab.shared_link.bytes_sent()
        results = replay.replay_together(
            [h.path(os.path.join("images", IMAGE)) for h in site.hosts],
            trace)
        wan_bytes = lab.server_proxy.stats()["downstream_bytes_out"] - \
            sent_before
        link_bytes = lab.shared_link.bytes_sent() - link_before
        cpu_after = _cpu(pids)
        lan_bytes = sum(p.stats()["downstream_bytes_out"]
                        for p in site.lan_proxies)
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
        "wan_bytes": wan_bytes, "link_bytes": link_bytes,
        "lan_bytes": lan_bytes,
        "cpu": {tier: cpu_after[tier] - cpu_before[tier]
                for tier in cpu_before},
    }


def _cases(quick):
    if quick:
        return [(8, 0), (8, 1), (16, 1), (16, 2)]
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
            singles = [_storm(lab, trace, expected, 1, 1)
                       for _ in range(1 if quick else SINGLE_RUNS)]
            storms = [_storm(lab, trace, expected, n, k)
                      for n, k in _cases(quick)]
    single = statistics.median(s["last"] for s in singles)
    print("\nstorm: hosts replaying one recorded boot (%d blocks, %.1f MiB, "
          "%.1f s recorded) at once; WAN %d ms / %d Mbit/s, LAN ports "
          "%d Mbit/s" % (len(trace.reads), trace.bytes / MIB, trace.seconds,
                         RTT_MS, RATE_MBIT, LAN_MBIT))
    print("%-6s %-8s %8s %8s %8s %10s %10s %8s" % (
        "hosts", "behind", "first s", "median s", "last s", "last/one",
        "WAN MiB", "WAN/set"))
    print("%-6d %-8s %8s %8s %8.2f %10.2f %10.1f %8.2f" % (
        1, _label(1), "", "", single, 1.0,
        singles[-1]["wan_bytes"] / MIB,
        singles[-1]["wan_bytes"] / trace.bytes))
    for s in storms:
        print("%-6d %-8s %8.2f %8.2f %8.2f %10.2f %10.1f %8.2f" % (
            s["hosts"], _label(s["lan_proxies"]), s["first"], s["median"],
            s["last"], s["last"] / single, s["wan_bytes"] / MIB,
            s["wan_bytes"] / trace.bytes))
    ratios = {"storm%d_%s_last_vs_single" % (
        s["hosts"], "direct" if not s["lan_proxies"] else
        "lan%d" % s["lan_proxies"]): s["last"] / single for s in storms}
    behind_lan = [s for s in storms if s["lan_proxies"]]
    ratios["storm_wan_bytes_vs_boot_set"] = max(
        s["wan_bytes"] / trace.bytes for s in behind_lan)
    print()
    workers = server_workers.run(quick=quick, plot=None)
    ratios.update(workers["ratios"])
    print()
    for name, value in sorted(ratios.items()):
        print("%-36s %6.2f" % (name, value))
    if plot:
        _plot(plot, single, storms, trace)
    return {"scenario": "storm", "ratios": ratios, "metrics": {
        "trace_blocks": len(trace.reads), "trace_bytes": trace.bytes,
        "trace_seconds": trace.seconds, "rtt_ms": RTT_MS,
        "wan_mbit": RATE_MBIT, "lan_mbit": LAN_MBIT,
        "singles": singles, "storms": storms,
        "server_workers": workers["metrics"]}}


def _plot(path, single, storms, trace):
    plt = charts.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    for k in sorted({s["lan_proxies"] for s in storms}):
        rows = [s for s in storms if s["lan_proxies"] == k]
        left.plot([s["hosts"] for s in rows], [s["last"] for s in rows],
                  marker="o", label=_label(k))
        right.plot([s["hosts"] for s in rows],
                   [s["wan_bytes"] / trace.bytes for s in rows],
                   marker="o", label=_label(k))
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
    charts.save(fig, path)
