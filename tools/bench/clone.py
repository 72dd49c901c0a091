# SPDX-License-Identifier: Apache-2.0
"""Cloning instances from a golden image: the GVFS paper's Figure 6.

One lab, one run.  The DTN (Ganesha behind the server proxy) is across an
emulated WAN link whose rate every connection shares (gvfs_lab/wan.py,
default 50 ms RTT, 200 Mbit/s); glance-api's
``dtn`` store is on the export.  A golden raw disk image (1.6 GiB of
incompressible data, 256 MiB with ``--quick``) and a guest "boot": 5% of
its 64 KiB blocks, scattered, read with ``qemu-io`` through the new
instance disk, all submitted at once (``aio_read``) as a guest's queue
would, with Nova's cache mode ``none`` (O_DIRECT: the host's page cache
does not hide the reads).  Each compute host is a process running Nova's
real driver and image backend; each sequence is 8 clones:

* full copy then boot -- Nova's default: the first clone downloads the
  image from glance-api (beside the DTN, its API over the WAN) into
  ``_base``, later clones on the host reuse it;
* plain NFS -- overlays backing onto the image on a mount whose client
  proxy has no cache: every boot read crosses the WAN;
* GVFS, one host -- the ``gvfs`` backend over a caching client proxy,
  its mount keeping what guests read in RAM (``[mount] read_cache_mb``,
  as the deployment guide configures compute nodes): the first clone
  fetches the boot blocks, later clones find them cached;
* GVFS, one host, no RAM cache -- the same on another host of the same
  proxy (warm by now) whose mount keeps nothing: later clones read the
  proxy's disk cache;
* GVFS, 8 fresh hosts behind one warm LAN proxy -- each host has its own
  new (empty) proxy whose next hop is the now warm proxy of the run above.

The caching proxies treat the export as ``consistency = immutable``, as
the deployment guide configures compute nodes for golden images.

Times are per clone: creating the disk plus the boot reads.
"""

import os
import random
import tempfile

from gvfs_lab import compute
from gvfs_lab import fusemount
from gvfs_lab import glance_api
from gvfs_lab.topology import Lab
from gvfs_openstack.mount import mounter
from tools.bench import charts

MIB = 1024 * 1024
BLOCK = 64 * 1024
CLONES = 8
READ_CACHE_MB = 256


