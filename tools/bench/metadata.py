# SPDX-License-Identifier: Apache-2.0
"""Metadata sidecars over an emulated WAN link, against block transfer.

One lab, one run; the link between the client side and the DTN is an
emulated WAN link whose rate every connection shares (gvfs_lab/wan.py;
default 50 ms RTT, 200 Mbit/s):

* a "memory image" (90% zero pages; the data in 64 KiB-aligned runs, as
  in-use memory regions are) read in full through a caching client proxy
  with 64 KiB READs, 8 in flight (a VMM restoring memory), cold: without
  a sidecar every block crosses the link, with one only the non-zero
  pages do;
* a compressible disk image (an ext4 file system made with ``mke2fs -d``
  from this machine's shared libraries and documentation, and its free
  space) read in full with ``nfs-cp``, cold: block by block without a
  sidecar, and through the whole-file channel (zstd chunks over the
  bulk channel) with a ``whole_file`` sidecar;
* ``gvfs-meta`` scan speed on a sparse image (holes found with SEEK_DATA
  and SEEK_HOLE) and on the memory image (every byte read and checked).
"""

import asyncio
import os
import random
import subprocess
import tempfile
import time

from gvfs_lab.topology import Lab
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.sidecar import format as meta_format
from gvfs_openstack.sidecar import scan
from tools.bench import charts

MIB = 1024 * 1024
RUN = 64 * 1024


def _memory_image(path, size, zero_fraction, seed=1):
    """Zero pages but for random 64 KiB-aligned runs of data."""
    rng = random.Random(seed)
    runs = size // RUN
    data_runs = set(rng.sample(range(runs), round(runs * (1 - zero_fraction))))
    with open(path, "wb") as f:
        for run in range(runs):
            f.write(rng.randbytes(RUN) if run in data_runs else bytes(RUN))
    return len(data_runs) * RUN


