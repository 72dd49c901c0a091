# SPDX-License-Identifier: Apache-2.0
"""Real guests booted by the real Nova: Nova's own path against ``gvfs``.

One loopback cloud (Keystone, glance-api, Placement, Nova's services and
the stock nova-compute on the lab's libvirtd, QEMU with TCG), the DTN
across an emulated WAN link (50 ms RTT, 200 Mbit/s, its rate shared by
every connection, as ``clone``), and Nova reaching glance-api across the
same link.  The lab's test guest (a 1 GiB golden disk whose guest reads
5% of its blocks, scattered, and prints a marker on its serial console)
is uploaded twice: into the ``file`` store, which Nova downloads into
``_base`` as usual (``images_type = qcow2``), and into the ``gvfs``
store on the DTN, which the ``gvfs`` backend clones as an overlay on the
compute host's GVFS mount.  The time is from ``openstack server create``
to the marker in the instance's console log:

* Nova's own path: first boot (download to ``_base``) and a later boot;
* ``gvfs``: the first boot ever (a cold host, no boot profile anywhere),
  a later boot, a fresh host (new mount, new empty proxy) behind the
  first host's proxy as its warm LAN cache, and a first boot on another
  cold host once the first host's proxy has written the image's boot
  profile beside it on the DTN (the profile's blocks fetched ahead of
  the guest);
* 4 servers created at once from the golden image on a cold host (a new
  proxy with an empty cache across the link, the profile on the DTN),
  and, as that case's floor,
  4 at once by Nova's own path with the image already in ``_base``
  (nothing to fetch: four TCG guests and Nova's control path sharing
  the machine's cores).

Every boot runs under TCG on the machine's cores: the guest's own boot
(its uptime at the marker) is the floor of every figure, and is shown;
Nova's later boot (everything local) is the floor the ratios name.  The
bytes the DTN's server proxy sent per boot are shown against the boot
set's size.
"""

import json
import os
import shutil
import statistics
import tempfile
import time

from gvfs_lab import bootset
from gvfs_lab import debian_guest
from gvfs_lab import fusemount
from gvfs_lab import glance_api
from gvfs_lab import guest
from gvfs_lab import keystone as keystone_lab
from gvfs_lab import libvirt
from gvfs_lab import nova as nova_lab
from gvfs_lab import postgres
from gvfs_lab import process
from gvfs_lab import rabbitmq
from gvfs_lab.topology import Lab
from gvfs_openstack.mount import mounter
from gvfs_openstack.sidecar import profile
from tools.bench import charts

MIB = 1024 * 1024
FLAVOR = "lab.tiny"
MARKER_TIMEOUT = 600.0
CACHE = {"capacity_mb": 2048, "consistency": "immutable"}
#: ``[mount] read_cache_mb`` of the compute hosts, as the deployment
#: guide sets it.
READ_CACHE_MB = 256
#: Later boots are measured this many times (the median is reported):
#: one TCG boot on two busy cores varies by some tenths of a second,
#: as much as the target's margin.
LATER_RUNS = 3


