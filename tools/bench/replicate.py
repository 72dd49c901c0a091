# SPDX-License-Identifier: Apache-2.0
"""Replication that keeps up: a stream of image versions, and its recovery
point.

The two-cloud lab (gvfs_lab/drlab.py) with its DTN link emulated by a
shaped veth pair (default 500 Mbit/s, 20 ms RTT).  A replication policy
on the tag ``dr`` follows the source Glance; the lab's Glance sends no
notifications, so the policy is reconciled every half second, as a
notification would wake it.  The stream: two new golden images, then
two new versions of each (each differing from the one before in 3% of
its 4 KiB blocks), one every few seconds, each uploaded into the source
DTN's ``gvfs`` store with the tag.

Baseline, measured first in the same run: one full transfer alone (an
unrelated image of the same size migrated by itself).  Reported: each
version's bytes over the DTN link and DTN-to-DTN seconds, delta against
whole; the recovery point over time (the plot), whose peak is compared
with the one full transfer.  After the stream, one more version goes
alone: the delta's cost without the stream's uploads and other jobs on
the same cores (a metric beside the ratios).
"""

import datetime
import os
import random
import shutil
import tempfile
import threading
import time

from oslo_config import cfg

from gvfs_lab import drlab
from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack.migration import manager as manager_mod
from gvfs_openstack.migration import states
from gvfs_openstack.replication import manager as replication_mod
from tools.bench import charts
from tools.bench import data
from tools.bench import migrate

MIB = 1024 * 1024
BLOCK = 4096
CHANGED = 0.03
TAG = "dr"


