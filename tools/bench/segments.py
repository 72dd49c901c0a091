# SPDX-License-Identifier: Apache-2.0
"""What resumable GridFTP segments cost on the DTN link, in one run.

The two-cloud lab's DTN link, emulated with a rate every connection
shares (gvfs_lab/wan.py; default 500 Mbit/s, 20 ms RTT, 4 GridFTP
streams).  One image file on the source DTN is sent to the
destination DTN by the conductor's own transfer code
(``gvfs_openstack.migration.gridftp.send``): as one ``globus-url-copy``
(``gridftp_segment_mib = 0``, the baseline) and in segments of several
sizes, each followed by the whole-file checksum comparison.  Two
interleaved rounds; the table shows the median of each.
"""

import os
import statistics
import tempfile
import time
import types

from oslo_config import cfg

from gvfs_lab import drlab
from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack.migration import gridftp
from gvfs_openstack.migration import sites
from tools.bench import charts
from tools.bench import data

MIB = 1024 * 1024


def _send(lab, work, source_path, size, segment_mib, name):
    config = lab.conductor_config(
        os.path.join(work, "conductor.conf"),
        "sqlite:///%s" % os.path.join(work, "jobs.sqlite"),
        east={"gridftp_segment_mib": segment_mib})
    conf = migration_conf.load(cfg.ConfigOpts(), ["--config-file", config],
                               "bench")
    west = sites.load(conf, "west")
    row = {"image_id": name, "transfer_done": 0}
    # The stage's context as far as the transfer uses it.
    ctx = types.SimpleNamespace(
        globus_url_copy=conf.conductor.globus_url_copy,
        source=sites.load(conf, "east"), destination=west,
        progress=lambda row, done: None,
        record=lambda row, **values: row.update(values))
    destination = west.staged_path("bench", name)
    start = time.monotonic()
    gridftp.send(ctx, row, source_path, destination, size)
    seconds = time.monotonic() - start
    os.unlink(destination)
    return seconds


def run(quick=False, plot=None, rtt_ms=20, rate_mbit=500, streams=4):
    size = (128 if quick else 512) * MIB
    segment_sizes = (0, 64, 32) if quick else (0, 256, 128, 64)
    seconds = {mib: [] for mib in segment_sizes}
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        with drlab.DrLab(os.path.join(work, "lab"),
                         dtn_link=(rtt_ms, rate_mbit)) as lab:
            source = os.path.join(lab.east.images, "segments.raw")
            data.random_file(source, size)
            os.chmod(source, 0o644)
            for round_ in range(2):
                for mib in segment_sizes:
                    seconds[mib].append(_send(
                        lab, work, source, size, mib,
                        "segments-%d-%d" % (mib, round_)))
    median = {mib: statistics.median(values)
              for mib, values in seconds.items()}
    link_mibps = rate_mbit / 8.0 * 1e6 / MIB
    print("\nsegments: one %d MiB file between the DTNs, %d ms RTT, "
          "%d Mbit/s (%.1f MiB/s), %d streams; median of 2" % (
              size // MIB, rtt_ms, rate_mbit, link_mibps, streams))
    print("%-26s %8s %8s %10s %10s" % ("transfer", "parts", "seconds",
                                       "MiB/s", "vs one"))
    for mib in segment_sizes:
        parts = 1 if not mib else -(-size // (mib * MIB))
        label = "one globus-url-copy" if not mib else \
            "segments of %d MiB" % mib
        print("%-26s %8d %8.2f %10.1f %10.2f" % (
            label, parts, median[mib], size / MIB / median[mib],
            median[0] / median[mib]))
    ratios = {"segments_%d_mib_vs_one" % mib: median[0] / median[mib]
              for mib in segment_sizes if mib}
    metrics = {"file_mib": size // MIB, "rtt_ms": rtt_ms,
               "rate_mbit": rate_mbit, "streams": streams}
    metrics.update({"seconds_segment_%d_mib" % mib: value
                    for mib, value in median.items()})
    if plot:
        _plot(size, median, plot)
    return {"scenario": "segments", "metrics": metrics, "ratios": ratios}


def _plot(size, median, path):
    plt = charts.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = ["one transfer" if not mib else "%d MiB parts" % mib
              for mib in median]
    ax.bar(labels, [size / MIB / s for s in median.values()],
           color=["tab:grey"] + ["tab:green"] * (len(median) - 1))
    ax.set_ylabel("MiB/s")
    ax.set_title("%d MiB between the DTNs, whole-file check included"
                 % (size // MIB))
    charts.save(fig, path)