def _drop_page_cache():
    """So that a cold read is read from the disk, not from RAM."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def _cold_compute_host(cloud):
    """The compute host's page cache dropped, the control plane's not.

    In a cloud the user's CLI, Keystone and nova-api run on other
    machines and stay warm while a compute host is cold; here they share
    this one, and a dropped page cache would charge their cold start
    (the CLI's Python imports, about a second) to the boot.  A listing
    warms them again; the compute host's QEMU, libvirt and images stay
    cold.
    """
    _drop_page_cache()
    _cli(cloud, "server", "list")


def _cli(cloud, *args, user="alpha-member"):
    result = cloud.openstack(*args, "-f", "json", user=user, timeout=900)
    if result.returncode:
        raise process.LabError("openstack %s: %s" % (
            " ".join(args[:2]), result.stderr[-2000:]))
    return json.loads(result.stdout) if result.stdout.strip() else None


def _upload(glance, golden, store, tag):
    """The guest's kernel, initramfs and disk in ``store``; the disk's id."""
    ids = {}
    for part, path, kind in (("kernel", golden.kernel, "aki"),
                             ("ramdisk", golden.initrd, "ari")):
        ids[part] = glance.create_image("boot-%s-%s" % (tag, part),
                                        disk_format=kind,
                                        container_format=kind)
        _uploaded(glance, ids[part], path, store)
    disk = glance.create_image("boot-%s" % tag, disk_format="qcow2",
                               kernel_id=ids["kernel"],
                               ramdisk_id=ids["ramdisk"])
    _uploaded(glance, disk, golden.qcow2, store)
    return disk


def _uploaded(glance, image_id, path, store):
    status = glance.upload(image_id, path, store=store)
    if status != 204:
        raise process.LabError("upload of %s to %s: %s"
                               % (path, store, status))


def _console(cloud, server_id):
    try:
        with open(os.path.join(cloud.instances_path, server_id,
                               "console.log"), errors="replace") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def _delete(cloud, name, servers):
    """Delete ``servers`` (all named ``name``...) and wait until gone.

    nova-api's workers sometimes drop a connection under the load of TCG
    guests on two cores, after the delete was done: each retry deletes
    only the servers still listed, so that one already gone is not an
    error.
    """
    left = servers
    for _ in range(3):
        deleted = cloud.openstack("server", "delete", "--wait", *left,
                                  timeout=900)
        if deleted.returncode == 0:
            return
        time.sleep(5)
        left = [s["ID"] for s in _cli(cloud, "server", "list", "--name",
                                      "^%s" % name) if s["ID"] in servers]
        if not left:
            return
    raise process.LabError("openstack server delete: %s"
                           % deleted.stderr[-2000:])


def boot(cloud, image, name, count=1):
    """Seconds from ``server create`` to each server's marker; markers.

    The servers are deleted afterwards.
    """
    start = time.monotonic()
    args = ["server", "create", "--image", image, "--flavor", FLAVOR,
            "--nic", "none", name]
    if count > 1:
        args[-1:-1] = ["--min", str(count), "--max", str(count)]
    _cli(cloud, *args)
    servers = [s["ID"] for s in _cli(cloud, "server", "list", "--name",
                                     "^%s" % name)]
    if len(servers) != count:
        raise process.LabError("%d servers named %s, not %d"
                               % (len(servers), name, count))
    seconds, markers = {}, {}
    deadline = start + MARKER_TIMEOUT
    while len(seconds) < count:
        if time.monotonic() > deadline:
            raise process.LabError("no marker from %s within %d s" % (
                sorted(set(servers) - set(seconds)), MARKER_TIMEOUT))
        for server_id in servers:
            if server_id in seconds:
                continue
            found = bootset.find_marker(_console(cloud, server_id))
            if found is not None:
                seconds[server_id] = time.monotonic() - start
                markers[server_id] = found
        time.sleep(0.2)
    _delete(cloud, name, servers)
    return [seconds[s] for s in servers], [markers[s] for s in servers]


class _Unmounting:
    """Stops as a lab part: unmounts what glance-api's store mounted."""

    def __init__(self, base):
        self.base = base

    def stop(self):
        if os.path.isdir(self.base):
            mounter.FuseMounter(self.base).unmount_all()


def _gvfs(proxy, export, work, host):
    """``[gvfs]`` of a compute host whose mount is set as deployed.

    The deployment guide gives compute nodes' mounts a RAM cache of what
    guests read (``[mount] read_cache_mb``): guests with ``cache=none``
    bypass the page cache for their golden image too.
    """
    mount_config = fusemount.write_mount_config(
        os.path.join(work, host + "-mount.conf"),
        {"read_cache_mb": READ_CACHE_MB})
    return {"mount_type": "fuse", "proxy": "127.0.0.1:%d" % proxy.port,
            "export": export, "image_dir": "images",
            "glance_stores": ["dtn"], "io_timeout": 60.0,
            "mount_config": mount_config}


#: The guests, by the name their rows carry: the worst case (one
#: O_DIRECT 64 KiB read at a time, scattered) and a Debian root file
#: system read as a boot reads it (buffered, read-ahead, four readers).
GUESTS = {"worst-case": lambda: guest.golden(),
          "debian": lambda: debian_guest.golden()}


def _compute_on(cloud, lab, work, proxy, host):
    """nova-compute again, as fresh host ``host`` behind ``proxy``."""
    cloud.restart_compute(_gvfs(proxy, lab.export, work, host), host)


def run(quick=False, plot=None, rtt_ms=50, rate_mbit=200,
        guests=tuple(GUESTS)):
    images = {name: GUESTS[name]() for name in guests}
    results = {}
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        parts = []
        try:
            keystone = keystone_lab.Keystone(os.path.join(work, "keystone"))
            keystone.start()
            parts.append(keystone)
            lab = Lab(os.path.join(work, "lab"), tunnel="tcp",
                      wan=(rtt_ms, rate_mbit), cache=CACHE).__enter__()
            parts.append(lab)
            local = os.path.join(work, "file-store")
            os.makedirs(local)
            glance_mounts = os.path.join(work, "glance-mounts")
            # glance-api sits beside the DTN: its store mounts the export
            # through the server proxy, and Nova reaches its API across
            # the link.
            glance = glance_api.GlanceApi(os.path.join(work, "glance"), {
                "dtn": ("gvfs", lab.gvfs_store_options(
                    "images", glance_mounts,
                    gvfs_store_proxy="127.0.0.1:%d" % lab.server_proxy.port,
                    gvfs_store_io_timeout=120)),
                "local": ("file", {"filesystem_store_datadir": local}),
            }, keystone, workers=2)
            parts.append(_Unmounting(glance_mounts))
            parts.append(glance)
            glance_url = "http://%s:%d" % (
                lab.shared_link.host,
                lab.shared_link.add_link("glance", glance.port))
            hv = libvirt.Libvirt(os.path.join(work, "libvirt"))
            parts.append(hv)
            db = postgres.PostgreSQL(os.path.join(work, "postgres"))
            parts.append(db)
            broker = rabbitmq.RabbitMQ(os.path.join(work, "rabbitmq"))
            parts.append(broker)
            cloud = nova_lab.Nova(
                os.path.join(work, "nova"), keystone, glance, broker, db,
                hv, _gvfs(lab.client_proxy, lab.export, work, "nova"),
                extra={"glance": {"endpoint_override": glance_url}})
            parts.append(cloud)
            _cli(cloud, "flavor", "create", "--ram", "256", "--disk", "1",
                 "--vcpus", "1", "--public", FLAVOR, user="admin")
            for name, golden in images.items():
                print("\n%s guest" % name, flush=True)
                if results:
                    # The first host again, with a fresh mount, as the
                    # first guest's cases began.
                    _compute_on(cloud, lab, work, lab.client_proxy,
                                "nova-" + name)
                results[name] = _cases(cloud, lab, glance, work, golden,
                                       name, quick)
        finally:
            if plot:
                _keep_logs(work, os.path.join(os.path.dirname(plot),
                                              "boot-logs"))
            for part in reversed(parts):
                part.stop()
    reports = {name: _report(name, images[name], *results[name], rtt_ms,
                             rate_mbit) for name in images}
    if plot:
        _plot(reports, plot)
    return _combined(reports, rtt_ms, rate_mbit)


def _cases(cloud, lab, glance, work, golden, tag, quick):
    """Every case of one guest: rows, WAN bytes, profile, counters.

    The first host's proxy (the lab's client proxy, a LAN proxy for the
    fresh host) serves every guest; the other hosts are new for each
    guest, with empty caches.
    """
    rows = []
    #: label -> bytes across the WAN per boot
    wan = {}
    on_dtn = _upload(glance, golden, "dtn", "gvfs-" + tag)
    in_file_store = _upload(glance, golden, "local", "nova-" + tag)

    def measure(label, image, count=1, runs=1):
        """Boot ``count`` at once, ``runs`` times; the median."""
        taken = []
        sent = _wan_bytes(lab)
        for run in range(runs):
            started_at = time.strftime("%H:%M:%S")
            seconds, markers = boot(cloud, image, "%s%d-%d" % (
                tag[0], len(rows), run), count)
            for marker in markers:
                if marker.digest != golden.expected_digest:
                    raise process.LabError(
                        "%s: the guest read other bytes (%s)"
                        % (label, marker.digest))
            taken.append((max(seconds), max(m.uptime for m in markers)))
            print("%-44s %7.1f s (guest's own boot %.1f s, started at %s)"
                  % (label, *taken[-1], started_at), flush=True)
        rows.append((label, statistics.median(t[0] for t in taken),
                     statistics.median(t[1] for t in taken)))
        wan[label] = (_wan_bytes(lab) - sent) / runs

    def new_host(kind, name):
        proxy = getattr(lab, kind)("%s-%s" % (name, tag), cache=CACHE)
        _compute_on(cloud, lab, work, proxy, "nova-%s-%s" % (name, tag))
        return proxy

    later = 1 if quick else LATER_RUNS
    _cold_compute_host(cloud)
    measure(FIRST_EVER, on_dtn)
    first_ever = _ahead_counters(lab.client_proxy)
    _await_streams(lab.client_proxy)
    measure("gvfs, later boot", on_dtn, runs=later)
    fresh = new_host("add_leaf", "fresh")
    measure("gvfs, fresh host behind a warm LAN proxy", on_dtn)
    _await_streams(fresh)
    # The first host's proxy writes the profile once the image has been
    # quiet for profile_quiet_seconds.
    boot_profile = _await_profile(lab, on_dtn)
    profiled = new_host("add_client", "profiled")
    _cold_compute_host(cloud)
    measure(FIRST, on_dtn)
    ahead = _ahead_counters(profiled)
    _await_streams(profiled)
    if not quick:
        cold = new_host("add_client", "cold")
        _cold_compute_host(cloud)
        measure(FOUR, on_dtn, count=4)
        _await_streams(cold)
    _cold_compute_host(cloud)
    measure(NOVA_FIRST, in_file_store)
    measure(NOVA_LATER, in_file_store, runs=later)
    if not quick:
        measure(NOVA_FOUR, in_file_store, count=4)
    return rows, wan, boot_profile, {"first_ever": first_ever,
                                     "profiled": ahead}


def _keep_logs(work, target):
    """The services' logs beside the plot, to itemise a row afterwards.

    Each run's line says when its boot started (``started at``), in the
    logs' clock.
    """
    shutil.rmtree(target, ignore_errors=True)
    for directory, _, names in os.walk(work):
        for name in names:
            if name.endswith(".log"):
                source = os.path.join(directory, name)
                kept = os.path.join(target, os.path.relpath(source, work))
                os.makedirs(os.path.dirname(kept), exist_ok=True)
                shutil.copyfile(source, kept)


def _ahead_counters(proxy):
    """What a host's proxy fetched ahead of its guest, and missed.

    Taken at the guest's marker: the stream may go on after it.
    """
    stats = proxy.stats()
    return {key: stats[key] for key in (
        "prefetches", "prefetch_blocks", "prefetch_bytes",
        "prefetch_blocks_present", "stream_blocks", "stream_wire_bytes",
        "cache_misses", "cache_collapsed", "cache_hits",
        "cache_bytes_fetched")}


def _await_streams(proxy, timeout=600.0):
    """Until the image streams of ``proxy`` have ended.

    A stream may go on after its guest's marker (it waits for the boot
    to be over when a profile covers it): the next case must not share
    the cores with it.
    """
    def ended():
        stats = proxy.stats()
        return stats["streams"] == stats["streams_done"] + \
            stats["streams_stopped"]
    process.wait_until(ended, "the image streams of %s" % proxy.name,
                       timeout, interval=1.0)


def _wan_bytes(lab):
    """Bytes the DTN's server proxy has sent across the WAN so far."""
    return lab.server_proxy.stats()["downstream_bytes_out"]


def _await_profile(lab, image_id, timeout=180.0):
    """The golden image's boot profile, once the first host wrote it."""
    images = os.path.join(lab.export, "images")
    path = profile.profile_path(os.path.join(images, image_id))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(path, "rb") as f:
                return profile.parse(f.read())
        except (FileNotFoundError, profile.ProfileError):
            time.sleep(1)
    raise process.LabError("no boot profile of %s within %d s"
                           % (image_id, timeout))


FIRST_EVER = "gvfs, first boot ever (no profile anywhere)"
FIRST = "gvfs, first boot on a cold host, with a profile"
FOUR = "gvfs, 4 servers at once on a cold host"
NOVA_FIRST = "Nova's own path, first boot"
NOVA_LATER = "Nova's own path, later boot"
NOVA_FOUR = "Nova's own path, 4 at once, image in _base"
#: What each guest reads at boot, for the table's title.
READS = {"worst-case": "5% of its 64 KiB blocks, one O_DIRECT read at a "
                       "time, scattered",
         "debian": "the files a Debian boot reads, buffered, 4 readers"}
#: Ratios that must stay at most their target; the others (floors) are
#: facts of the machine.  The combined ratio is the worse guest's.
AT_MOST = ("gvfs_first_vs_nova_later", "gvfs_first_ever_vs_nova_later",
           "gvfs_fresh_lan_vs_nova_later", "gvfs_later_vs_nova_later",
           "gvfs_first_vs_nova_first", "gvfs_first_ever_vs_nova_first",
           "gvfs_four_at_once_vs_nova_four_local")


def _report(name, golden, rows, wan, boot_profile, ahead, rtt_ms,
            rate_mbit):
    """One guest's table and ratios (printed); its part of the JSON."""
    boot_set = golden.boot_bytes
    seconds = {label: s for label, s, _ in rows}
    nova_first = seconds[NOVA_FIRST]
    nova_later = seconds[NOVA_LATER]
    floor = min(uptime for _, _, uptime in rows)
    print("\nboot, %s guest (1 GiB golden disk; its boot reads %s), QEMU "
          "TCG; WAN link %d ms RTT, %d Mbit/s"
          % (name, READS.get(name, "its boot set"), rtt_ms, rate_mbit))
    print("boot set %.1f MiB; the recorded profile names %d blocks (%.1f "
          "MiB)" % (boot_set / MIB, len(boot_profile.blocks),
                    len(boot_profile.blocks) * boot_profile.block_size
                    / MIB))
    for host, what in (("first_ever", "the first host, first boot ever"),
                       ("profiled", "the cold host with a profile")):
        print("%s, at its guest's marker: %s" % (what, ", ".join(
            "%s %d" % item for item in ahead[host].items())))
    print("%-48s %9s %12s %10s" % ("server create to the guest's marker",
                                   "seconds", "guest boot",
                                   "WAN/boot set"))
    for label, s, uptime in rows:
        print("%-48s %9.1f %12.1f %10.2f" % (label, s, uptime,
                                             wan[label] / boot_set))
    ratios = {
        "gvfs_first_vs_nova_later": seconds[FIRST] / nova_later,
        "gvfs_first_ever_vs_nova_later": seconds[FIRST_EVER] / nova_later,
        "gvfs_fresh_lan_vs_nova_later":
            seconds["gvfs, fresh host behind a warm LAN proxy"]
            / nova_later,
        "gvfs_later_vs_nova_later":
            seconds["gvfs, later boot"] / nova_later,
        "gvfs_first_vs_nova_first": seconds[FIRST] / nova_first,
        "gvfs_first_ever_vs_nova_first": seconds[FIRST_EVER] / nova_first,
        # What no backend can go below here: the guest's own boot.
        "guest_boot_floor_vs_nova_later": floor / nova_later,
        # The floor of the *_vs_nova_first ratios: a boot with
        # everything local, against a first boot that downloads.
        "nova_later_vs_nova_first": nova_later / nova_first,
    }
    if FOUR in seconds and NOVA_FOUR in seconds:
        # Nova's four with nothing to fetch: no backend can boot four
        # guests on these cores in less.
        ratios["gvfs_four_at_once_vs_nova_four_local"] = \
            seconds[FOUR] / seconds[NOVA_FOUR]
    for ratio, value in ratios.items():
        print("%-38s %6.2f" % (ratio, value))
    return {"rows": rows, "ratios": ratios, "metrics": {
        "boot_set_bytes": boot_set,
        "profile_blocks": len(boot_profile.blocks),
        "host_counters": ahead,
        "wan_bytes": wan,
        "seconds": seconds, "guest_boot_seconds": {
            label: uptime for label, _, uptime in rows}}}


def _combined(reports, rtt_ms, rate_mbit):
    """The JSON: each ratio of the worse guest, and every guest's own."""
    ratios = {}
    for report in reports.values():
        for ratio, value in report["ratios"].items():
            if ratio in AT_MOST:
                ratios[ratio] = max(value, ratios.get(ratio, value))
    for name, report in reports.items():
        for ratio, value in report["ratios"].items():
            ratios["%s:%s" % (name, ratio)] = value
    if len(reports) > 1:
        print("\nthe worse guest's ratios:")
        for ratio in AT_MOST:
            if ratio in ratios:
                print("%-38s %6.2f" % (ratio, ratios[ratio]))
    return {"scenario": "boot", "ratios": ratios, "metrics": {
        "rtt_ms": rtt_ms, "rate_mbit": rate_mbit,
        "guests": {name: report["metrics"]
                   for name, report in reports.items()}}}


def _plot(reports, path):
    plt = charts.pyplot()
    fig, axes = plt.subplots(len(reports), 1, squeeze=False,
                             figsize=(9, 4 * len(reports)))
    for ax, (name, report) in zip(axes[:, 0], reports.items()):
        rows = report["rows"]
        labels = [label for label, _, _ in rows]
        ax.barh(labels, [s for _, s, _ in rows],
                label="server create to marker")
        ax.barh(labels, [u for _, _, u in rows],
                label="the guest's own boot")
        ax.invert_yaxis()
        ax.set_title("%s guest" % name)
        ax.set_xlabel("seconds")
        ax.legend()
    fig.tight_layout()
    charts.save(fig, path)
