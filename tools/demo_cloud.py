# SPDX-License-Identifier: Apache-2.0
"""The cloud demo: a golden image booted from the DTN, then sent away.

``tox -e demo-cloud`` brings up two loopback clouds that share one
Keystone (:class:`gvfs_lab.drlab.DrLab`: each site a DTN with
NFS-Ganesha, GridFTP and sshd, and a glance-api whose default store is
``gvfs`` on that DTN) and, at site ``east``, the whole of Nova on the
lab's libvirtd (QEMU with TCG) as a compute host that reaches its DTN
across an emulated WAN (50 ms RTT, 200 Mbit/s, shared by every
connection) through its own caching client proxy and FUSE mount, as
the deployment guide sets up a compute node.  Then, as a member of
project ``alpha`` with the real ``openstack`` CLI:

1. ``openstack image create`` puts the lab's test guest (its kernel,
   initramfs and qcow2 disk) into the ``gvfs`` store;
2. ``openstack server create`` boots it on the cold compute host, the
   ``gvfs`` backend cloning it as an overlay fetched on demand across
   the WAN, and again from the same image in Glance's ``file`` store,
   which Nova downloads across the same WAN into ``_base`` first (its
   own path); the seconds to the guest's marker are printed side by side
   with the bytes that crossed the WAN;
3. ``openstack gvfs migrate --wait`` sends the image to site ``west``
   (local copy, GridFTP between the DTNs across an emulated 20 ms,
   500 Mbit/s link, registration in west's Glance), its progress shown
   as the CLI shows it (live bars on a terminal);
4. everything stops, each process by its PID.
"""

import argparse
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time

from gvfs_lab import drlab
from gvfs_lab import fusemount
from gvfs_lab import guest
from gvfs_lab import gvfs_api
from gvfs_lab import keystone as keystone_lab
from gvfs_lab import libvirt
from gvfs_lab import nova as nova_lab
from gvfs_lab import postgres
from gvfs_lab import process
from gvfs_lab import prometheus
from gvfs_lab import rabbitmq
from gvfs_lab import topology
from gvfs_lab import wan
from tools.bench import boot as boot_bench
from tools import dashboard_png

USER = "alpha-member"
MIB = 1024 * 1024
#: The link between the two sites' DTNs: (RTT ms, Mbit/s).
DTN_LINK = (20, 500)
#: The parts that serve metrics with ``--dashboards``, and their jobs
#: in Prometheus.
JOBS = {"compute-proxy": "gvfs-proxy", "dtn-proxy": "gvfs-proxy",
        "mount": "gvfs-mount", "conductor": "gvfs-conductor",
        "api": "gvfs-api"}
PARTS = tuple(JOBS)
DASHBOARDS = ("gvfs-proxies.json", "gvfs-mounts-and-jobs.json")


class _Steps:
    """Prints each step with the seconds since the demo began."""

    def __init__(self):
        self.began = time.monotonic()

    def say(self, text):
        print("[%5.0fs] %s" % (time.monotonic() - self.began, text),
              flush=True)


def _stopping(stack, part):
    stack.callback(part.stop)
    return part


def _compute_side(stack, work, east, rtt_ms, rate_mbit, metrics):
    """east's DTN as a compute host reaches it: proxy, WAN, client proxy.

    A second server proxy on the DTN for compute hosts (the deployment
    guide's), which may change nothing in the images directory but
    golden references and boot profiles; the compute host's caching
    client proxy across the emulated link to it.
    """
    link = _stopping(stack, wan.SharedLink(work, rate_mbit, rtt_ms))
    uid, gid = east.gridftp.uid, east.gridftp.gid
    # Files written through the DTN's proxies belong to its file
    # account: the references and profiles the compute host writes.
    os.chown(east.images, uid, gid)
    server = _stopping(stack, topology.Proxy(east.workdir, "compute-dtn", {
        "proxy": {"role": "server"},
        "listen": {"host": "127.0.0.1", "port": process.free_port(),
                   "allowed_peers": "127.0.0.1/32,%s/32" % link.host},
        "server": {"nfs_port": east.ganesha.nfs_port,
                   "mount_port": east.ganesha.mount_port,
                   "exports": east.export, "squash_uid": uid,
                   "squash_gid": gid, "read_only_dirs": east.images},
        **_metrics_at(metrics, "dtn-proxy")}))
    client = _stopping(stack, topology.Proxy(work, "compute-proxy", {
        "proxy": {"role": "client"},
        "listen": {"host": "127.0.0.1", "port": process.free_port()},
        "upstream": {"tunnel": "tcp", "host": link.host,
                     "port": link.add_link("dtn", server.port),
                     "reconnect_max_delay": 1.0},
        "cache": {"directory": os.path.join(work, "compute-cache"),
                  "capacity_mb": 2048, "consistency": "immutable"},
        **_metrics_at(metrics, "compute-proxy")}))
    return link, server, client


