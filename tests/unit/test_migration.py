# SPDX-License-Identifier: Apache-2.0
"""The migration conductor's parts that need no server: sites, the job
store's leases, the GridFTP command, what is copied, and stage retries."""

import argparse
import datetime
import threading

from oslo_config import cfg
import pytest
import sqlalchemy as sa

from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration.db import sync
from gvfs_openstack.migration import gridftp
from gvfs_openstack.migration import images_api as glance_api
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import localcopy
from gvfs_openstack.migration import pipeline
from gvfs_openstack.migration import remotecopy
from gvfs_openstack.migration import sites
from gvfs_openstack.migration import states
from gvfs_openstack.migration import transfer

MIB = 1024 * 1024

SITE = """
[site:east]
auth_type = none
glance_endpoint = http://127.0.0.1:9292
gvfs_store = dtn
dtn_export = /srv/images/
dtn_nfs_port = 2049
gridftp_url = gsiftp://dtn-east.example.org:2811
gridftp_parallel = 8
[site:west]
auth_type = none
glance_endpoint = http://127.0.0.1:9393
dtn_export = /export
gridftp_url = gsiftp://dtn-west.example.org:2811/
"""


def _conf(tmp_path, text=SITE, sites_list="east,west"):
    path = tmp_path / "conductor.conf"
    path.write_text("[conductor]\nsites = %s\nlocal_site = east\n%s"
                    % (sites_list, text))
    return migration_conf.load(cfg.ConfigOpts(), ["--config-file",
                                                  str(path)], "test")


def test_every_site_gets_the_listed_options_with_help(tmp_path):
    conf = _conf(tmp_path)
    listed = dict(migration_conf.list_opts())
    assert {g.name if hasattr(g, "name") else g for g in listed} == \
        {"conductor", "database", "globus", "replication", "site:name"}
    database = [opts for g, opts in listed.items()
                if getattr(g, "name", g) == "database"][0]
    assert {o.dest: o.default for o in database}["connection"] == \
        "sqlite:////var/lib/gvfs/conductor.db" == conf.database.connection
    site_opts = [opts for g, opts in listed.items()
                 if getattr(g, "name", g) == "site:name"][0]
    for group in ("site:east", "site:west"):
        registered = set(conf[group])
        assert {o.dest for o in site_opts} <= registered
    for opts in listed.values():
        for opt in opts:
            assert opt.help, opt.name


def test_a_site_is_read_with_its_paths_normalised(tmp_path):
    east = sites.load(_conf(tmp_path), "east")
    assert east.dtn_export == "/srv/images"
    assert east.mount_port == 2049
    assert east.staging_dir("job") == ".gvfs-migration/job"
    assert east.image_path("i") == "/srv/images/images/i"
    assert east.staged_path("job", "i") == "/srv/images/.gvfs-migration/job/i"
    assert east.gridftp("/srv/images/x") == \
        "gsiftp://dtn-east.example.org:2811/srv/images/x"
    assert east.gvfs_location("abc") == "gvfs://dtn/abc"
    assert east.ssh_host == east.nfs_host


def test_an_unknown_site_names_the_known_ones(tmp_path):
    with pytest.raises(exceptions.UnknownSite) as e:
        sites.load(_conf(tmp_path), "north")
    assert str(e.value) == \
        "Unknown site north (configured sites: east, west)"


@pytest.mark.parametrize("line,option", [
    ("dtn_export = relative/path", "[site:west] dtn_export"),
    ("gridftp_url = http://dtn:80", "[site:west] gridftp_url"),
    ("gridftp_url = ftp:///no/host", "[site:west] gridftp_url"),
    ("dtn_images_dir = ../../etc", "[site:west] dtn_images_dir"),
    ("dtn_staging_dir = /tmp", "[site:west] dtn_staging_dir"),
])
def test_a_bad_site_option_is_named(tmp_path, line, option):
    conf = _conf(tmp_path, SITE + line + "\n")
    with pytest.raises(exceptions.InvalidConfig) as e:
        sites.load(conf, "west")
    assert option in str(e.value)


