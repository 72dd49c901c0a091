# SPDX-License-Identifier: Apache-2.0
"""Disaster-recovery migration between two loopback clouds.

Real parts end to end: two glance-api servers behind Keystone (two
regions of the session's Keystone), an NFS-Ganesha export, a GridFTP
server and an sshd per DTN; the conductor's runner with its forked stage
workers, logging in to each site's Glance with its keystoneauth
credentials; ``globus-url-copy`` between the two GridFTP servers.
"""

import asyncio
import json
import os
import shutil
import ssl
import stat
import subprocess
import sys
import time

from oslo_config import cfg
import pytest

from gvfs_lab import certs
from gvfs_lab import drlab
from gvfs_lab import slowness
from gvfs_openstack.client import nfs as nfs_client
from gvfs_openstack.client import tls as client_tls
from gvfs_openstack.cmd import meta as meta_cmd
from gvfs_openstack.conductor import metrics as conductor_metrics
from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration import images_api as migration_glance
from gvfs_openstack.migration import manager as manager_mod
from gvfs_openstack.migration import sites
from gvfs_openstack.migration import states
from tests.functional.conftest import sha256
from tests import metrics_samples

MIB = 1024 * 1024


def _sparse_image(path, size, data_every=16 * MIB):
    """Mostly holes, with a random MiB every ``data_every`` bytes."""
    with open(path, "wb") as f:
        f.truncate(size)
        for offset in range(0, size, data_every):
            f.seek(offset)
            f.write(os.urandom(MIB))


def _qcow2(path, tmp_path):
    raw = tmp_path / "for-qcow2.raw"
    with open(raw, "wb") as f:
        f.truncate(64 * MIB)
        f.seek(5 * MIB)
        f.write(os.urandom(3 * MIB))
    subprocess.run(["qemu-img", "convert", "-O", "qcow2", str(raw),
                    str(path)], check=True)


def _sha512(path):
    return sha256(path, "sha512")


def _manager(dr, tmp_path, job_store=None, name="conductor", **conductor):
    path = dr.conductor_config(
        str(tmp_path / ("%s.conf" % name)),
        job_store or "sqlite:///%s" % (tmp_path / "jobs.sqlite"),
        **conductor)
    conf = migration_conf.load(cfg.ConfigOpts(), ["--config-file", path],
                               "gvfs-conductor")
    return manager_mod.ConductorManager(conf)


def _wait(manager, job_id, timeout=300, resume_every=None):
    """Wait for the job's end.

    Every ``resume_every`` seconds, do what the conductor's periodic task
    does: start runners for orphaned jobs.
    """
    deadline = time.monotonic() + slowness.scaled(timeout)
    resumed = 0
    while time.monotonic() < deadline:
        job = manager.show(job_id)
        if job["state"] in states.FINISHED:
            return job
        if resume_every and time.monotonic() - resumed > resume_every:
            manager.resume()
            resumed = time.monotonic()
        time.sleep(0.2)
    raise AssertionError("job %s not finished: %s" % (
        job_id, manager.show(job_id)))


