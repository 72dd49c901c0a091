# SPDX-License-Identifier: Apache-2.0
"""The DTN-to-DTN stage through the Globus Transfer service, offline.

The real service is unreachable here: globus_sdk.testing's registered
responses stand in for it (over ``responses``), and the tests check the
exact requests the stage sends -- the submission, the polling, the
cancel -- and what it records in a real job store.
"""

import json

import globus_sdk
from globus_sdk.testing import get_response_set
from globus_sdk.testing import load_response
from globus_sdk.transport import RetryConfig
from oslo_config import cfg
import pytest
import responses

from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration import dtn_to_dtn
from gvfs_openstack.migration import globus
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import manager as manager_mod
from gvfs_openstack.migration import pack
from gvfs_openstack.migration import pipeline
from gvfs_openstack.migration import sites
from gvfs_openstack.migration import states
from gvfs_openstack.migration import transfer

EAST_COLLECTION = "8d6f3b8e-0d53-4c4b-9a36-6f1c2b1b9e01"
WEST_COLLECTION = "1f2e3d4c-5b6a-4978-8a9b-0c1d2e3f4a5b"
DIGEST = "ab" * 64
#: What the SDK's registered responses answer.
TASK_ID = get_response_set(
    globus_sdk.TransferClient.submit_transfer).metadata["task_id"]
SUBMISSION_ID = get_response_set(
    globus_sdk.TransferClient.get_submission_id).metadata["submission_id"]
TASK_URL = "https://transfer.api.globus.org/v0.10/task/%s" % TASK_ID
SITES = """
[conductor]
sites = east, west
local_site = east
[site:east]
auth_type = none
glance_endpoint = http://127.0.0.1:9292
dtn_export = /srv/images
dtn_transfer = globus
globus_endpoint_id = %s
globus_export_path = /
[site:west]
auth_type = none
glance_endpoint = http://127.0.0.1:9393
dtn_export = /export
dtn_transfer = globus
globus_endpoint_id = %s
""" % (EAST_COLLECTION, WEST_COLLECTION)


def _conf(tmp_path, text=SITES):
    path = tmp_path / "conductor.conf"
    path.write_text(text)
    return migration_conf.load(cfg.ConfigOpts(),
                               ["--config-file", str(path)], "test")


@pytest.fixture(autouse=True)
def service():
    """The Globus service's stand-in: a request nobody registered fails.

    globus_sdk.testing registers its responses on ``responses``' default
    mock, which this starts and empties again.
    """
    responses.start()
    yield responses
    responses.stop()
    responses.reset()


class _Ctx:
    """A StageContext's view for the transfer stage, over a real store."""

    def __init__(self, tmp_path, text=SITES):
        conf = _conf(tmp_path, text)
        self.source = sites.load(conf, "east")
        self.destination = sites.load(conf, "west")
        self.store = jobs.JobStore("sqlite:///%s" % (tmp_path / "jobs.db"))
        self.job_id = self.store.create_job("east", "west", [{
            "id": "img-1", "name": "golden", "size": 1000,
            "os_hash_algo": "sha512", "os_hash_value": DIGEST}], 2)
        self.store.set_image(
            self.job_id, 0, stage=states.TRANSFER,
            source_path=self.source.staged_path(self.job_id, "img-1"))
        self.globus_poll_interval = 0.0
        # Whole files only: deltas are tests/functional/
        # test_delta_transfer.py's.
        self.delta_transfer = False
        self._cancel_checked = 0.0
        # The SDK's own retries of 5xx and network errors, with their
        # backoff, are not what these tests are about.
        self.client = globus_sdk.TransferClient(
            retry_config=RetryConfig(max_retries=0))

    def globus_client(self):
        return self.client

    def cancelled(self):
        return self.store.job(self.job_id)["cancel_requested"]

    def row(self):
        return self.store.image(self.job_id, 0)

    record = pipeline.StageContext.record
    progress = pipeline.StageContext.progress


def _register_task(service, status, **fields):
    """One answer of GET /task/ID (registered answers come in order)."""
    service.add(service.GET, TASK_URL, json=dict(
        {"DATA_TYPE": "task", "task_id": TASK_ID, "status": status,
         "bytes_transferred": 0}, **fields))


def _register_cancel(service):
    service.add(service.POST, TASK_URL + "/cancel", json={
        "DATA_TYPE": "result", "code": "Canceled",
        "message": "The task has been cancelled successfully.",
        "request_id": "r2", "resource": "/task/%s/cancel" % TASK_ID})


def _requests(service, method, suffix):
    return [call.request for call in service.calls
            if call.request.method == method
            and call.request.url.split("?")[0].endswith(suffix)]


def _submitted(service):
    posted, = _requests(service, "POST", "/v0.10/transfer")
    return json.loads(posted.body)