@pytest.mark.parametrize("url", [
    "ftp://anonymous:secret@dtn:2811", "gsiftp://gridftp@dtn:2811/"])
def test_credentials_in_a_gridftp_url_are_refused(tmp_path, url):
    """They would be in globus-url-copy's argv: ``ps`` shows it to all."""
    conf = _conf(tmp_path, SITE + "gridftp_url = %s\n" % url)
    with pytest.raises(exceptions.InvalidConfig) as e:
        sites.load(conf, "west")
    assert "[site:west] gridftp_url" in str(e.value)
    assert "secret" not in str(e.value)


def test_a_site_without_export_is_refused(tmp_path):
    conf = _conf(tmp_path, SITE.replace("dtn_export = /export\n", ""))
    with pytest.raises(exceptions.InvalidConfig,
                       match=r"\[site:west\] dtn_export.*required"):
        sites.load(conf, "west")


def _parse_guc(argv):
    """globus-url-copy's options, read back as it reads them."""
    parser = argparse.ArgumentParser(prog=argv[0], add_help=False)
    for flag in ("-vb", "-fast", "-rst", "-cd", "-verify-checksum",
                 "-sync", "-dcpriv", "-dcsafe"):
        parser.add_argument(flag, action="store_true")
    for option in ("-p", "-rst-retries", "-stall-timeout",
                   "-checksum-alg", "-off", "-len", "-sync-level"):
        parser.add_argument(option)
    parser.add_argument("source")
    parser.add_argument("destination")
    return parser.parse_args(argv[1:])


def test_the_transfer_is_third_party_with_the_sources_tuning(tmp_path):
    conf = _conf(tmp_path)
    east, west = sites.load(conf, "east"), sites.load(conf, "west")
    args = _parse_guc(gridftp.command(
        "globus-url-copy", east, west, "/srv/images/images/i1",
        "/export/.gvfs-migration/j/i1"))
    assert args.source == "gsiftp://dtn-east.example.org:2811/srv/images/" \
        "images/i1"
    assert args.destination == "gsiftp://dtn-west.example.org:2811/" \
        "export/.gvfs-migration/j/i1"
    # Encrypted by default (GSI protects the data channel).
    assert args.dcpriv and not args.dcsafe
    assert (args.p, args.rst, args.rst_retries, args.cd) == \
        ("8", True, "5", True)
    assert args.verify_checksum and args.checksum_alg == "MD5"
    conf.set_override("gridftp_verify_checksum", False, "site:east")
    args = _parse_guc(gridftp.command(
        "globus-url-copy", sites.load(conf, "east"), west, "/a", "/b"))
    assert not args.verify_checksum and args.checksum_alg is None


@pytest.mark.parametrize("east,west,flags", [
    ("private", "private", ["-dcpriv"]),
    ("safe", "private", ["-dcpriv"]),
    ("safe", "safe", ["-dcsafe"]),
    ("clear", "clear", []),
])
def test_the_data_channel_gets_the_stronger_sites_protection(
        tmp_path, east, west, flags):
    conf = _conf(tmp_path)
    conf.set_override("gridftp_data_protection", east, "site:east")
    conf.set_override("gridftp_data_protection", west, "site:west")
    argv = gridftp.command("globus-url-copy", sites.load(conf, "east"),
                           sites.load(conf, "west"), "/a", "/b")
    assert [a for a in argv if a.startswith("-dc")] == flags


