# SPDX-License-Identifier: Apache-2.0
"""Images through a real glance-api: the gvfs store against Glance's own
``file`` store.

One lab, one glance-api (PyPI glance under gunicorn, behind its own lab
Keystone: every request carries a token, as a client's would) with three
stores:

* ``local``: Glance's ``file`` store on local disk (the baseline);
* ``gvfs``: the gvfs store on its own FUSE mount -> client proxy (block
  cache) -> server proxy -> NFS-Ganesha, thin provisioning on;
* ``gvfs-fat``: the same with thin provisioning off.

Measured as a client sees it (Images API v2 upload and download over
HTTP): a 1 GiB image of random data into and out of ``local`` and
``gvfs``, downloaded cold (the page cache dropped, the client proxy's
block cache emptied) and warm, against a cold read of the same file
straight from the export's disk; a 4 GiB image that is 90% zeros (data
in scattered 1 MiB runs, like a fresh disk) into ``gvfs`` and
``gvfs-fat``, with the space it takes on the export.
"""

import os
import tempfile
import time

from gvfs_lab import glance_api
from gvfs_lab.topology import Lab
from gvfs_openstack.mount import mounter
from gvfs_openstack.proxy import control
from tools.bench import charts
from tools.bench import cpu
from tools.bench import data
from tools.bench import metadata

MIB = 1024 * 1024
#: What glance-api's file and gvfs stores read at a time.
CHUNK = 64 * 1024


def _stores(lab, mounts):
    return {store: ("gvfs", lab.gvfs_store_options(
        subdir, mounts, gvfs_store_thin_provisioning=thin))
        for store, subdir, thin in (("gvfs", "images", "true"),
                                    ("gvfs-fat", "images-fat", "false"))}


def _upload(api, path, store):
    image_id = api.create_image("bench-%s" % store)
    start = time.monotonic()
    status = api.upload(image_id, path, store=store)
    seconds = time.monotonic() - start
    if status != 204:
        raise RuntimeError("upload to %s failed: %s" % (store, status))
    return image_id, seconds


def _download(api, image_id, size):
    start = time.monotonic()
    if api.download(image_id) != size:
        raise RuntimeError("short download of %s" % image_id)
    return time.monotonic() - start


def _drop_caches(lab):
    """Empty every cache an image may be in.

    The kernel's page cache (the export's files, the local store's, the
    FUSE mount's) and the client proxy's block cache.
    """
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3")
    control.request(lab.client_proxy.control_socket, "drop")


def _read_file(path):
    """Seconds to read ``path`` sequentially, as glance-api's store does."""
    start = time.monotonic()
    with open(path, "rb", buffering=0) as f:
        while f.read(CHUNK):
            pass
    return time.monotonic() - start