@pytest.fixture
def ctx(tmp_path):
    ctx = _Ctx(tmp_path)
    load_response(globus_sdk.TransferClient.get_submission_id)
    yield ctx
    ctx.store.dispose()


def test_a_globus_site_needs_its_collection_not_a_gridftp_url(tmp_path):
    ctx = _Ctx(tmp_path)
    assert ctx.source.dtn_transfer == "globus"
    assert ctx.source.gridftp_url is None
    assert ctx.destination.globus_export_path == "/export"
    broken = SITES.replace("globus_endpoint_id = %s\n" % EAST_COLLECTION,
                           "")
    with pytest.raises(exceptions.InvalidConfig,
                       match=r"\[site:east\] globus_endpoint_id"):
        sites.load(_conf(tmp_path, broken), "east")


def test_transfer_data_names_both_collections_and_the_images_digest(ctx):
    row = ctx.row()
    data = globus.transfer_data(
        ctx.source, ctx.destination, row["source_path"],
        ctx.destination.staged_path(ctx.job_id, "img-1"), "label", "sub-1",
        "sha512", DIGEST)
    assert (data["source_endpoint"], data["destination_endpoint"]) == (
        EAST_COLLECTION, WEST_COLLECTION)
    assert (data["verify_checksum"], data["encrypt_data"],
            data["submission_id"]) == (True, True, "sub-1")
    item, = data["DATA"]
    # East's collection shows its export at its root.
    assert item["source_path"] == "/.gvfs-migration/%s/img-1" % ctx.job_id
    assert item["destination_path"] == \
        "/export/.gvfs-migration/%s/img-1" % ctx.job_id
    assert (item["external_checksum"], item["checksum_algorithm"]) == (
        DIGEST, "SHA512")


def test_a_path_outside_the_export_is_refused(ctx):
    with pytest.raises(exceptions.StageFailed, match="not under the export"):
        globus.collection_path(ctx.source, "/etc/shadow")


def test_the_task_is_submitted_recorded_then_waited_for(ctx, service):
    load_response(globus_sdk.TransferClient.submit_transfer)
    _register_task(service, "ACTIVE", bytes_transferred=400)
    _register_task(service, "SUCCEEDED", bytes_transferred=1000)
    row = ctx.row()
    assert dtn_to_dtn.run(ctx, row) == {
        "transfer_task": None, "delta_base": None, "sent_bytes": 1000}
    body = _submitted(service)
    assert body["submission_id"] == SUBMISSION_ID
    assert body["DATA"][0]["external_checksum"] == DIGEST
    # Recorded before the wait (the pipeline clears it when it is done),
    # with the progress the service reported.
    stored = ctx.row()
    assert stored["transfer_task"] == TASK_ID
    assert stored["stage_bytes"] == 400
    assert len(_requests(service, "GET", "/task/%s" % TASK_ID)) == 2


def test_a_packed_archive_goes_as_the_first_images_task(ctx, service):
    """``--pack tar`` with a Globus site: one task carries the archive."""
    load_response(globus_sdk.TransferClient.submit_transfer)
    _register_task(service, "SUCCEEDED", bytes_transferred=5000)
    sent = pack.archive_path(ctx.source, ctx.job_id)
    received = pack.archive_path(ctx.destination, ctx.job_id)
    assert transfer.send(ctx, ctx.row(), sent, received) == \
        {"transfer_task": None}
    item, = _submitted(service)["DATA"]
    assert (item["source_path"], item["destination_path"]) == (
        globus.collection_path(ctx.source, sent),
        globus.collection_path(ctx.destination, received))
    # The archive's digest is nobody's: the service compares its own.
    assert "external_checksum" not in item
    assert ctx.row()["transfer_task"] == TASK_ID


def test_a_restarted_runner_waits_for_the_recorded_task(ctx, service):
    ctx.store.set_image(ctx.job_id, 0, transfer_task=TASK_ID)
    _register_task(service, "SUCCEEDED")
    assert globus.run(ctx, ctx.row()) == {"transfer_task": None}
    assert not _requests(service, "POST", "/v0.10/transfer")


@pytest.mark.parametrize("code,transient", [
    ("ENDPOINT_ERROR", True), ("PERMISSION_DENIED", False)])
def test_a_failed_task_is_retried_unless_no_retry_can_help(
        ctx, service, code, transient):
    load_response(globus_sdk.TransferClient.submit_transfer)
    _register_task(service, "FAILED", nice_status=None, fatal_error={
        "code": code, "description": "what the service said"})
    with pytest.raises(exceptions.StageFailed) as failed:
        globus.run(ctx, ctx.row())
    assert failed.value.transient is transient
    assert str(failed.value).endswith("the Globus transfer failed: %s"
                                      % code)
    # The service's words and the task are the operator's, in the log.
    assert "what the service said" not in str(failed.value)
    assert TASK_ID not in str(failed.value)
    assert failed.value.detail == "task %s: what the service said" % TASK_ID
    # The next attempt submits a new task.
    assert ctx.row()["transfer_task"] is None