def test_images_do_not_cross_in_clear_text_unless_a_site_says_so(
        tmp_path):
    """An anonymous ftp:// server cannot protect the data channel."""
    anonymous = SITE.replace("gsiftp://dtn-west.example.org:2811/",
                             "ftp://127.0.0.1:2812/")
    with pytest.raises(exceptions.InvalidConfig,
                       match=r"\[site:west\] gridftp_data_protection.*"
                             "cannot protect"):
        sites.load(_conf(tmp_path, anonymous), "west")
    conf = _conf(tmp_path, anonymous + "gridftp_data_protection = clear\n")
    west = sites.load(conf, "west")
    # Nor with a site that asks for protection.
    with pytest.raises(exceptions.InvalidConfig,
                       match=r"\[site:west\] gridftp_data_protection.*"
                             "clear text and site east asks for private"):
        gridftp.command("globus-url-copy", sites.load(conf, "east"), west,
                        "/a", "/b")
    with pytest.raises(exceptions.InvalidConfig):
        transfer.GridFtp.check_pair(sites.load(conf, "east"), west)


def test_a_delta_is_not_checksummed_by_the_servers(tmp_path):
    conf = _conf(tmp_path)
    east, west = sites.load(conf, "east"), sites.load(conf, "west")
    args = _parse_guc(gridftp.command(
        "globus-url-copy", east, west, "/a.delta", "/b.delta",
        self_checking=True))
    assert not args.verify_checksum and args.checksum_alg is None
    assert (args.p, args.rst, args.cd) == ("8", True, True)


def test_a_segment_is_sent_at_its_offset_and_checked_whole_later(
        tmp_path):
    conf = _conf(tmp_path)
    east, west = sites.load(conf, "east"), sites.load(conf, "west")
    args = _parse_guc(gridftp.command(
        "globus-url-copy", east, west, "/a", "/b", (3 * MIB, MIB)))
    # A segment's own -verify-checksum compares the wrong ranges.
    assert (args.off, args.len, args.verify_checksum) == \
        (str(3 * MIB), str(MIB), False)
    assert (args.source, args.p, args.rst) == \
        ("gsiftp://dtn-east.example.org:2811/a", "8", True)
    check = _parse_guc(gridftp.check_command("globus-url-copy", east, west,
                                             "/a", "/b"))
    assert (check.sync, check.sync_level, check.verify_checksum,
            check.checksum_alg, check.off) == (True, "3", True, "MD5", None)
    assert check.destination == "gsiftp://dtn-west.example.org:2811/b"
    assert check.dcpriv


def test_segments_go_on_from_the_last_whole_one():
    assert gridftp.segments(10, 4, 0) == [(0, 4), (4, 4), (8, 2)]
    assert gridftp.segments(10, 4, 8) == [(8, 2)]
    assert gridftp.segments(10, 4, 10) == []
    # Small files, segments off, or an unknown size: one transfer.
    assert gridftp.segments(4, 4, 0) is None
    assert gridftp.segments(10, 0, 0) is None
    assert gridftp.segments(None, 4, 0) is None
    # Done bytes from another segment size go on where they stop.
    assert gridftp.segments(10, 3, 4) == [(4, 3), (7, 3)]
    assert gridftp.resume_point({"transfer_done": None}) == 0
    assert gridftp.resume_point({"transfer_done": 8}) == 8


def test_the_segment_size_is_read_per_site(tmp_path):
    conf = _conf(tmp_path)
    assert sites.load(conf, "east").gridftp_segment_bytes == 1024 * MIB
    conf.set_override("gridftp_segment_mib", 0, "site:east")
    assert sites.load(conf, "east").gridftp_segment_bytes == 0


def test_only_what_a_user_set_is_copied():
    image = {"id": "i", "status": "active", "name": "n", "owner": "p",
             "disk_format": "qcow2", "min_disk": 3, "tags": ["a"],
             "hw_disk_bus": "scsi", "os_hash_value": "x", "size": 9,
             "locations": [], "os_glance_import_task": "t",
             "direct_url": "gvfs://dtn/i", "stores": "dtn",
             "os_hidden": False, "description": None}
    assert glance_api.copied_attributes(image) == {
        "name": "n", "disk_format": "qcow2", "min_disk": 3, "tags": ["a"],
        "hw_disk_bus": "scsi", "os_hidden": False}