def test_three_images_arrive_identical_and_registered_in_place(
        dr, tmp_path):
    sparse = tmp_path / "sparse.raw"
    _sparse_image(sparse, 96 * MIB)
    qcow2 = tmp_path / "disk.qcow2"
    _qcow2(qcow2, tmp_path)
    rich = tmp_path / "rich.raw"
    rich.write_bytes(os.urandom(5 * MIB + 123))
    images = [
        # Already on the source DTN: sent from the gvfs store directly.
        dr.east.glance.add_image("sparse", sparse, drlab.GVFS_STORE),
        # In a plain store: local copy onto the DTN first.
        dr.east.glance.add_image("qcow2", qcow2, drlab.FILE_STORE,
                                 disk_format="qcow2"),
        dr.east.glance.add_image("rich", rich, drlab.FILE_STORE,
                                 min_disk=3, min_ram=512,
                                 hw_disk_bus="scsi", os_distro="debian",
                                 os_version="12", tags=["dr", "golden"],
                                 visibility="public"),
    ]
    manager = _manager(dr, tmp_path)
    # Prometheus scrapes the job store while the job runs, and after.
    endpoint = conductor_metrics.server("127.0.0.1", 0, manager.store)
    endpoint.start()
    try:
        job = manager.migrate([i["id"] for i in images], "west")
        during = metrics_samples.scrape(endpoint.port)
        job = _wait(manager, job["id"])
        after = metrics_samples.scrape(endpoint.port)
    finally:
        endpoint.stop()
    assert job["state"] == states.DONE, job
    assert during[("gvfs_conductor_jobs", (("state", "done"),))] == 0
    assert after[("gvfs_conductor_jobs", (("state", "done"),))] == 1
    for stage in states.STAGES:
        # Each image's one run of each stage, moving the image's bytes.
        assert after[("gvfs_conductor_moved_bytes_total",
                      (("stage", stage),))] \
            == sum(image["size"] for image in images)
        assert after[("gvfs_conductor_stage_run_seconds_count",
                      (("outcome", "done"), ("stage", stage)))] == 3
    for image, path in zip(images, (sparse, qcow2, rich)):
        there = dr.west.glance.image(image["id"])
        assert there["status"] == "active"
        assert there["os_hash_value"] == image["os_hash_value"] == \
            _sha512(path)
        assert there["stores"] == drlab.GVFS_STORE
        for key in ("disk_format", "container_format", "min_disk",
                    "min_ram", "visibility", "size", "name"):
            assert there[key] == image[key], key
        assert sorted(there["tags"]) == sorted(image["tags"])
        for key in ("hw_disk_bus", "os_distro", "os_version"):
            assert there.get(key) == image.get(key)
        # Registered in place: the file the GridFTP server wrote is in
        # the west store's directory.
        there_path = os.path.join(dr.west.images, image["id"])
        assert _sha512(there_path) == image["os_hash_value"]
        assert os.stat(there_path).st_uid == dr.west.gridftp.uid
        # Which the GridFTP server made 0644 in its own group; the
        # store's images are 0640, in the store directory's group.
        assert stat.S_IMODE(os.stat(there_path).st_mode) == 0o640
        assert os.stat(there_path).st_gid == os.stat(dr.west.images).st_gid
        # With the sidecar an upload through the store would have made,
        # so the proxies at the destination serve its zeros locally.
        assert meta_cmd.verify(there_path) is None
    # Nothing left in transit on either DTN; the sources are untouched.
    for site in (dr.east, dr.west):
        assert os.listdir(os.path.join(site.export, drlab.STAGING_DIR)) == []
    for image in images:
        assert dr.east.glance.image(image["id"])["status"] == "active"


def test_a_compressed_local_copy_sends_less_and_keeps_the_holes(
        dr, tmp_path):
    """zstd chunks through the source DTN's server proxy."""
    path = tmp_path / "compressible.raw"
    four_letters = bytes(0x41 + b % 4 for b in range(256))
    with open(path, "wb") as f:
        f.write(os.urandom(8 * MIB).translate(four_letters))
        f.seek(16 * MIB)    # An 8 MiB hole.
        f.write(os.urandom(8 * MIB + 12345).translate(four_letters))
    image = dr.east.glance.add_image("compressible", path, drlab.FILE_STORE)
    before = dr.east.proxy.stats()
    manager = _manager(dr, tmp_path, east=dr.east.compressed_local_copy())
    job = _wait(manager, manager.migrate([image["id"]], "west")["id"])
    assert job["state"] == states.DONE, job
    there = dr.west.glance.image(image["id"])
    assert there["status"] == "active"
    assert there["os_hash_value"] == image["os_hash_value"] == \
        _sha512(path)
    after = dr.east.proxy.stats()
    raw = after["bulk_write_raw_bytes"] - before["bulk_write_raw_bytes"]
    wire = after["bulk_write_wire_bytes"] - before["bulk_write_wire_bytes"]
    assert raw == 16 * MIB + 12345      # The hole was not written.
    assert wire < raw / 2, "the chunks crossed uncompressed"
    assert after["bulk_writes"] - before["bulk_writes"] >= 4