def new_version(previous, path, share, seed):
    """``previous`` with ``share`` of its 4 KiB blocks rewritten at random."""
    shutil.copyfile(previous, path)
    size = os.path.getsize(path)
    rng = random.Random(seed)
    with open(path, "r+b") as f:
        for number in rng.sample(range(size // BLOCK),
                                 int(size // BLOCK * share)):
            f.seek(number * BLOCK)
            f.write(rng.randbytes(BLOCK))


def _stream(work, size):
    """The six events: (image name, file), in the order they happen."""
    paths = {}
    events = []
    for family in ("golden-a", "golden-b"):
        path = os.path.join(work, family + "-v1.raw")
        data.random_file(path, size)
        paths[family] = path
        events.append((family + "-v1", path))
    for version in (2, 3):
        for family in ("golden-a", "golden-b"):
            path = os.path.join(work, "%s-v%d.raw" % (family, version))
            new_version(paths[family], path, CHANGED,
                        "%s-%d" % (family, version))
            paths[family] = path
            events.append(("%s-v%d" % (family, version), path))
    os.chmod(work, 0o755)
    return events


def _conductor(lab, work, name):
    path = lab.conductor_config(
        os.path.join(work, name + ".conf"),
        "sqlite:///%s" % os.path.join(work, name + ".sqlite"))
    conf = migration_conf.load(cfg.ConfigOpts(), ["--config-file", path],
                               "bench")
    return conf, manager_mod.ConductorManager(conf)


def _wait_job(manager, job_id):
    while manager.show(job_id)["state"] not in states.FINISHED:
        time.sleep(0.1)
    job = manager.show(job_id)
    if job["state"] != states.DONE:
        raise RuntimeError("job %s ended %s: %s" % (job_id, job["state"],
                                                    job["error"]))
    return job


def _transfer_seconds(manager, job_id):
    return migrate.stage_seconds(manager.store.runs(job_id))[states.TRANSFER]


def _job_seconds(job):
    created = datetime.datetime.fromisoformat(job["created_at"])
    ended = datetime.datetime.fromisoformat(job["updated_at"])
    return (ended - created).total_seconds()


class _Follower(threading.Thread):
    """Reconciles the policy every ``every`` s; samples its recovery point."""

    def __init__(self, replication, policy_id, every=0.5):
        super().__init__(daemon=True)
        self.replication = replication
        self.policy_id = policy_id
        self.every = every
        self.samples = []       # (seconds since start, recovery point)
        self.stop = threading.Event()
        self.start_time = time.monotonic()

    def run(self):
        while not self.stop.wait(self.every):
            self.replication.reconcile()
            view = self.replication.show(self.policy_id)
            self.samples.append((time.monotonic() - self.start_time,
                                 view["recovery_point_seconds"],
                                 view["images_in_sync"]))


def run(quick=False, plot=None, rtt_ms=20, rate_mbit=500, gap=None):
    size = (64 if quick else 512) * MIB
    gap = gap if gap is not None else (1.0 if quick else 4.0)
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        events = _stream(work, size)
        alone = os.path.join(work, "alone.raw")
        data.random_file(alone, size)
        with drlab.DrLab(os.path.join(work, "lab"),
                         dtn_link=(rtt_ms, rate_mbit)) as lab:
            conf, manager = _conductor(lab, work, "conductor")
            # The baseline: one full transfer, alone on the link.
            image = lab.east.glance.add_image("alone", alone,
                                              drlab.GVFS_STORE)
            job = _wait_job(manager, manager.migrate([image["id"]],
                                                     "west")["id"])
            full_job = _job_seconds(job)
            full_transfer = _transfer_seconds(manager, job["id"])
            replication = replication_mod.ReplicationManager(conf, manager)
            policy = replication.create(image["owner"], None, "west", "tag",
                                        {"tag": TAG}, name="bench")
            follower = _Follower(replication, policy["id"])
            link_before = lab.wan.bytes_sent()
            follower.start()
            uploaded = []
            for name, path in events:
                uploaded.append((name, time.monotonic() -
                                 follower.start_time,
                                 lab.east.glance.add_image(
                                     name, path, drlab.GVFS_STORE,
                                     os_distro="debian", tags=[TAG])))
                time.sleep(gap)
            while replication.show(policy["id"])["images_in_sync"] < \
                    len(events):
                time.sleep(0.2)
            follower.stop.set()
            follower.join()
            link_bytes = lab.wan.bytes_sent() - link_before
            # One more version, alone on the DTNs: what a delta costs
            # without the stream's other work on the same two cores.
            _, path = events[-2]
            alone_path = os.path.join(work, "golden-a-v4.raw")
            new_version(path, alone_path, CHANGED, "golden-a-4")
            image = lab.east.glance.add_image("golden-a-v4", alone_path,
                                              drlab.GVFS_STORE,
                                              os_distro="debian")
            job = _wait_job(manager, manager.migrate([image["id"]],
                                                     "west")["id"])
            if job["images"][0]["delta_base"] is None:
                raise RuntimeError("the version alone went whole")
            delta_alone = _transfer_seconds(manager, job["id"])
            records = {r["image_id"]: r for r in
                       replication.show(policy["id"])["images"]}
            versions = []
            for name, at, image in uploaded:
                job = manager.show(records[image["id"]]["job_id"])
                [row] = job["images"]
                versions.append({
                    "name": name, "uploaded_at": at,
                    "sent_bytes": row["sent_bytes"],
                    "delta": row["delta_base"] is not None,
                    "transfer_seconds": _transfer_seconds(manager,
                                                          job["id"]),
                    "job_seconds": _job_seconds(job)})
            manager.stop()
    return _report(size, rtt_ms, rate_mbit, gap, full_job, full_transfer,
                   versions, follower.samples, link_bytes, delta_alone, plot)


def _report(size, rtt_ms, rate_mbit, gap, full_job, full_transfer,
            versions, samples, link_bytes, delta_alone, plot):
    deltas = [v for v in versions if v["delta"]]
    print("\nreplicate: %d events of %d MiB, one every %.0f s (+ upload); "
          "DTN link %d ms RTT, %d Mbit/s; new versions differ in %.0f%% of "
          "their 4 KiB blocks" % (len(versions), size // MIB, gap, rtt_ms,
                                  rate_mbit, CHANGED * 100))
    print("%-14s %6s %12s %10s %12s %10s" % (
        "image", "delta", "MiB sent", "of size", "DTN-DTN s", "job s"))
    print("%-14s %6s %12.1f %10.3f %12.2f %10.2f" % (
        "full, alone", "no", size / MIB, 1.0, full_transfer, full_job))
    for v in versions:
        print("%-14s %6s %12.1f %10.3f %12.2f %10.2f" % (
            v["name"], "yes" if v["delta"] else "no", v["sent_bytes"] / MIB,
            v["sent_bytes"] / size, v["transfer_seconds"],
            v["job_seconds"]))
    max_rpo = max(rpo for _, rpo, _ in samples)
    print("bytes over the DTN link for the stream: %.1f MiB; recovery "
          "point at most %.1f s" % (link_bytes / MIB, max_rpo))
    print("one more version alone (no other work on the DTNs): DTN-DTN "
          "%.2f s, %.3f of the full transfer" % (delta_alone,
                                                 delta_alone / full_transfer))
    if not deltas:
        raise RuntimeError("no version went as a delta")
    ratios = {
        "delta_bytes_vs_full": max(v["sent_bytes"] for v in deltas) / size,
        "delta_time_vs_full": max(v["transfer_seconds"] for v in deltas) /
        full_transfer,
        "max_rpo_vs_one_transfer": max_rpo / full_job,
    }
    for name, value in ratios.items():
        print("%-30s %6.3f" % (name, value))
    metrics = {"image_mib": size // MIB, "rtt_ms": rtt_ms,
               "rate_mbit": rate_mbit, "gap_seconds": gap,
               "full_transfer_seconds": full_transfer,
               "full_job_seconds": full_job, "max_rpo_seconds": max_rpo,
               "link_bytes": link_bytes, "versions": versions,
               "delta_alone_seconds": delta_alone,
               "delta_alone_vs_full": delta_alone / full_transfer,
               "delta_job_vs_full_job": max(v["job_seconds"]
                                            for v in deltas) / full_job}
    if plot:
        _plot(samples, versions, full_job, plot)
    return {"scenario": "replicate", "metrics": metrics, "ratios": ratios}


def _plot(samples, versions, full_job, path):
    plt = charts.pyplot()
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot([t for t, _, _ in samples], [rpo for _, rpo, _ in samples],
            color="tab:red", label="recovery point")
    ax.axhline(full_job, color="grey", linestyle="--",
               label="one full transfer")
    ax.axhline(2 * full_job, color="grey", linestyle=":",
               label="target (twice one transfer)")
    for v in versions:
        ax.axvline(v["uploaded_at"], color="tab:blue", alpha=0.3)
        ax.annotate(v["name"], (v["uploaded_at"], 0), rotation=90,
                    fontsize=7, va="bottom")
    ax.set_xlabel("seconds")
    ax.set_ylabel("recovery point (s)")
    ax.legend(loc="upper right")
    charts.save(fig, path)