def test_an_image_in_the_sites_gvfs_store_needs_no_local_copy(tmp_path):
    east = sites.load(_conf(tmp_path), "east")
    west = sites.load(_conf(tmp_path), "west")
    by_location = {"id": "abc", "locations": [{"url": "gvfs://dtn/abc"}]}
    by_store = {"id": "abc", "stores": "local,dtn"}
    elsewhere = {"id": "abc", "locations": [{"url": "file:///x/abc"}],
                 "stores": "local"}
    other_store = {"id": "abc", "locations": [{"url": "gvfs://dtn2/abc"}]}
    assert localcopy.in_gvfs_store(by_location, east)
    assert localcopy.in_gvfs_store(by_store, east)
    assert not localcopy.in_gvfs_store(elsewhere, east)
    assert not localcopy.in_gvfs_store(other_store, east)
    assert not localcopy.in_gvfs_store(by_location, west)  # No gvfs store.


# --- the job store -----------------------------------------------------------

@pytest.fixture
def store(tmp_path):
    store = jobs.JobStore("sqlite:///%s" % (tmp_path / "jobs.sqlite"))
    yield store
    store.dispose()


IMAGES = [{"id": "i%d" % n, "name": "n%d" % n, "size": 10 * n,
           "os_hash_algo": "sha512", "os_hash_value": "h%d" % n}
          for n in range(3)]


def test_a_job_starts_queued_with_its_images_in_order(store):
    job_id = store.create_job("east", "west", IMAGES, 2)
    job = store.job(job_id)
    assert (job["state"], job["images_in_flight"], job["owner"]) == \
        (states.QUEUED, 2, None)
    rows = store.images(job_id)
    assert [r["image_id"] for r in rows] == ["i0", "i1", "i2"]
    assert {(r["stage"], r["state"], r["stage_bytes"]) for r in rows} == \
        {(states.LOCAL_COPY, states.QUEUED, 0)}
    with pytest.raises(exceptions.JobNotFound, match="No migration job x"):
        store.job("x")


def test_one_runner_holds_a_job_until_its_lease_expires(store):
    job_id = store.create_job("east", "west", IMAGES, 2)
    assert store.claim(job_id, "a", 30)
    assert store.claim(job_id, "a", 30)          # Its own: renewed.
    assert not store.claim(job_id, "b", 30)
    assert store.heartbeat(job_id, "a")
    # "a" stops renewing: after the lease, "b" takes over and "a" knows.
    store.set_job(job_id, heartbeat=datetime.datetime(2000, 1, 1))
    assert store.claim(job_id, "b", 30)
    assert not store.heartbeat(job_id, "a")
    store.release(job_id, "a")                    # Not its to release.
    assert store.job(job_id)["owner"] == "b"
    store.release(job_id, "b")
    assert store.claim(job_id, "c", 30)


def test_a_finished_stage_moves_the_image_on_and_clears_its_progress(store):
    job_id = store.create_job("east", "west", IMAGES, 2)
    store.progress(job_id, 1, 4096)
    store.set_image(job_id, 1, error="earlier", attempts=2)
    store.finish_stage(job_id, 1, states.TRANSFER, source_path="/p")
    row = store.image(job_id, 1)
    assert (row["stage"], row["stage_bytes"], row["attempts"], row["error"],
            row["source_path"]) == (states.TRANSFER, 0, 0, None, "/p")


# --- stage retries -----------------------------------------------------------

class _Ctx:
    """What run_stage uses of a StageContext, over a real job store."""

    def __init__(self, store, job_id, retries=3):
        self.store = store
        self.job_id = job_id
        self.retries = retries
        self.retry_backoff = 0.0
        self.cancel = False

    def cancelled(self):
        return self.cancel

    record = pipeline.StageContext.record


class _Stage:
    """A stage that fails with ``errors`` in turn, then succeeds."""

    def __init__(self, *errors):
        self.errors = list(errors)
        self.calls = 0

    def run(self, ctx, row):
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return {"source_path": "/done"}