def _mount_east_proxy(dr, tls):
    async def mount():
        async with nfs_client.NfsClient(
                "127.0.0.1", dr.east.proxy.port, timeout=10.0,
                tls=tls) as nfs:
            return await nfs.mount(dr.east.export)
    return asyncio.run(mount())


def test_the_dtn_proxy_serves_the_conductor_only_over_mutual_tls(dr):
    """The conductor's NFS to a DTN: its certificate, not any AUTH_SYS.

    The attack: a client on an allowed address (here loopback) that
    claims the images' account over plain NFS, and one that shows the
    DTN proxy's own certificate (a server's) as its client certificate.
    """
    pki = dr.east.pki
    with pytest.raises((ConnectionError, TimeoutError)):
        _mount_east_proxy(dr, None)
    with pytest.raises((ConnectionError, ssl.SSLError)):
        _mount_east_proxy(dr, client_tls.ClientTls(*pki["server"],
                                                   pki["ca"]))
    # A CA the proxy's certificate does not chain to: the conductor
    # refuses the proxy.
    other = certs.make_pki(os.path.join(dr.workdir, "other-pki"),
                           names=("conductor",),
                           purposes={"conductor": certs.PURPOSES["client"]})
    with pytest.raises(ssl.SSLCertVerificationError):
        _mount_east_proxy(dr, client_tls.ClientTls(*pki["conductor"],
                                                   other["ca"]))
    assert _mount_east_proxy(dr, client_tls.ClientTls(*pki["conductor"],
                                                      pki["ca"]))


