# SPDX-License-Identifier: Apache-2.0
"""Disaster-recovery migration of images between two clouds, in one run.

The two-cloud lab (gvfs_lab/drlab.py) with its DTN-to-DTN link
emulated by a shaped veth pair whose rate every connection shares
(gvfs_lab/wan.py; default 500 Mbit/s, 20 ms RTT).  Four images of
random data in the source Glance's ``file`` store, so every stage has all
of its work to do, are migrated:

* the DTN paper's procedure: each image's local copy, DTN-to-DTN transfer
  and remote copy one after another (the conductor with one image in
  flight);
* the pipelined conductor (images in flight: 3);
* a plain ``scp`` of the four image files from the source DTN to the
  destination's over the same emulated link: what a user would otherwise
  run, without any Glance at either end;
* Glance's own ``glance-download`` import: the destination's glance-api
  downloads each image from the source's over the same link, with the
  user's token (the one Keystone's catalog has the source's endpoint
  across the link), from the request to four active images.

The stage times of the sequential run are each stage's own cost; the
pipelined run should take little more than the slowest of them.  Between
runs the destination's images are deleted and purged from its database
(the migrated images keep their ids).
"""

import contextlib
import os
import subprocess
import sys
import tempfile
import time

from oslo_config import cfg

from gvfs_lab import drlab
from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack.migration import manager as manager_mod
from gvfs_openstack.migration import states
from tools.bench import charts
from tools.bench import data

MIB = 1024 * 1024
STAGE_NAMES = {states.LOCAL_COPY: "local copy", states.TRANSFER: "DTN-to-DTN",
               states.REMOTE_COPY: "remote copy"}


@contextlib.contextmanager
def linked_lab(work, paths, rtt_ms, rate_mbit):
    """The two clouds over an emulated DTN link, with images to move.

    ``paths`` become images in the source's ``file`` store; yields the lab
    and the images' ids.
    """
    with drlab.DrLab(os.path.join(work, "lab"),
                     dtn_link=(rtt_ms, rate_mbit)) as lab:
        yield lab, [lab.east.glance.add_image(
            os.path.basename(p), p, drlab.FILE_STORE)["id"] for p in paths]


def migrate_once(lab, work, image_ids, name, images_in_flight, streams,
                 pack=None, east=None):
    """Seconds from the request to the job's end, and the stage runs.

    ``east`` overrides options of the source site.
    """
    path = lab.conductor_config(
        os.path.join(work, name + ".conf"),
        "sqlite:///%s" % os.path.join(work, name + ".sqlite"),
        east=dict({"gridftp_parallel": streams}, **(east or {})),
        images_in_flight=images_in_flight)
    conf = migration_conf.load(cfg.ConfigOpts(), ["--config-file", path],
                               "bench")
    manager = manager_mod.ConductorManager(conf)
    start = time.monotonic()
    job_id = manager.migrate(image_ids, "west", pack=pack)["id"]
    while manager.show(job_id)["state"] not in states.FINISHED:
        time.sleep(0.05)
    seconds = time.monotonic() - start
    job = manager.show(job_id)
    if job["state"] != states.DONE:
        raise RuntimeError("%s run ended %s: %s" % (name, job["state"],
                                                    job["error"]))
    runs = manager.store.runs(job_id)
    manager.stop()
    return seconds, runs


def forget_destination(lab, image_ids):
    """Delete the migrated images and purge them, so their ids are free."""
    for image_id in image_ids:
        lab.west.glance._request("/v2/images/%s" % image_id, "DELETE")
    manage = os.path.join(os.path.dirname(sys.executable), "glance-manage")
    for command in ("purge", "purge_images_table"):
        subprocess.run([manage, "--config-file",
                        lab.west.glance.config_file, "db", command,
                        "--age_in_days", "0"], check=True,
                       capture_output=True)


def _scp(lab, paths):
    site = lab.west.sshd
    start = time.monotonic()
    subprocess.run(
        ["scp", "-q", "-P", str(lab.ssh_link[1]), "-i", site.key,
         "-o", "UserKnownHostsFile=%s" % site.known_hosts,
         "-o", "HostKeyAlias=[127.0.0.1]:%d" % site.port,
         "-o", "BatchMode=yes"] + paths +
        ["%s@%s:%s/" % (site.user, lab.ssh_link[0], lab.west.export)],
        check=True, timeout=3600)
    return time.monotonic() - start


def _glance_download(lab, image_ids, timeout=3600):
    """Glance's own way between two clouds, across the same link.

    The destination's glance-api imports each image from the source's
    (``glance-download``: the user's token, the source found in the
    catalog under a region whose endpoint crosses the link), all at once
    as a user would ask; seconds until every copy is active.
    """
    port = lab.wan.add_link("glance-east", lab.east.glance.port)
    lab.keystone.add_endpoint("image", "glance", "http://%s:%d" % (
        lab.wan.host, port), LINKED_REGION)
    # As its operator would: the destination may fetch from that port.
    with lab.west.glance.reconfigured("import_filtering_opts",
                                      allowed_ports="[%d]" % port):
        start = time.monotonic()
        copies = [lab.west.glance.import_from_glance(
            "downloaded-%d" % n, LINKED_REGION, image_id)
            for n, image_id in enumerate(image_ids)]
        while True:
            states = [lab.west.glance.image(c)["status"] for c in copies]
            if all(state == "active" for state in states):
                return time.monotonic() - start
            for copy in copies:
                failed = lab.west.glance.failed_import(copy)
                if failed:
                    raise RuntimeError(
                        "glance-download of %s failed: %s\n%s" % (
                            copy, failed, _errors(os.path.join(
                                lab.west.glance.workdir, "glance.log"))))
            if time.monotonic() - start > timeout:
                raise RuntimeError("glance-download still %s" % states)
            time.sleep(0.5)