def run(quick=False, plot=None):
    size = (256 if quick else 1024) * MIB
    sparse_size = (1024 if quick else 4096) * MIB
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        dense = os.path.join(work, "dense.raw")
        data.random_file(dense, size)
        sparse = os.path.join(work, "sparse.raw")
        metadata.sparse_image(sparse, sparse_size, 0.1, seed=3)
        local = os.path.join(work, "local-store")
        os.makedirs(local)
        mounts = os.path.join(work, "mounts")
        with Lab(os.path.join(work, "lab"), tunnel="tcp",
                 cache={"capacity_mb": 2 * size // MIB + 64}) as lab:
            backends = _stores(lab, mounts)
            backends["local"] = ("file", {"filesystem_store_datadir":
                                          local})
            api = glance_api.GlanceApi(os.path.join(work, "glance"),
                                       backends)
            try:
                seconds = {}
                stored = {}
                for store in ("local", "gvfs"):
                    image_id, seconds[store, "up"] = _upload(api, dense,
                                                             store)
                    stored[store] = image_id
                # Cold: read before by nobody, as the first boot of an
                # image on a node; warm: read again at once.
                busy = {}
                for store in ("local", "gvfs"):
                    _drop_caches(lab)
                    with _Busy(lab) as busy[store]:
                        seconds[store, "down"] = _download(
                            api, stored[store], size)
                    seconds[store, "warm"] = _download(api, stored[store],
                                                       size)
                # The baseline for the gvfs store: the same file read
                # straight from the export's disk, as cold.
                _drop_caches(lab)
                with _Busy(lab) as busy["export"]:
                    seconds["export", "down"] = _read_file(os.path.join(
                        lab.export, "images", stored["gvfs"]))
                on_disk = {}
                for store in ("gvfs", "gvfs-fat"):
                    image_id, seconds[store, "sparse"] = _upload(
                        api, sparse, store)
                    subdir = backends[store][1]["gvfs_store_datadir"]
                    on_disk[store] = os.stat(os.path.join(
                        lab.export, subdir, image_id)).st_blocks * 512
            finally:
                api.stop()
                mounter.FuseMounter(mounts).unmount_all()
    return _report(size, sparse_size, seconds, on_disk, busy, plot)


class _Busy:
    """CPU seconds of the machine and of the lab's processes in a block."""

    def __init__(self, lab):
        self._pids = {"client proxy": lab.client_proxy.process.pid,
                      "server proxy": lab.server_proxy.process.pid,
                      "NFS-Ganesha": lab.ganesha.process.pid}
        self.machine = 0.0
        self.processes = {}

    def __enter__(self):
        self._before = {name: cpu.process_seconds(pid)
                        for name, pid in self._pids.items()}
        self._machine_before = cpu.machine_seconds()
        return self

    def __exit__(self, *exc):
        self.machine = cpu.machine_seconds() - self._machine_before
        self.processes = {name: cpu.process_seconds(pid) -
                          self._before[name]
                          for name, pid in self._pids.items()}


def _report(size, sparse_size, seconds, on_disk, busy, plot):
    mib = size / MIB
    print("\nglance: %d MiB random image through glance-api (HTTP upload "
          "and download; cold: no cache holds it, warm: read again)" % mib)
    print("%-34s %8s %8s %8s %8s" % ("store", "up s", "up MiB/s",
                                     "cold MiB/s", "warm MiB/s"))
    for store, label in (("local", "file store, local disk"),
                         ("gvfs", "gvfs store, FUSE -> proxy chain")):
        print("%-34s %8.1f %8.1f %8.1f %8.1f" % (
            label, seconds[store, "up"], mib / seconds[store, "up"],
            mib / seconds[store, "down"], mib / seconds[store, "warm"]))
    print("%-34s %8s %8s %8.1f" % ("the export's file, read cold", "", "",
                                   mib / seconds["export", "down"]))
    print("\n%d MiB image, 90%% zeros, into the gvfs store:" % (
        sparse_size // MIB))
    print("%-34s %9s %9s %12s" % ("", "seconds", "MiB/s", "on disk MiB"))
    for store, label in (("gvfs", "thin provisioning"),
                         ("gvfs-fat", "no thin provisioning")):
        print("%-34s %9.1f %9.1f %12.1f" % (
            label, seconds[store, "sparse"],
            sparse_size / MIB / seconds[store, "sparse"],
            on_disk[store] / MIB))
    ratios = {
        # Throughput ratios: above 1 means gvfs is faster.
        "upload_vs_file_store": seconds["local", "up"] / seconds["gvfs",
                                                                 "up"],
        "download_vs_file_store": seconds["local", "down"] / seconds[
            "gvfs", "down"],
        "warm_download_vs_file_store": seconds["local", "warm"] / seconds[
            "gvfs", "warm"],
        "cold_download_vs_direct_export": seconds["export", "down"] /
        seconds["gvfs", "down"],
        "sparse_upload_speedup": seconds["gvfs-fat", "sparse"] / seconds[
            "gvfs", "sparse"],
        "sparse_disk_fraction": on_disk["gvfs"] / sparse_size,
    }
    for name, value in ratios.items():
        print("%-34s %6.2f" % (name, value))
    machine = {what: cpu.per_gib(b.machine, size) for what, b in busy.items()}
    print("\nCPU seconds per GiB of the cold reads (the whole machine, and "
          "of it the lab's processes), and the rate every one of %d cores "
          "busy allows:" % os.cpu_count())
    for what, label in (("local", "file store download"),
                        ("gvfs", "gvfs store download"),
                        ("export", "the export's file")):
        print("  %-22s %5.2f  (%s)  %6.0f MiB/s" % (
            label, machine[what], ", ".join(
                "%s %.2f" % (name, cpu.per_gib(value, size))
                for name, value in busy[what].processes.items()),
            cpu.ceiling_mib_s(machine[what])))
    # What cold_download_vs_direct_export can reach while the download
    # needs every core and the export's read does not.
    cpu_bound = cpu.ceiling_mib_s(machine["gvfs"]) / (
        mib / seconds["export", "down"])
    print("%-34s %6.2f" % ("cold download, CPU-bound x export", cpu_bound))
    metrics = {"image_mib": mib, "sparse_image_mib": sparse_size // MIB,
               "sparse_on_disk_mib": on_disk["gvfs"] / MIB,
               "fat_on_disk_mib": on_disk["gvfs-fat"] / MIB,
               "cores": os.cpu_count(),
               "cold_download_cpu_bound_vs_direct_export": cpu_bound}
    metrics.update({"%s_cold_machine_cpu_s_per_gib" % what: value
                    for what, value in machine.items()})
    for what, b in busy.items():
        metrics.update({"%s_cold_%s_cpu_s_per_gib" % (
            what, name.lower().replace(" ", "_").replace("-", "_")):
            cpu.per_gib(value, size) for name, value in b.processes.items()})
    metrics.update({"%s_%s_seconds" % (store.replace("-", "_"), what): value
                    for (store, what), value in seconds.items()})
    if plot:
        _plot(mib, seconds, plot)
    return {"scenario": "glance", "metrics": metrics, "ratios": ratios}


def _plot(mib, seconds, path):
    plt = charts.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    labels = ["upload", "download"]
    width = 0.35
    for offset, store, colour in ((-width / 2, "local", "tab:grey"),
                                  (width / 2, "gvfs", "tab:green")):
        ax.bar([i + offset for i in range(2)],
               [mib / seconds[store, "up"], mib / seconds[store, "down"]],
               width, label=store, color=colour)
    ax.set_xticks(range(2))
    ax.set_xticklabels(labels)
    ax.set_ylabel("MiB/s")
    ax.set_title("%d MiB image through glance-api" % mib)
    ax.legend()
    charts.save(fig, path)