def test_an_inactive_task_is_cancelled_with_a_clear_error(ctx, service):
    load_response(globus_sdk.TransferClient.submit_transfer)
    _register_cancel(service)
    _register_task(service, "INACTIVE", nice_status="PERMISSION_DENIED")
    with pytest.raises(exceptions.StageFailed,
                       match="granted access") as failed:
        globus.run(ctx, ctx.row())
    assert not failed.value.transient
    assert TASK_ID not in str(failed.value)
    assert failed.value.detail == "task %s is inactive: PERMISSION_DENIED" \
        % TASK_ID
    assert len(_requests(service, "POST", "/cancel")) == 1
    assert ctx.row()["transfer_task"] is None


def test_cancelling_the_job_cancels_the_task(ctx, service):
    load_response(globus_sdk.TransferClient.submit_transfer)
    _register_cancel(service)
    _register_task(service, "ACTIVE", bytes_transferred=10)
    ctx.store.set_job(ctx.job_id, cancel_requested=True)
    with pytest.raises(jobs.Cancelled):
        globus.run(ctx, ctx.row())
    assert len(_requests(service, "POST", "/cancel")) == 1


def test_a_cancel_stops_the_task_a_dead_runner_left(ctx, service):
    _register_cancel(service)
    ctx.store.set_image(ctx.job_id, 0, transfer_task=TASK_ID)
    globus.cancel_recorded(ctx, ctx.row())
    assert len(_requests(service, "POST", "/task/%s/cancel" % TASK_ID)) == 1
    assert ctx.row()["transfer_task"] is None


@pytest.mark.parametrize("status,transient", [
    (503, True), (429, True), (403, False), (404, False)])
def test_service_errors_on_submit(ctx, service, status, transient):
    """After the SDK's own retries (none here), 5xx and 429 are transient.

    4xx is not worth another attempt of the stage.
    """
    service.add(service.POST,
                "https://transfer.api.globus.org/v0.10/transfer",
                status=status, json={"code": "Err%d" % status,
                                     "message": "the service said no",
                                     "request_id": "r1"})
    with pytest.raises(exceptions.StageFailed,
                       match="submitting the transfer") as failed:
        globus.run(ctx, ctx.row())
    assert failed.value.transient is transient
    assert str(failed.value).endswith(
        "submitting the transfer: the Globus Transfer service answered "
        "%d Err%d" % (status, status))
    assert "the service said no" not in str(failed.value)
    assert failed.value.detail == "the service said no"
    assert ctx.row()["transfer_task"] is None


def test_an_unreachable_service_is_worth_another_attempt(ctx, service):
    # Nothing registered for the submission: the connection fails.
    with pytest.raises(exceptions.StageFailed,
                       match="submitting the transfer") as failed:
        globus.run(ctx, ctx.row())
    assert failed.value.transient


def test_a_gridftp_site_still_uses_globus_url_copy(tmp_path, monkeypatch):
    text = SITES.replace("dtn_transfer = globus\n", "gridftp_url = "
                         "gsiftp://dtn.example.org:2811\n")
    ctx = _Ctx(tmp_path, text)
    called = []
    from gvfs_openstack.migration import gridftp
    monkeypatch.setattr(gridftp, "run", lambda c, r: called.append(r) or {})
    assert dtn_to_dtn.run(ctx, ctx.row()) == {
        "delta_base": None, "sent_bytes": 1000}
    assert called and called[0]["image_id"] == "img-1"
    ctx.store.dispose()


def test_every_dtn_transfer_choice_has_a_method():
    [opt] = [o for o in migration_conf.SITE_OPTS
             if o.name == "dtn_transfer"]
    assert set(transfer.METHODS) == set(opt.type.choices)


def test_a_destination_without_the_senders_method_is_refused(tmp_path):
    """Checked before a job is made: west has no Globus collection."""
    east, west = SITES.split("[site:west]")
    west = west.replace("dtn_transfer = globus\n", "").replace(
        "globus_endpoint_id = %s\n" % WEST_COLLECTION,
        "gridftp_url = gsiftp://west.example.org:2811\n")
    text = east + "[site:west]" + west + \
        "[database]\nconnection = sqlite:///%s\n" % (tmp_path / "j.sqlite")
    manager = manager_mod.ConductorManager(_conf(tmp_path, text),
                                           config_args=[])
    with pytest.raises(exceptions.InvalidConfig, match=(
            r"\[site:west\] globus_endpoint_id.*site east sends with "
            r"Globus and site west has no collection")):
        manager.migrate(["image"], "west")
    assert manager.store.jobs() == []