def _errors(log, count=5):
    """The last ``count`` errors in a service's log."""
    with open(log, errors="replace") as f:
        return "".join([line for line in f if " ERROR " in line][-count:])


#: The source Glance's region as the destination reaches it over the link.
LINKED_REGION = "east-over-the-dtn-link"


def stage_seconds(runs):
    totals = {}
    for run in runs:
        if run["outcome"] != "done":
            continue
        seconds = (run["finished_at"] - run["started_at"]).total_seconds()
        totals[run["stage"]] = totals.get(run["stage"], 0.0) + seconds
    return totals


def run(quick=False, plot=None, rtt_ms=20, rate_mbit=500, streams=4):
    count = 4
    size = (64 if quick else 512) * MIB
    link_mibps = rate_mbit / 8.0 * 1e6 / MIB
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        paths = data.image_files(work, "image%d.raw", count, size)
        with linked_lab(work, paths, rtt_ms, rate_mbit) as (lab,
                                                            image_ids):
            sequential, seq_runs = migrate_once(
                lab, work, image_ids, "sequential", 1, streams)
            forget_destination(lab, image_ids)
            pipelined, pipe_runs = migrate_once(
                lab, work, image_ids, "pipelined", 3, streams)
            scp = _scp(lab, paths)
            downloaded = _glance_download(lab, image_ids)
    stages = stage_seconds(seq_runs)
    slowest = max(stages.values())
    total_mib = count * size / MIB
    print("\nmigrate: %d images x %d MiB; DTN link %d ms RTT, %d Mbit/s "
          "(%.1f MiB/s), GridFTP %d streams" % (
              count, size // MIB, rtt_ms, rate_mbit, link_mibps, streams))
    print("%-34s %9s %9s" % ("run", "seconds", "MiB/s"))
    rows = [("%s, all images (sequential run)" % STAGE_NAMES[stage],
             stages[stage]) for stage in states.STAGES if stage in stages]
    rows += [("paper's procedure (sequential)", sequential),
             ("pipelined conductor", pipelined),
             ("plain scp between the DTNs", scp),
             ("Glance's glance-download import", downloaded)]
    for name, seconds in rows:
        print("%-34s %9.1f %9.1f" % (name, seconds, total_mib / seconds))
    ratios = {
        "pipelined_vs_slowest_stage": pipelined / slowest,
        "pipelined_vs_link_rate": total_mib / pipelined / link_mibps,
        "sequential_vs_pipelined": sequential / pipelined,
        "scp_vs_pipelined": scp / pipelined,
        "glance_download_vs_pipelined": downloaded / pipelined,
    }
    for name, value in ratios.items():
        print("%-30s %6.2f" % (name, value))
    metrics = {"images": count, "image_mib": size // MIB, "rtt_ms": rtt_ms,
               "rate_mbit": rate_mbit, "streams": streams,
               "link_mibps": link_mibps,
               "sequential_seconds": sequential,
               "pipelined_seconds": pipelined, "scp_seconds": scp,
               "glance_download_seconds": downloaded}
    metrics.update(("%s_seconds" % stage, seconds)
                   for stage, seconds in stages.items())
    if plot:
        _plot(seq_runs, pipe_runs, plot)
    return {"scenario": "migrate", "metrics": metrics, "ratios": ratios}


def _plot(seq_runs, pipe_runs, path):
    plt = charts.pyplot()
    colours = {states.LOCAL_COPY: "tab:blue", states.TRANSFER: "tab:red",
               states.REMOTE_COPY: "tab:green"}
    fig, axes = plt.subplots(2, 1, figsize=(11, 5), sharex=True)
    for ax, runs, title in ((axes[0], seq_runs, "paper's procedure"),
                            (axes[1], pipe_runs, "pipelined conductor")):
        done = [r for r in runs if r["outcome"] == "done"]
        origin = min(r["started_at"] for r in done)
        for r in done:
            start = (r["started_at"] - origin).total_seconds()
            length = (r["finished_at"] - r["started_at"]).total_seconds()
            ax.barh(r["position"], length, left=start,
                    color=colours[r["stage"]], edgecolor="black")
        ax.set_title(title)
        ax.set_ylabel("image")
        ax.invert_yaxis()
    axes[1].set_xlabel("seconds")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in
               colours.values()]
    axes[0].legend(handles, [STAGE_NAMES[s] for s in colours],
                   loc="upper right")
    charts.save(fig, path)