def _stage(module):
    return pipeline.Stage(states.LOCAL_COPY, module.run, states.TRANSFER)


def test_transient_faults_are_retried_and_recorded(store):
    job_id = store.create_job("east", "west", IMAGES, 2)
    module = _Stage(ConnectionResetError("reset"), exceptions.StageFailed(
        stage="s", image="i0", reason="503", transient=True))
    assert pipeline.run_stage(_Ctx(store, job_id), _stage(module), 0)
    assert module.calls == 3
    row = store.image(job_id, 0)
    assert (row["stage"], row["source_path"], row["error"]) == \
        (states.TRANSFER, "/done", None)
    assert [r["outcome"] for r in store.runs(job_id)] == \
        [states.FAILED, states.FAILED, "done"]


def test_a_permanent_fault_fails_the_image_at_once(store):
    job_id = store.create_job("east", "west", IMAGES, 2)
    module = _Stage(exceptions.ChecksumMismatch(
        stage="s", image="i0", algo="sha512", actual="a", expected="b"))
    assert not pipeline.run_stage(_Ctx(store, job_id), _stage(module), 0)
    assert module.calls == 1
    row = store.image(job_id, 0)
    assert row["state"] == states.FAILED and row["stage"] == states.LOCAL_COPY
    assert "sha512 is a, the source's is b" in row["error"]


def test_what_only_operators_may_read_goes_to_the_log_not_the_job(
        store, caplog):
    """A DTN's address and a tool's output stay out of the user's job."""
    job_id = store.create_job("east", "west", IMAGES, 2)
    module = _Stage(exceptions.StageFailed(
        stage="s", image="i0", reason="cannot reach the DTN of site west "
        "over SSH: it does not answer (NoValidConnectionsError)",
        detail="dtn-west.internal:2222: connection refused"))
    with caplog.at_level("WARNING"):
        assert not pipeline.run_stage(_Ctx(store, job_id, retries=0),
                                      _stage(module), 0)
    error = store.image(job_id, 0)["error"]
    assert "over SSH: it does not answer" in error
    assert "dtn-west" not in error and "2222" not in error
    assert "dtn-west.internal:2222: connection refused" in caplog.text


def test_retries_end(store):
    job_id = store.create_job("east", "west", IMAGES, 2)
    module = _Stage(*[TimeoutError("slow")] * 5)
    assert not pipeline.run_stage(_Ctx(store, job_id, retries=2),
                                  _stage(module), 0)
    assert module.calls == 3
    assert store.image(job_id, 0)["state"] == states.FAILED


def test_an_image_past_the_stage_or_a_cancelled_job_runs_nothing(store):
    job_id = store.create_job("east", "west", IMAGES, 2)
    store.finish_stage(job_id, 0, states.TRANSFER)
    module = _Stage()
    ctx = _Ctx(store, job_id)
    assert pipeline.run_stage(ctx, _stage(module), 0)  # Resumed: passes.
    ctx.cancel = True
    assert not pipeline.run_stage(ctx, _stage(module), 1)
    assert module.calls == 0