def _golden(path, size, seed=6):
    rng = random.Random(seed)
    with open(path, "wb") as f:
        for _ in range(size // (8 * MIB)):
            f.write(rng.randbytes(8 * MIB))


def _drop_page_cache():
    """Forget the upload's pages, so the full copy really crosses the WAN.

    glance-api wrote the image through its mount; without this, its
    download would come from this machine's page cache.
    """
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError as e:
        print("warning: cannot drop the page cache (%s): the full copy "
              "may be served from memory" % e)


def boot_reads(size, fraction=0.05, seed=7):
    """qemu-io commands reading ``fraction`` of the blocks, scattered."""
    rng = random.Random(seed)
    blocks = sorted(rng.sample(range(size // BLOCK),
                               round(size // BLOCK * fraction)))
    return ["aio_read %d 64k" % (b * BLOCK) for b in blocks] + ["aio_flush"]


def _node(lab, work, name, proxy, stores=("dtn",), read_cache_mb=0):
    node = {"mount_type": "fuse", "proxy": "127.0.0.1:%d" % proxy.port,
            "export": lab.export, "image_dir": "images",
            "mount_point_base": os.path.join(work, name + "-mounts"),
            "glance_stores": list(stores), "io_timeout": 120.0}
    if read_cache_mb:
        node["mount_config"] = fusemount.write_mount_config(
            os.path.join(work, name + "-mount.conf"),
            {"read_cache_mb": read_cache_mb})
    return node


def _clones(glance, glance_url, work, host, options, image_id, reads,
            count):
    spec = {"instances_path": os.path.join(work, host + "-instances"),
            "host": host, "glance_url": glance_url, "gvfs": options,
            "auth_token": glance.token(),
            "image_id": image_id, "count": count, "root_gb": 2,
            "reads": reads, "sequential": True, "cache_mode": "none"}
    try:
        results = compute.run_on_host(spec)
    finally:
        mounter.FuseMounter(options["mount_point_base"]).unmount_all()
    return [(r["clone_seconds"], r["read_seconds"]) for r in results]


def run(quick=False, plot=None, rtt_ms=50, rate_mbit=200):
    size = (256 if quick else 1638) * MIB // (8 * MIB) * (8 * MIB)
    reads = boot_reads(size)
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        golden = os.path.join(work, "golden.raw")
        _golden(golden, size)
        with Lab(os.path.join(work, "lab"), tunnel="tcp",
                 wan=(rtt_ms, rate_mbit),
                 cache={"capacity_mb": 2 * size // MIB + 64,
                        "consistency": "immutable"}) as lab:
            plain = lab.add_client("plain-proxy")
            # glance-api beside the DTN: its store mounts the export
            # through the server proxy, and Nova reaches its API over
            # the same WAN link, sharing its rate.
            glance = glance_api.GlanceApi(os.path.join(work, "glance"), {
                "dtn": ("gvfs", lab.gvfs_store_options(
                    "images", os.path.join(work, "glance-mounts"),
                    gvfs_store_proxy="127.0.0.1:%d" % lab.server_proxy.port,
                    gvfs_store_io_timeout=120)),
            }, workers=1)
            glance_url = "http://%s:%d" % (
                lab.shared_link.host,
                lab.shared_link.add_link("glance", glance.port))
            try:
                image_id = glance.create_image("golden")
                status = glance.upload(image_id, golden, store="dtn")
                if status != 204:
                    raise RuntimeError("upload of the golden image: %s"
                                       % status)
                _drop_page_cache()
                seconds, parts, wan_mib = {}, {}, {}

                def sequence(name, proxy, host, options, count=CLONES):
                    before = proxy.stats()["upstream_bytes_in"]
                    done = _clones(glance, glance_url, work, host,
                                   options, image_id, reads, count)
                    parts.setdefault(name, []).extend(done)
                    seconds.setdefault(name, []).extend(
                        disk + boot for disk, boot in done)
                    wan_mib[name] = wan_mib.get(name, 0) + (
                        proxy.stats()["upstream_bytes_in"] - before) / MIB

                # Nova's default: no store of this node's, so it downloads.
                sequence("full copy then boot", lab.server_proxy,
                         "full-copy", _node(lab, work, "full-copy", plain,
                                            ("elsewhere",)))
                sequence("plain NFS (no cache)", plain, "plain-nfs",
                         _node(lab, work, "plain-nfs", plain))
                sequence("GVFS, one host", lab.client_proxy, "gvfs-host",
                         _node(lab, work, "gvfs-host", lab.client_proxy,
                               read_cache_mb=READ_CACHE_MB))
                sequence("GVFS, one host, no RAM cache", lab.client_proxy,
                         "gvfs-no-ram", _node(lab, work, "gvfs-no-ram",
                                              lab.client_proxy))
                for i in range(CLONES):
                    leaf = lab.add_leaf("fresh-%d" % i,
                                        cache={"capacity_mb": 256,
                                               "consistency": "immutable"})
                    sequence("GVFS, fresh hosts, warm LAN proxy",
                             lab.client_proxy, "fresh-%d" % i,
                             _node(lab, work, "fresh-%d" % i, leaf,
                                   read_cache_mb=READ_CACHE_MB), 1)
                    leaf.stop()
            finally:
                glance.stop()
                mounter.FuseMounter(os.path.join(
                    work, "glance-mounts")).unmount_all()
    return _report(seconds, parts, wan_mib, size, reads, rtt_ms, rate_mbit,
                   plot)


def _mean(values):
    return sum(values) / len(values)


def _report(seconds, parts, wan_mib, size, reads, rtt_ms, rate_mbit, plot):
    boot_mib = (len(reads) - 1) * BLOCK / MIB
    print("\nclone: %d MiB golden image, boot reads %.0f MiB (%d x 64 KiB "
          "scattered); WAN link %d ms RTT, %d Mbit/s" % (
              size // MIB, boot_mib, len(reads) - 1, rtt_ms, rate_mbit))
    print("%-36s %8s %8s %8s %8s %9s" % (
        "sequence of %d clones" % CLONES, "first", "later", "mean", "total",
        "WAN MiB"))
    for name, times in seconds.items():
        print("%-36s %8.2f %8.2f %8.2f %8.1f %9.1f" % (
            name, times[0], _mean(times[1:]), _mean(times), sum(times),
            wan_mib[name]))
    full = seconds["full copy then boot"][0]
    ratios = {
        "first_clone_vs_full_copy": seconds["GVFS, one host"][0] / full,
        "later_clone_vs_full_copy": _mean(
            seconds["GVFS, one host"][1:]) / full,
        "lan_fresh_host_vs_full_copy": _mean(
            seconds["GVFS, fresh hosts, warm LAN proxy"]) / full,
        "plain_nfs_vs_full_copy": _mean(
            seconds["plain NFS (no cache)"]) / full,
        "later_clone_no_ram_cache_vs_full_copy": _mean(
            seconds["GVFS, one host, no RAM cache"][1:]) / full,
    }
    for name, value in ratios.items():
        print("%-36s %8.3f" % (name, value))
    print("WAN MiB: what crossed the link into the proxy the sequence "
          "used (full copy: into the server proxy, read by glance-api)")
    print("\nlater clones, mean seconds:%26s %8s" % ("disk", "boot"))
    for name, times in parts.items():
        print("%-36s %8.3f %8.3f" % (
            name, _mean([d for d, _ in times[1:]]),
            _mean([b for _, b in times[1:]])))
    metrics = {"image_mib": size // MIB, "boot_read_mib": boot_mib,
               "rtt_ms": rtt_ms, "rate_mbit": rate_mbit,
               "seconds": seconds, "wan_mib": wan_mib,
               "disk_and_boot_seconds": parts}
    if plot:
        _plot(seconds, plot)
    return {"scenario": "clone", "metrics": metrics, "ratios": ratios}


def _plot(seconds, path):
    plt = charts.pyplot()
    fig, axis = plt.subplots(figsize=(11, 4.5))
    width = 0.8 / len(seconds)
    colors = ["tab:red", "tab:grey", "tab:green", "tab:olive", "tab:blue"]
    for i, (name, times) in enumerate(seconds.items()):
        axis.bar([c + i * width for c in range(len(times))], times, width,
                 label=name, color=colors[i % len(colors)])
    axis.set_xticks([c + 0.4 - width / 2 for c in range(CLONES)])
    axis.set_xticklabels(["clone %d" % (c + 1) for c in range(CLONES)])
    axis.set_yscale("log")
    axis.set_ylabel("seconds per clone (log)")
    axis.set_title("Cloning from a golden image over the WAN "
                   "(after GVFS paper, Fig. 6)")
    axis.legend(fontsize="small")
    charts.save(fig, path)
