# SPDX-License-Identifier: Apache-2.0
"""The migration's local copy over a slow controller-to-DTN link, in zstd.

The two-cloud lab (gvfs_lab/drlab.py); the source controller
reaches its DTN through a toxiproxy link (default 500 Mbit/s, 1 ms RTT)
instead of loopback.  One image (512 MiB, 128 with ``--quick``) in the
source Glance's ``file`` store, of bytes that compress about as a
system disk does (four letters at random: 2 bits of entropy a byte) with
a quarter of it zeros, is migrated twice:

* the baseline: plain UNSTABLE NFS WRITEs to the DTN's NFS-Ganesha over
  the link (the DTN paper's tuned NFS copy);
* ``local_copy_compression = zstd``: the same copy as zstd chunks of the
  bulk channel to the DTN's ``gvfs-proxy`` server proxy over the same
  link, which writes them to Ganesha next door.

The figure is the local copy stage's own time (the job store's record of
it); the ratio is the baseline's over the compressed copy's.
"""

import os
import tempfile

from gvfs_lab import drlab
from gvfs_lab import toxiproxy
from gvfs_openstack.migration import states
from tools.bench import charts
from tools.bench import data
from tools.bench import migrate

MIB = 1024 * 1024
FOUR_LETTERS = bytes(0x41 + b % 4 for b in range(256))


def _disk_like(path, size):
    """Three pieces of four letters to one of zeros, 4 MiB at a time."""
    with open(path, "wb") as f:
        for offset in range(0, size, 4 * MIB):
            piece = min(4 * MIB, size - offset)
            if offset // (4 * MIB) % 4 == 3:
                f.seek(offset + piece)
                f.truncate()
            else:
                f.write(os.urandom(piece).translate(FOUR_LETTERS))


def _links(lab, work, rtt_ms, rate_mbit):
    """Site options reaching the east DTN over the emulated link."""
    links = toxiproxy.Toxiproxy(work)
    ganesha = links.add_link("nfs", lab.east.ganesha.nfs_port)
    proxy = links.add_link("proxy", lab.east.proxy.port)
    for name in ("nfs", "proxy"):
        links.wan(name, rtt_ms, rate_mbit)
    return links, {
        "plain NFS WRITEs to Ganesha": {
            "dtn_nfs_port": ganesha,
            "dtn_mount_port": lab.east.ganesha.mount_port},
        "zstd chunks to the DTN proxy": dict(
            lab.east.compressed_local_copy(), dtn_nfs_port=proxy,
            dtn_mount_port=proxy),
    }


def run(quick=False, plot=None, rtt_ms=1, rate_mbit=500):
    size = (128 if quick else 512) * MIB
    rows = {}
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        path, = data.image_files(work, "disk%d.raw", 1, size, _disk_like)
        with drlab.DrLab(os.path.join(work, "lab")) as lab:
            image_id = lab.east.glance.add_image(
                "disk", path, drlab.FILE_STORE)["id"]
            links, variants = _links(lab, work, rtt_ms, rate_mbit)
            try:
                for name, east in variants.items():
                    before = lab.east.proxy.stats()
                    _, runs = migrate.migrate_once(
                        lab, work, [image_id], name.split()[0], 1, 4,
                        east=east)
                    after = lab.east.proxy.stats()
                    migrate.forget_destination(lab, [image_id])
                    rows[name] = (
                        migrate.stage_seconds(runs)[states.LOCAL_COPY],
                        after["bulk_write_wire_bytes"] -
                        before["bulk_write_wire_bytes"])
            finally:
                links.stop()
    (plain, _), (zstd, wire) = rows.values()
    print("\nlocal-copy: one %d MiB image (a quarter zeros, the rest 2 bits "
          "of entropy a byte); controller-DTN link %d ms RTT, %d Mbit/s"
          % (size // MIB, rtt_ms, rate_mbit))
    print("%-30s %9s %9s %12s" % ("local copy", "seconds", "MiB/s",
                                  "wire MiB"))
    for name, (seconds, sent) in rows.items():
        print("%-30s %9.1f %9.1f %12s" % (
            name, seconds, size / MIB / seconds,
            "%.1f" % (sent / MIB) if sent else "-"))
    ratios = {"compressed_local_copy_speedup": plain / zstd}
    for name, value in ratios.items():
        print("%-30s %6.2f" % (name, value))
    metrics = {"image_mib": size // MIB, "rtt_ms": rtt_ms,
               "rate_mbit": rate_mbit, "plain_seconds": plain,
               "zstd_seconds": zstd, "zstd_wire_bytes": wire}
    if plot:
        _plot(rows, plot)
    return {"scenario": "local-copy", "metrics": metrics, "ratios": ratios}


def _plot(rows, path):
    plt = charts.pyplot()
    fig, ax = plt.subplots(figsize=(7, 2.5))
    names = list(rows)
    ax.barh(range(len(names)), [rows[n][0] for n in names],
            color=["tab:gray", "tab:blue"])
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xlabel("local copy, seconds")
    ax.set_title("local copy over the controller-DTN link")
    charts.save(fig, path)