def sparse_image(path, size, data_fraction, seed=2):
    rng = random.Random(seed)
    block = MIB
    with open(path, "wb") as f:
        f.truncate(size)
        for index in rng.sample(range(size // block),
                                round(size // block * data_fraction)):
            f.seek(index * block)
            f.write(rng.randbytes(block))


#: Real files for the disk image, as hard links (no copy).
FS_SOURCES = ("/usr/lib/x86_64-linux-gnu", "/usr/share/doc",
              "/usr/lib/python3")


def _filesystem_image(path, size, work, sources):
    staging = os.path.join(work, "staging")
    os.makedirs(staging)
    budget = size * 3 // 4
    for source in sources:
        if not os.path.isdir(source):
            continue
        target = os.path.join(staging, os.path.basename(source))
        subprocess.run(["cp", "-al", source, target], check=False,
                       stderr=subprocess.DEVNULL)
        used = int(subprocess.run(["du", "-sb", staging], check=True,
                                  capture_output=True,
                                  text=True).stdout.split()[0])
        if used > budget:
            subprocess.run(["rm", "-rf", target], check=True)
    subprocess.run(["mke2fs", "-q", "-F", "-t", "ext4", "-d", staging, path,
                    "%dk" % (size // 1024)], check=True)
    subprocess.run(["rm", "-rf", staging], check=True)


def _timed_copy(lab, name, dest):
    start = time.monotonic()
    subprocess.run(["nfs-cp", lab.client_url(name), dest], check=True,
                   stdout=subprocess.DEVNULL, timeout=3600)
    seconds = time.monotonic() - start
    os.unlink(dest)
    return seconds


def _publish_sidecar(lab, work, name, action):
    sidecar = scan.scan_file(os.path.join(lab.export, name), action,
                             "zstd" if action == "whole_file" else "none")
    side = os.path.join(work, "sidecar")
    with open(side, "wb") as f:
        f.write(sidecar.to_bytes())
    _put(lab, side, meta_format.sidecar_name(name))
    return sidecar


def _timed_scan(path):
    start = time.monotonic()
    sidecar = scan.scan_file(path)
    return sidecar, time.monotonic() - start


def _read(lab, name):
    """Seconds to read ``name`` through the client proxy, and stats."""
    async def scenario():
        port = lab.client_proxy.port
        async with NfsClient("127.0.0.1", port, port, rsize=64 * 1024,
                             window=8, timeout=600) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path(name)
            start = time.monotonic()
            async for _ in nfs.read_file(fh):
                pass
            return time.monotonic() - start

    before = lab.client_proxy.stats()
    seconds = asyncio.run(scenario())
    after = lab.client_proxy.stats()
    return seconds, {key: after[key] - before[key] for key in (
        "cache_reads", "cache_reads_zero_map", "cache_bytes_fetched",
        "cache_bytes_zero_map", "upstream_bytes_in")}


def _put(lab, src, name):
    subprocess.run(["nfs-cp", str(src), lab.server_proxy_url(name)],
                   check=True, stdout=subprocess.DEVNULL, timeout=3600)


def run(quick=False, plot=None, rtt_ms=50, rate_mbit=200):
    size = (64 if quick else 512) * MIB
    sparse_size = (512 if quick else 4096) * MIB
    fs_size = (128 if quick else 1024) * MIB
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        image = os.path.join(work, "memory.img")
        nonzero = _memory_image(image, size, 0.9)
        sparse = os.path.join(work, "sparse.img")
        sparse_image(sparse, sparse_size, 0.1)
        os.sync()
        _, sparse_seconds = _timed_scan(sparse)
        sidecar, dense_seconds = _timed_scan(image)
        disk = os.path.join(work, "disk.img")
        _filesystem_image(disk, fs_size, work,
                          FS_SOURCES[-1:] if quick else FS_SOURCES)
        with Lab(os.path.join(work, "lab"), tunnel="tcp",
                 wan=(rtt_ms, rate_mbit),
                 cache={"capacity_mb": 2 * (size + fs_size) // MIB + 64}) \
                as lab:
            for name in ("plain.img", "meta.img"):
                _put(lab, image, name)
            # The sidecar of meta.img, made as an operator would on the
            # DTN, stored through NFS so Ganesha sees it at once.
            _publish_sidecar(lab, work, "meta.img", "on_demand")
            plain_seconds, plain = _read(lab, "plain.img")
            meta_seconds, meta = _read(lab, "meta.img")
            warm_seconds, warm = _read(lab, "meta.img")
            for name in ("disk-blocks.img", "disk-whole.img"):
                _put(lab, disk, name)
            disk_sidecar = _publish_sidecar(lab, work, "disk-whole.img",
                                            "whole_file")
            dest = os.path.join(work, "out")
            blocks_seconds = _timed_copy(lab, "disk-blocks.img", dest)
            before = lab.client_proxy.stats()
            whole_seconds = _timed_copy(lab, "disk-whole.img", dest)
            after = lab.client_proxy.stats()
            whole = {key: after[key] - before[key] for key in (
                "wholefile_raw_bytes", "wholefile_wire_bytes",
                "wholefile_verified", "cache_bytes_zero_map")}
            rss = lab.client_proxy.stats()["peak_rss_kb"] / 1024
    link_mibps = rate_mbit / 8.0 * 1e6 / MIB
    local_fraction = meta["cache_reads_zero_map"] / max(meta["cache_reads"],
                                                        1)
    print("\nmetadata: %d MiB memory image, %.0f%% zero pages, read with "
          "64 KiB READs; WAN link %d ms RTT, %d Mbit/s (%.1f MiB/s)" % (
              size // MIB, 100.0 * (size - nonzero) / size, rtt_ms,
              rate_mbit, link_mibps))
    print("%-26s %8s %8s %12s %12s" % ("path", "seconds", "MiB/s",
                                       "fetched MiB", "READs local"))
    for name, seconds, counts in (("block transfer (cold)", plain_seconds,
                                   plain),
                                  ("zero map (cold)", meta_seconds, meta),
                                  ("zero map (warm)", warm_seconds, warm)):
        print("%-26s %8.1f %8.1f %12.1f %11.1f%%" % (
            name, seconds, size / MIB / seconds,
            counts["cache_bytes_fetched"] / MIB,
            100.0 * counts["cache_reads_zero_map"] /
            max(counts["cache_reads"], 1)))
    print("\n%d MiB disk image (ext4, %.0f%% free space), read with nfs-cp:"
          % (fs_size // MIB, 100.0 * disk_sidecar.zeros.zero_bytes /
             fs_size))
    print("%-26s %8s %8s %12s" % ("path", "seconds", "MiB/s", "wire MiB"))
    print("%-26s %8.1f %8.1f %12.1f" % ("block transfer (cold)",
                                        blocks_seconds,
                                        fs_size / MIB / blocks_seconds,
                                        fs_size / MIB))
    print("%-26s %8.1f %8.1f %12.1f   (verified: %d)" % (
        "whole-file channel (cold)", whole_seconds,
        fs_size / MIB / whole_seconds,
        whole["wholefile_wire_bytes"] / MIB, whole["wholefile_verified"]))
    print("\ngvfs-meta scan: sparse %d MiB image (10%% data) %.2f GB/s; "
          "memory image %.0f MiB/s" % (
              sparse_size // MIB, sparse_size / 1e9 / sparse_seconds,
              size / MIB / dense_seconds))
    print("client proxy peak RSS: %.1f MB" % rss)
    ratios = {"zero_reads_local_fraction": local_fraction,
              "zero_map_speedup": plain_seconds / meta_seconds,
              "whole_file_speedup": blocks_seconds / whole_seconds}
    for name, value in ratios.items():
        print("%-26s %6.2f" % (name, value))
    metrics = {"size_mib": size // MIB, "rtt_ms": rtt_ms,
               "rate_mbit": rate_mbit, "nonzero_mib": nonzero / MIB,
               "block_transfer_seconds": plain_seconds,
               "zero_map_seconds": meta_seconds,
               "zero_map_warm_seconds": warm_seconds,
               "zero_map_fetched_mib": meta["cache_bytes_fetched"] / MIB,
               "block_fetched_mib": plain["cache_bytes_fetched"] / MIB,
               "scan_sparse_gbps": sparse_size / 1e9 / sparse_seconds,
               "scan_dense_mibps": size / MIB / dense_seconds,
               "disk_image_mib": fs_size // MIB,
               "disk_free_fraction": disk_sidecar.zeros.zero_bytes / fs_size,
               "block_transfer_disk_seconds": blocks_seconds,
               "whole_file_seconds": whole_seconds,
               "whole_file_wire_mib": whole["wholefile_wire_bytes"] / MIB,
               "whole_file_raw_mib": whole["wholefile_raw_bytes"] / MIB,
               "whole_file_verified": whole["wholefile_verified"],
               "proxy_peak_rss_mb": rss}
    if plot:
        _plot({"memory image\nblocks": plain_seconds,
               "memory image\nzero map": meta_seconds,
               "disk image\nblocks": blocks_seconds,
               "disk image\nwhole file": whole_seconds},
              sparse_size / 1e9 / sparse_seconds,
              size / 1e9 / dense_seconds, plot)
    return {"scenario": "metadata", "metrics": metrics, "ratios": ratios}


def _plot(seconds, sparse_gbps, dense_gbps, path):
    plt = charts.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.bar(list(seconds), list(seconds.values()),
             color=["tab:red", "tab:green", "tab:red", "tab:green"])
    left.set_ylabel("seconds")
    left.set_title("reading over the WAN, cold")
    right.bar(["sparse image", "memory image"], [sparse_gbps, dense_gbps],
              color=["tab:blue", "tab:grey"])
    right.axhline(1.0, linestyle="--", color="black", label="1 GB/s")
    right.set_ylabel("GB/s")
    right.set_title("gvfs-meta scan speed")
    right.legend()
    charts.save(fig, path)
