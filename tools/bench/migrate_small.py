# SPDX-License-Identifier: Apache-2.0
"""Many small images between two clouds: one transfer each, or one archive.

The same two-cloud lab and emulated DTN link as ``migrate``.  32 images
of 4 MiB (8 with ``--quick``), each half random data and half zeros --
the shape of small raw images (kernels, ramdisks, appliance disks) -- in
the source Glance's ``file`` store, are migrated twice:

* the pipelined conductor: one GridFTP transfer per image, each paying
  its start-up, control round trips and both servers' checksums;
* ``--pack tar``: the DTN paper's tar+compress, one archive made on the
  source DTN, one transfer, unpacked at the destination.

The ratio is the pipelined run's time over the packed run's.
"""

import os
import tempfile

from gvfs_openstack.migration import states
from tools.bench import charts
from tools.bench import data
from tools.bench import migrate

MIB = 1024 * 1024


def _half_random(path, size):
    with open(path, "wb") as f:
        f.write(os.urandom(size // 2))
        f.write(bytes(size - size // 2))


def run(quick=False, plot=None, rtt_ms=20, rate_mbit=500, streams=4):
    count = 8 if quick else 32
    size = 4 * MIB
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        paths = data.image_files(work, "small%02d.raw", count, size,
                                 _half_random)
        with migrate.linked_lab(work, paths, rtt_ms,
                                rate_mbit) as (lab, image_ids):
            pipelined, pipe_runs = migrate.migrate_once(
                lab, work, image_ids, "pipelined", 3, streams)
            migrate.forget_destination(lab, image_ids)
            packed, pack_runs = migrate.migrate_once(
                lab, work, image_ids, "packed", 3, streams, pack="tar")
    transfers = {name: sum(1 for r in runs if r["stage"] == states.TRANSFER
                           and r["outcome"] == "done")
                 for name, runs in (("pipelined", pipe_runs),
                                    ("packed", pack_runs))}
    total_mib = count * size / MIB
    print("\nmigrate-small: %d images x %d MiB (half random, half zeros); "
          "DTN link %d ms RTT, %d Mbit/s, GridFTP %d streams" % (
              count, size // MIB, rtt_ms, rate_mbit, streams))
    print("%-34s %9s %9s %10s" % ("run", "seconds", "MiB/s", "transfers"))
    for name, seconds in (("pipelined, one transfer per image",
                           pipelined), ("packed (--pack tar)", packed)):
        key = "packed" if name.startswith("packed") else "pipelined"
        print("%-34s %9.1f %9.1f %10d" % (name, seconds,
                                          total_mib / seconds,
                                          transfers[key]))
    ratios = {"packed_speedup": pipelined / packed}
    for name, value in ratios.items():
        print("%-30s %6.2f" % (name, value))
    metrics = {"images": count, "image_mib": size // MIB, "rtt_ms": rtt_ms,
               "rate_mbit": rate_mbit, "streams": streams,
               "pipelined_seconds": pipelined, "packed_seconds": packed,
               "pipelined_transfers": transfers["pipelined"],
               "packed_transfers": transfers["packed"]}
    if plot:
        _plot(pipe_runs, pack_runs, plot)
    return {"scenario": "migrate-small", "metrics": metrics,
            "ratios": ratios}


def _plot(pipe_runs, pack_runs, path):
    """Each run's time in each stage, summed over its images."""
    plt = charts.pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.5))
    colours = {states.LOCAL_COPY: "tab:blue", states.TRANSFER: "tab:red",
               states.REMOTE_COPY: "tab:green"}
    for row, (name, runs) in enumerate((("pipelined", pipe_runs),
                                        ("--pack tar", pack_runs))):
        done = [r for r in runs if r["outcome"] == "done"]
        origin = min(r["started_at"] for r in done)
        for r in done:
            start = (r["started_at"] - origin).total_seconds()
            length = (r["finished_at"] - r["started_at"]).total_seconds()
            ax.barh(row, length, left=start, height=0.6,
                    color=colours[r["stage"]], edgecolor="black",
                    linewidth=0.3)
    ax.set_yticks([0, 1])
    ax.set_yticklabels(["pipelined", "--pack tar"])
    ax.invert_yaxis()
    ax.set_xlabel("seconds")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c)
               for c in colours.values()]
    ax.legend(handles, [migrate.STAGE_NAMES[s] for s in colours],
              loc="lower right")
    ax.set_title("small images: stage runs over time")
    charts.save(fig, path)