def test_a_chunk_the_dtn_proxy_refuses_fails_at_once_and_says_why(
        dr, tmp_path):
    path = tmp_path / "zeros-and-text.raw"
    path.write_bytes(b"compressible text " * (MIB // 2))
    image = dr.east.glance.add_image("big-chunks", path, drlab.FILE_STORE)
    manager = _manager(dr, tmp_path, east=dict(
        dr.east.compressed_local_copy(), local_copy_chunk_mib=4))
    job = _wait(manager, manager.migrate([image["id"]], "west")["id"])
    assert job["state"] == states.FAILED, job
    assert "local_copy_chunk_mib must be at most half" in \
        manager.show(job["id"])["images"][0]["error"]
    tries = [run for run in manager.store.runs(job["id"])
             if run["stage"] == states.LOCAL_COPY]
    assert len(tries) == 1    # Not retried: it would fail the same way.


def test_a_compressed_local_copy_to_plain_nfs_falls_back(dr, tmp_path):
    """Without the fallback, the bulk channel's PROG_UNAVAIL fails it."""
    path = tmp_path / "small.raw"
    path.write_bytes(os.urandom(3 * MIB + 7))
    image = dr.east.glance.add_image("plain", path, drlab.FILE_STORE)
    manager = _manager(dr, tmp_path,
                       east={"local_copy_compression": "zstd"})
    job = _wait(manager, manager.migrate([image["id"]], "west")["id"])
    assert job["state"] == states.DONE, job
    assert dr.west.glance.image(image["id"])["os_hash_value"] == \
        _sha512(path)


def test_packed_images_cross_the_dtn_link_as_one_archive(dr, tmp_path):
    """``--pack tar``: one GridFTP transfer for the job, every image whole."""
    sparse = tmp_path / "packed-sparse.raw"
    _sparse_image(sparse, 48 * MIB)
    paths = [sparse] + [tmp_path / ("small-%d.raw" % n) for n in range(3)]
    for path in paths[1:]:
        path.write_bytes(os.urandom(MIB + 7))
    images = [dr.east.glance.add_image("packed-sparse", sparse,
                                       drlab.GVFS_STORE)] + [
        dr.east.glance.add_image(path.name, path, drlab.FILE_STORE)
        for path in paths[1:]]
    manager = _manager(dr, tmp_path)
    job = manager.migrate([i["id"] for i in images], "west", pack="tar")
    assert job["pack"] == "tar"
    job = _wait(manager, job["id"])
    assert job["state"] == states.DONE, job
    for image, path in zip(images, paths):
        there = dr.west.glance.image(image["id"])
        assert there["status"] == "active"
        assert there["os_hash_value"] == image["os_hash_value"] == \
            _sha512(path)
        stored = os.path.join(dr.west.images, image["id"])
        assert _sha512(stored) == image["os_hash_value"]
        assert meta_cmd.verify(stored) is None
    # The sparse image stayed sparse through the archive.
    stored = os.stat(os.path.join(dr.west.images, images[0]["id"]))
    assert stored.st_blocks * 512 < 16 * MIB
    transfers = [run for run in manager.store.runs(job["id"])
                 if run["stage"] == states.TRANSFER]
    assert len(transfers) == 1 and transfers[0]["outcome"] == "done"
    for site in (dr.east, dr.west):
        assert os.listdir(os.path.join(site.export, drlab.STAGING_DIR)) == []


def test_upload_through_the_api_when_the_destination_has_no_gvfs_store(
        dr, tmp_path):
    path = tmp_path / "plain.raw"
    path.write_bytes(os.urandom(9 * MIB))
    image = dr.east.glance.add_image("plain", path, drlab.FILE_STORE)
    manager = _manager(dr, tmp_path, west_in_place=False)
    job = _wait(manager, manager.migrate([image["id"]], "west")["id"])
    assert job["state"] == states.DONE, job
    there = dr.west.glance.image(image["id"])
    assert there["status"] == "active"
    assert there["os_hash_value"] == image["os_hash_value"]
    # Written by Glance's store (its default), not moved in place from
    # what the GridFTP server wrote.
    assert there["stores"] == drlab.GVFS_STORE
    assert os.stat(os.path.join(dr.west.images, image["id"])).st_uid != \
        dr.west.gridftp.uid


def test_unknown_site_and_unknown_image_are_clear_errors(dr, tmp_path):
    manager = _manager(dr, tmp_path)
    with pytest.raises(exceptions.UnknownSite, match="north.*east, west"):
        manager.migrate(["x"], "north")
    with pytest.raises(exceptions.ImageNotFound,
                       match="0000.* not found at site east"):
        manager.migrate(["00000000-0000-0000-0000-000000000000"], "west")
    assert manager.list() == []


def test_the_conductor_logs_in_to_each_site_and_finds_it_by_region(
        dr, tmp_path):
    """What Keystone decides for the conductor.

    Its session reaches east's Glance by region; a refused login, a
    region without Glance, and the other site's region (whose Glance
    does not have the image) are clear errors.
    """
    path = tmp_path / "regional.raw"
    path.write_bytes(os.urandom(MIB))
    image = dr.east.glance.add_image("regional", path, drlab.FILE_STORE)
    conf = _manager(dr, tmp_path).conf
    east = migration_glance.GlanceClient(sites.glance_session(conf, "east"),
                                         sites.load(conf, "east"))
    assert east.find("regional")["id"] == image["id"]
    assert east.image(image["id"])["os_hash_value"] == image["os_hash_value"]
    refused = _manager(dr, tmp_path, name="refused",
                       east={"password": "not-the-password"})
    with pytest.raises(exceptions.StageFailed,
                       match="site east: its Keystone refused"):
        refused.migrate([image["id"]], "west")
    nowhere = _manager(dr, tmp_path, name="nowhere",
                       east={"glance_region": "nowhere"})
    with pytest.raises(exceptions.StageFailed,
                       match="site east: no Images API.*region nowhere"):
        nowhere.migrate([image["id"]], "west")
    crossed = _manager(dr, tmp_path, name="crossed",
                       east={"glance_region": dr.west.glance.region})
    with pytest.raises(exceptions.ImageNotFound, match="at site east"):
        crossed.migrate([image["id"]], "west")


def test_runner_is_a_real_process_that_exits_nonzero_on_failure(dr,
                                                                tmp_path):
    manager = _manager(dr, tmp_path)
    result = subprocess.run(
        [sys.executable, "-m", "gvfs_openstack.migration.runner"]
        + manager.config_args + ["no-such-job"], capture_output=True,
        text=True, timeout=60)
    assert result.returncode == 2
    assert "No migration job no-such-job" in result.stdout + result.stderr


def _images_of(glance):
    with glance._request("/v2/images?limit=1000") as reply:
        return {i["id"]: i for i in json.loads(reply.read())["images"]}


def _staging_left(site, job_id):
    return os.path.exists(os.path.join(site.export, drlab.STAGING_DIR,
                                       job_id))


def test_a_byte_flipped_on_the_way_is_caught_and_nothing_is_activated(
        dr, tmp_path):
    path = tmp_path / "victim.raw"
    path.write_bytes(os.urandom(4 * MIB))
    image = dr.east.glance.add_image("victim", path, drlab.FILE_STORE)
    # The GridFTP client of this test flips one byte of what arrived.
    flipper = tmp_path / "flipping-globus-url-copy"
    flipper.write_text("""#!/bin/sh
set -e
globus-url-copy "$@"
for last; do :; done
target=/${last#ftp://*/}
byte=$(dd if="$target" bs=1 skip=1000 count=1 2>/dev/null | od -An -tu1)
printf "\\\\$(printf %%o $(( (byte + 1) %% 256 )))" |
    dd of="$target" bs=1 seek=1000 conv=notrunc 2>/dev/null
""")
    flipper.chmod(0o755)
    manager = _manager(dr, tmp_path, globus_url_copy=str(flipper))
    job = _wait(manager, manager.migrate([image["id"]], "west")["id"])
    assert job["state"] == states.FAILED
    [row] = job["images"]
    assert row["stage"] == states.REMOTE_COPY
    assert "the data's sha512 is" in row["error"]
    assert "the source's is %s" % image["os_hash_value"] in row["error"]
    # Nothing at the destination: no image, no file, no staging.
    assert image["id"] not in _images_of(dr.west.glance)
    assert not os.path.exists(os.path.join(dr.west.images, image["id"]))
    assert not _staging_left(dr.west, job["id"])
    assert not _staging_left(dr.east, job["id"])
    # The source is untouched.
    assert dr.east.glance.image(image["id"])["os_hash_value"] == \
        _sha512(path)


def test_an_unreachable_destination_dtn_is_retried(dr, tmp_path):
    path = tmp_path / "patient.raw"
    path.write_bytes(os.urandom(3 * MIB))
    image = dr.east.glance.add_image("patient", path, drlab.FILE_STORE)
    manager = _manager(dr, tmp_path, retries=8, retry_backoff=0.5,
                       east={"gridftp_restarts": 1})
    dr.west.gridftp.stop()
    try:
        job_id = manager.migrate([image["id"]], "west")["id"]
        deadline = time.monotonic() + slowness.scaled(120)
        while not any(run["stage"] == states.TRANSFER and
                      run["outcome"] == states.FAILED
                      for run in manager.store.runs(job_id)):
            assert time.monotonic() < deadline, manager.show(job_id)
            time.sleep(0.1)
    finally:
        dr.west.gridftp.start()
    job = _wait(manager, job_id)
    assert job["state"] == states.DONE, job
    outcomes = [run["outcome"] for run in manager.store.runs(job_id)
                if run["stage"] == states.TRANSFER]
    assert outcomes[0] == states.FAILED and outcomes[-1] == "done"
    assert dr.west.glance.image(image["id"])["os_hash_value"] == \
        image["os_hash_value"]


def test_a_killed_runner_is_resumed_from_its_last_committed_byte(
        dr, tmp_path):
    path = tmp_path / "big.raw"
    path.write_bytes(os.urandom(192 * MIB))
    image = dr.east.glance.add_image("big", path, drlab.FILE_STORE)
    manager = _manager(dr, tmp_path, lease_seconds=3,
                       east={"nfs_commit_mib": 4, "nfs_window": 2})
    job_id = manager.migrate([image["id"]], "west")["id"]
    deadline = time.monotonic() + slowness.scaled(120)
    while manager.store.image(job_id, 0)["stage_bytes"] < 16 * MIB:
        assert time.monotonic() < deadline, manager.show(job_id)
        assert manager.store.image(job_id, 0)["stage"] == states.LOCAL_COPY
        time.sleep(0.02)
    runner = manager._runners[job_id]
    os.killpg(runner.pid, 9)   # The conductor's host dies.
    runner.wait()
    # A new conductor takes the job over once the dead runner's lease ends.
    successor = _manager(dr, tmp_path, lease_seconds=3)
    job = _wait(successor, job_id, resume_every=1.0)
    assert job["state"] == states.DONE, job
    local_runs = [r for r in successor.store.runs(job_id)
                  if r["stage"] == states.LOCAL_COPY]
    assert len(local_runs) == 2
    assert local_runs[0]["outcome"] is None   # Killed mid-way.
    assert local_runs[1]["resumed_from"] >= 16 * MIB
    assert dr.west.glance.image(image["id"])["os_hash_value"] == \
        image["os_hash_value"] == _sha512(path)


def test_cancel_leaves_no_partial_files_and_no_queued_images(dr, tmp_path):
    paths = []
    for n in range(3):
        paths.append(tmp_path / ("c%d.raw" % n))
        paths[-1].write_bytes(os.urandom(64 * MIB))
    images = [dr.east.glance.add_image(p.name, p, drlab.FILE_STORE)
              for p in paths]
    manager = _manager(dr, tmp_path, east={"nfs_commit_mib": 4,
                                           "nfs_window": 2})
    job_id = manager.migrate([i["id"] for i in images], "west",
                             images_in_flight=1)["id"]
    deadline = time.monotonic() + slowness.scaled(120)
    while manager.store.image(job_id, 1)["stage_bytes"] == 0:
        assert time.monotonic() < deadline, manager.show(job_id)
        time.sleep(0.02)
    manager.cancel(job_id)
    job = _wait(manager, job_id)
    assert job["state"] == states.CANCELLED
    image_states = [row["state"] for row in job["images"]]
    assert image_states[1:] == [states.CANCELLED, states.CANCELLED]
    west = _images_of(dr.west.glance)
    for image, state in zip(images, image_states):
        if state == states.DONE:
            assert west[image["id"]]["status"] == "active"
        else:
            assert image["id"] not in west
            assert not os.path.exists(os.path.join(dr.west.images,
                                                   image["id"]))
    assert not _staging_left(dr.east, job_id)
    assert not _staging_left(dr.west, job_id)
    with pytest.raises(exceptions.JobFinished):
        manager.cancel(job_id)


def test_two_conductors_sharing_postgresql_run_each_job_once(dr, tmp_path):
    job_store = dr.postgres.database("jobs_%d" % os.getpid())
    paths = [tmp_path / ("shared%d.raw" % n) for n in range(2)]
    for path in paths:
        path.write_bytes(os.urandom(16 * MIB))
    images = [dr.east.glance.add_image(p.name, p, drlab.FILE_STORE)
              for p in paths]
    a, b = (_manager(dr, tmp_path, job_store=job_store, name=name,
                     host=name, lease_seconds=5)
            for name in ("conductor-a", "conductor-b"))
    job_ids = [a.migrate([image["id"]], "west")["id"]
               for image in images]
    b.resume()   # B sees both jobs unfinished and starts runners too.
    for job_id in job_ids:
        assert _wait(a, job_id)["state"] == states.DONE
    for job_id in job_ids:
        codes = sorted(m._runners[job_id].wait(timeout=60)
                       for m in (a, b))
        assert codes == [0, 3]   # One ran it; the other found it held.
        runs = [(r["position"], r["stage"]) for r in a.store.runs(job_id)]
        assert sorted(runs) == sorted(set(runs))   # No stage ran twice.
        assert a.store.job(job_id)["owner"] is None   # Released.
    for image in images:
        assert dr.west.glance.image(image["id"])["os_hash_value"] == \
            image["os_hash_value"]
    a.stop()
    b.stop()


@pytest.fixture(scope="module")
def linked_dr(tmp_path_factory, keystone):
    """The two clouds with their DTNs joined by a 100 Mbit/s link."""
    with drlab.DrLab(str(tmp_path_factory.mktemp("linked")),
                     dtn_link=(10, 100), keystone=keystone) as lab:
        yield lab


def test_a_reset_dtn_link_mid_transfer_is_survived(linked_dr, tmp_path):
    dr = linked_dr
    path = tmp_path / "long.raw"
    path.write_bytes(os.urandom(48 * MIB))     # About 4 s on the link.
    image = dr.east.glance.add_image("long", path, drlab.GVFS_STORE)
    manager = _manager(dr, tmp_path, retries=4, retry_backoff=0.5)
    job_id = manager.migrate([image["id"]], "west")["id"]
    deadline = time.monotonic() + slowness.scaled(120)
    while not [r for r in manager.store.runs(job_id)
               if r["stage"] == states.TRANSFER]:
        assert time.monotonic() < deadline, manager.show(job_id)
        time.sleep(0.02)
    time.sleep(1.5)
    assert manager.show(job_id)["images"][0]["stage"] == states.TRANSFER
    dr.reset_dtn_link()
    job = _wait(manager, job_id)
    assert job["state"] == states.DONE, job
    assert dr.west.glance.image(image["id"])["os_hash_value"] == \
        image["os_hash_value"]


def test_a_local_copy_killed_after_its_last_commit_resumes_at_the_end(
        dr, tmp_path):
    path = tmp_path / "whole.raw"
    path.write_bytes(os.urandom(8 * MIB))
    image = dr.east.glance.add_image("whole", path, drlab.FILE_STORE)
    manager = _manager(dr, tmp_path)
    # What a runner killed between its last COMMIT and the end of the
    # stage leaves: every byte on the DTN, the resume point at the end.
    job_id = manager.store.create_job("east", "west", [image], 1)
    staged = os.path.join(dr.east.export, drlab.STAGING_DIR, job_id)
    os.makedirs(staged)
    shutil.copyfile(path, os.path.join(staged, image["id"]))
    manager.store.progress(job_id, 0, image["size"])
    job = _wait(manager, job_id, resume_every=1.0)
    assert job["state"] == states.DONE, job
    [local] = [r for r in manager.store.runs(job_id)
               if r["stage"] == states.LOCAL_COPY]
    assert local["resumed_from"] == image["size"]
    assert dr.west.glance.image(image["id"])["os_hash_value"] == \
        image["os_hash_value"]


def test_a_killed_runner_goes_on_from_the_last_whole_segment(linked_dr,
                                                             tmp_path):
    dr = linked_dr
    path = tmp_path / "segmented.raw"
    path.write_bytes(os.urandom(48 * MIB))     # About 4 s on the link.
    image = dr.east.glance.add_image("segmented", path, drlab.GVFS_STORE)
    east = {"gridftp_segment_mib": 8}
    manager = _manager(dr, tmp_path, lease_seconds=3, east=east)
    job_id = manager.migrate([image["id"]], "west")["id"]
    deadline = time.monotonic() + slowness.scaled(120)
    while (manager.store.image(job_id, 0)["transfer_done"] or 0) < 16 * MIB:
        assert time.monotonic() < deadline, manager.show(job_id)
        time.sleep(0.02)
    runner = manager._runners[job_id]
    os.killpg(runner.pid, 9)   # The conductor's host dies mid-transfer.
    runner.wait()
    done = manager.store.image(job_id, 0)["transfer_done"]
    successor = _manager(dr, tmp_path, lease_seconds=3, east=east)
    job = _wait(successor, job_id, resume_every=1.0)
    assert job["state"] == states.DONE, job
    transfers = [r for r in successor.store.runs(job_id)
                 if r["stage"] == states.TRANSFER]
    assert len(transfers) == 2 and transfers[0]["outcome"] is None
    # It went on at a segment boundary, at or after what was recorded.
    resumed = transfers[1]["resumed_from"]
    assert resumed >= done >= 16 * MIB and resumed % (8 * MIB) == 0
    assert dr.west.glance.image(image["id"])["os_hash_value"] == \
        image["os_hash_value"] == _sha512(path)


def test_a_segmented_file_differing_at_the_end_is_sent_again(dr, tmp_path):
    path = tmp_path / "differs.raw"
    path.write_bytes(os.urandom(24 * MIB))
    image = dr.east.glance.add_image("differs", path, drlab.GVFS_STORE)
    manager = _manager(dr, tmp_path, east={"gridftp_segment_mib": 8})
    # What a runner that recorded every segment leaves when the bytes at
    # the destination are not the source's after all (a disk that lied,
    # a file changed by hand): the whole-file check must catch it.
    job_id = manager.store.create_job("east", "west", [image], 1)
    manager.store.set_image(job_id, 0, transfer_done=image["size"])
    staged = os.path.join(dr.west.export, drlab.STAGING_DIR, job_id)
    os.makedirs(staged)
    with open(os.path.join(staged, image["id"]), "wb") as f:
        f.write(os.urandom(image["size"]))
    for name in (staged, os.path.join(staged, image["id"])):
        os.chown(name, dr.west.gridftp.uid, dr.west.gridftp.gid)
    job = _wait(manager, job_id, resume_every=1.0)
    assert job["state"] == states.DONE, job
    assert dr.west.glance.image(image["id"])["os_hash_value"] == \
        image["os_hash_value"] == _sha512(path)


def _overlapping(runs):
    """Pairs of transfer runs that were on the link at the same time."""
    done = sorted((r for r in runs if r["stage"] == states.TRANSFER
                   and r["outcome"] == "done"),
                  key=lambda r: r["started_at"])
    return sum(1 for a, b in zip(done, done[1:])
               if b["started_at"] < a["finished_at"])


@pytest.mark.parametrize("transfers", [1, 2])
def test_transfers_run_as_many_at_once_as_configured(
        linked_dr, tmp_path, transfers):
    dr = linked_dr
    images = []
    for i in range(3):
        path = tmp_path / ("t%d.raw" % i)
        path.write_bytes(os.urandom(12 * MIB))    # About 1 s on the link.
        images.append(dr.east.glance.add_image(
            "transfers-%d-%d" % (transfers, i), path, drlab.GVFS_STORE))
    manager = _manager(dr, tmp_path, transfers=transfers,
                       images_in_flight=3)
    job_id = manager.migrate([i["id"] for i in images], "west")["id"]
    job = _wait(manager, job_id)
    assert job["state"] == states.DONE, job
    for image in images:
        assert dr.west.glance.image(image["id"])["os_hash_value"] == \
            image["os_hash_value"]
    overlaps = _overlapping(manager.store.runs(job_id))
    if transfers == 1:
        assert overlaps == 0
    else:
        assert overlaps >= 1


def test_jobs_beyond_a_projects_cap_wait_queued_then_run(dr, tmp_path):
    """Issue 43, item 10: a burst of jobs does not fork a runner each.

    With one job of a project at a time, alpha's second waits its turn
    (never two of its runners alive at once) while beta's starts beside
    them, and every one of them ends done.
    """
    manager = _manager(dr, tmp_path, name="capped",
                       max_running_jobs_per_project=1)
    made = []
    for n in range(3):
        path = tmp_path / ("capped-%d.raw" % n)
        path.write_bytes(os.urandom(MIB))
        made.append(dr.east.glance.add_image("capped-%d" % n, path,
                                             drlab.GVFS_STORE))
    alpha = dr.keystone.project_id("alpha")
    theirs = [manager.migrate([image["id"]], "west", project_id=alpha)["id"]
              for image in made[:2]]
    # The first is running: the second waits, queued.
    assert manager._running(theirs[0])
    assert not manager._running(theirs[1])
    assert manager.show(theirs[1])["state"] == states.QUEUED
    beta = manager.migrate([made[2]["id"]], "west",
                           project_id=dr.keystone.project_id("beta"))["id"]
    assert manager._running(beta)
    deadline = time.monotonic() + slowness.scaled(300)
    while time.monotonic() < deadline:
        assert sum(manager._running(j) for j in theirs) <= 1
        job_states = [manager.show(j)["state"] for j in theirs + [beta]]
        if all(state in states.FINISHED for state in job_states):
            break
        time.sleep(0.1)
    assert job_states == [states.DONE] * 3