def test_a_store_made_before_a_column_existed_gains_it(tmp_path):
    """An earlier release's store waits for db sync, then keeps its jobs."""
    url = "sqlite:///%s" % (tmp_path / "old.sqlite")
    old = jobs.JobStore(url)
    job_id = old.create_job("east", "west", IMAGES, 2)
    with old.engine.begin() as db:
        # What a release before versioned schemas and the Globus transfers
        # left.
        for statement in ("DROP TABLE alembic_version",
                          "DROP TABLE replicated_images",
                          "DROP TABLE replication_policies",
                          "DROP INDEX ix_jobs_project_id",
                          "ALTER TABLE jobs DROP COLUMN project_id",
                          "ALTER TABLE jobs DROP COLUMN user_id",
                          "ALTER TABLE jobs DROP COLUMN notified",
                          "ALTER TABLE jobs DROP COLUMN trust_id",
                          "ALTER TABLE job_images DROP COLUMN transfer_task",
                          "ALTER TABLE job_images DROP COLUMN delta_base",
                          "ALTER TABLE job_images DROP COLUMN sent_bytes"):
            db.execute(sa.text(statement))
    with pytest.raises(exceptions.InvalidConfig, match="gvfs-manage db sync"):
        jobs.JobStore(url)
    assert sync.sync(old.engine)[0] is None
    old.dispose()
    store = jobs.JobStore(url)
    assert [row["image_id"] for row in store.images(job_id)] == \
        ["i0", "i1", "i2"]
    store.set_image(job_id, 0, transfer_task="task-1")
    assert store.image(job_id, 0)["transfer_task"] == "task-1"
    assert store.job(job_id)["project_id"] is None
    store.dispose()
    # Opening it again changes nothing.
    jobs.JobStore(url).dispose()


def test_an_image_registered_in_place_gets_its_sidecar_made_there(tmp_path):
    conf = _conf(tmp_path)
    west = sites.load(conf, "west")
    assert west.gvfs_meta_command == "gvfs-meta"
    assert remotecopy.sidecar_command(west, {
        "id": "i1", "disk_format": "qcow2"}) == [
        "gvfs-meta", "generate", "--", "/export/images/i1"]
    conf.set_override("gvfs_meta_command", "sudo -u gvfs /opt/bin/gvfs-meta",
                      "site:west")
    assert remotecopy.sidecar_command(sites.load(conf, "west"), {
        "id": "i2", "disk_format": "iso"}) == [
        "sudo", "-u", "gvfs", "/opt/bin/gvfs-meta", "generate", "--whole-file",
        "--", "/export/images/i2"]


def test_remote_copies_run_side_by_side(store, monkeypatch):
    """Three registrations wait for each other: only concurrent ones end."""
    job_id = store.create_job("east", "west", IMAGES, 3)
    for position in range(3):
        store.set_image(job_id, position, stage=states.REMOTE_COPY)
    together = threading.Barrier(3, timeout=10)

    def remote(ctx, row):
        together.wait()
        return {}

    monkeypatch.setattr(pipeline, "STAGES", pipeline.STAGES[:2] + (
        pipeline.Stage(states.REMOTE_COPY, remote, states.DONE),))
    monkeypatch.setattr(pipeline, "_clean_source_staging",
                        lambda ctx, position: None)
    released = []
    pipeline._remote_copies(_Ctx(store, job_id, retries=0), iter(range(3)),
                            3, lambda: released.append(1))
    assert [row["state"] for row in store.images(job_id)] == [states.DONE] * 3
    assert len(released) == 3


def test_a_trust_is_used_with_the_sites_user_and_no_project(tmp_path):
    conf = _conf(tmp_path, SITE.replace(
        "[site:east]\nauth_type = none\n", "[site:east]\n"
        "auth_type = password\n"
        "auth_url = https://keystone.example.org/v3\nusername = gvfs\n"
        "password = secret\nuser_domain_name = Default\n"
        "project_name = service\nproject_domain_name = Default\n", 1))
    auth = sites.glance_session(conf, "east", trust_id="t-1").auth
    assert (auth.auth_url, auth.trust_id, auth.project_name) == (
        "https://keystone.example.org/v3", "t-1", None)
    assert auth.auth_methods[0].username == "gvfs"
    # Without a trust the same group scopes to its project.
    own = sites.glance_session(conf, "east").auth
    assert own._project_name == "service" and own._trust_id is None


def test_a_trust_needs_a_password_plugin(tmp_path):
    conf = _conf(tmp_path)    # auth_type = none, with an endpoint.
    with pytest.raises(exceptions.InvalidConfig,
                       match="trust needs a password plugin"):
        sites.glance_session(conf, "east", trust_id="t-1")