def _metrics_at(metrics, name):
    """A ``[metrics]`` section on the port ``metrics`` names, if any."""
    if name not in metrics:
        return {}
    return {"metrics": {"port": metrics[name]}}


def _gvfs_options(work, east, client, metrics):
    """``[gvfs]`` of the compute host: a FUSE mount with a RAM cache."""
    mount = {"read_cache_mb": 256}
    if "mount" in metrics:
        mount["metrics_port"] = metrics["mount"]
    mount_config = fusemount.write_mount_config(
        os.path.join(work, "compute-mount.conf"), mount)
    return {"mount_type": "fuse", "proxy": "127.0.0.1:%d" % client.port,
            "export": east.export, "image_dir": drlab.IMAGES_DIR,
            "glance_stores": [drlab.GVFS_STORE], "io_timeout": 60.0,
            "mount_config": mount_config}


def _migrate(api, image_id, say):
    """``openstack gvfs migrate --wait`` with its output shown live."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
    env.update(api.keystone.credentials(USER, api.region))
    say("$ openstack gvfs migrate %s --to west --wait" % image_id)
    started = time.monotonic()
    done = subprocess.run(
        [shutil.which("openstack") or os.path.join(
            os.path.dirname(sys.executable), "openstack"), "gvfs",
         "migrate", image_id, "--to", "west", "--wait",
         "--poll-interval", "1"], env=env, timeout=900)
    if done.returncode:
        raise process.LabError("openstack gvfs migrate exited %d"
                               % done.returncode)
    return time.monotonic() - started


def run(rtt_ms, rate_mbit, dashboards=None):
    """The demo, as the module says.

    With ``dashboards`` (a directory) every part serves Prometheus
    metrics, a Prometheus scrapes them, and both Grafana dashboards are
    drawn there from it at the end.
    """
    steps = _Steps()
    metrics = {name: process.free_port() for name in PARTS} \
        if dashboards else {}
    golden = guest.golden(spec=guest.FUNCTIONAL)
    steps.say("the test guest: a %d MiB qcow2 of a %d MiB disk, its boot "
              "reading %d blocks of it" % (
                  os.path.getsize(golden.qcow2) // MIB,
                  golden.disk_bytes // MIB, len(golden.boot_set)))
    with tempfile.TemporaryDirectory(prefix="gvfs-cloud-demo-") as work, \
            contextlib.ExitStack() as stack:
        steps.say("starting Keystone and two sites (DTNs, GridFTP, sshd, "
                  "glance-api; their DTNs %d ms and %d Mbit/s apart) in %s"
                  % (*DTN_LINK, work))
        keystone = _stopping(stack, keystone_lab.Keystone(
            os.path.join(work, "keystone")))
        keystone.start()
        dr = stack.enter_context(drlab.DrLab(
            os.path.join(work, "dr"), dtn_link=DTN_LINK, keystone=keystone))
        east = dr.east
        steps.say("a compute host across a %d ms, %d Mbit/s WAN from "
                  "east's DTN; Nova (placement, api, conductor, "
                  "scheduler, compute on libvirt/QEMU)"
                  % (rtt_ms, rate_mbit))
        link, dtn_proxy, client = _compute_side(stack, work, east, rtt_ms,
                                                rate_mbit, metrics)
        scraper = None
        if metrics:
            jobs = {}
            for name, port in metrics.items():
                jobs.setdefault(JOBS[name], []).append(port)
            scraper = _stopping(stack, prometheus.Prometheus(
                os.path.join(work, "prometheus"), jobs))
            began = time.time()
            steps.say("Prometheus scraping %s" % ", ".join(sorted(metrics)))
        hv = _stopping(stack, libvirt.Libvirt(os.path.join(work,
                                                           "libvirt")))
        db = _stopping(stack, postgres.PostgreSQL(os.path.join(
            work, "nova-postgres")))
        broker = _stopping(stack, rabbitmq.RabbitMQ(os.path.join(
            work, "rabbitmq")))
        glance_across = "http://%s:%d" % (link.host, link.add_link(
            "glance", east.glance.port))
        cloud = _stopping(stack, nova_lab.Nova(
            os.path.join(work, "nova"), keystone, east.glance, broker, db,
            hv, _gvfs_options(work, east, client, metrics),
            extra={"glance": {"endpoint_override": glance_across}}))
        cloud.cli("flavor", "create", "--ram", "256", "--disk", "1",
                  "--vcpus", "1", "--public", boot_bench.FLAVOR,
                  user="admin")

        steps.say("$ openstack image create --file <kernel, initramfs, "
                  "disk>: into east's default store, gvfs on the DTN")
        uploaded = cloud.upload_guest(golden, "demo-golden")
        local = east.glance.add_image(
            "demo-golden-file-store", golden.qcow2, drlab.FILE_STORE,
            user=USER, disk_format="qcow2", kernel_id=uploaded["kernel"],
            ramdisk_id=uploaded["ramdisk"])
        steps.say("the same disk in Glance's file store (%s), for Nova's "
                  "own path" % local["id"])

        rows = []
        for label, image in (("gvfs: overlay on the golden image, cold "
                              "host", uploaded["disk"]),
                             ("Nova's own path: download to _base first",
                              local["id"])):
            steps.say("$ openstack server create --image %s  (%s)" % (
                image, label))
            before = link.bytes_sent()
            # As the boot benchmark times it: server create to the
            # guest's marker; the server deleted after.
            [seconds], _ = boot_bench.boot(cloud, image,
                                           "demo-%d" % len(rows))
            rows.append((label, seconds, link.bytes_sent() - before))
            steps.say("  the guest's marker after %.1f s" % seconds)
        print("\n  %-46s %8s %8s" % ("first boot on a cold host", "seconds",
                                     "WAN MiB"))
        for label, seconds, moved in rows:
            print("  %-46s %8.1f %8.1f" % (label, seconds, moved / MIB))
        print("  gvfs against Nova's own path: %.2fx the time.  gvfs's WAN "
              "bytes are the\n  boot's blocks, then the rest of the image "
              "streamed behind them at low\n  priority, so that later "
              "boots on this host are local.\n" % (
                  rows[0][1] / rows[1][1]))

        steps.say("starting gvfs-conductor and gvfs-api (east)")
        os.makedirs(os.path.join(work, "gvfs-api"))
        api = stack.enter_context(gvfs_api.conductor_and_api(
            dr, keystone, broker.url, os.path.join(work, "gvfs-api"),
            sections=_metrics_at(metrics, "conductor"),
            api_sections=_metrics_at(metrics, "api")))
        seconds = _migrate(api, uploaded["disk"], steps.say)
        copy = dr.west.glance.image(uploaded["disk"])
        steps.say("at west after %.1f s: %s, %s, checksum %s" % (
            seconds, copy["name"], copy["status"],
            "the same" if copy["os_hash_value"] == east.glance.image(
                uploaded["disk"])["os_hash_value"] else "DIFFERENT"))
        if scraper is not None:
            # A last scrape of the job's end, then the pictures.
            time.sleep(2 * scraper.interval)
            _draw(scraper, began, time.time(), dashboards, steps.say)
        steps.say("stopping everything")
    steps.say("done: every process the demo started has exited")
    return 0


def _draw(scraper, began, ended, directory, say):
    os.makedirs(directory, exist_ok=True)
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for name in DASHBOARDS:
        png = os.path.join(directory, name.replace(".json", ".png"))
        empty = dashboard_png.draw(
            os.path.join(top, "etc", "grafana", name), scraper, began,
            ended, png, "the cloud demo, drawn from its Prometheus")
        say("%s drawn%s" % (png, "; no data: " + ", ".join(empty)
                            if empty else ""))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="tox -e demo-cloud --")
    parser.add_argument("--rtt-ms", type=int, default=50)
    parser.add_argument("--rate-mbit", type=int, default=200)
    parser.add_argument("--dashboards", metavar="DIR",
                        help="serve every part's metrics to a Prometheus "
                             "and draw etc/grafana's dashboards from it "
                             "into DIR")
    args = parser.parse_args(argv)
    return run(args.rtt_ms, args.rate_mbit, args.dashboards)


if __name__ == "__main__":
    sys.exit(main())
