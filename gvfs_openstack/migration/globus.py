# SPDX-License-Identifier: Apache-2.0
"""Stage 2, DTN to DTN, through the Globus Transfer service.

For DTNs registered as Globus collections (``dtn_transfer = globus``):
instead of driving the two GridFTP servers itself with ``globus-url-copy``,
the conductor asks the service to move the staged file from the source
collection to the destination's.  The service restarts broken transfers
from their restart markers and retries faults until the task's deadline;
the file is encrypted in transit and the destination's checksum is
compared with the image's own digest (Glance's ``os_hash_value``), so a
flipped byte fails the task rather than reaching the remote copy.

The task's id is recorded in the job store before the conductor waits for
it: a runner that restarts (a killed conductor) waits for the same task
instead of submitting a second copy of the file.
"""

import posixpath
import time

import globus_sdk
from globus_sdk.scopes import TransferScopes
from oslo_log import log as logging

from gvfs_openstack import exceptions
from gvfs_openstack.migration import jobs

LOG = logging.getLogger(__name__)

STAGE = "DTN-to-DTN transfer (Globus)"

#: Globus checksum algorithms for the digests Glance records.
_ALGORITHMS = {"md5": "MD5", "sha1": "SHA1", "sha256": "SHA256",
               "sha512": "SHA512"}
#: What a call to the service raises when it or the network fails.
_SERVICE_ERRORS = (globus_sdk.GlobusAPIError, globus_sdk.NetworkError)
#: Fatal task errors no retry can cure.
_PERMANENT_CODES = ("PERMISSION_DENIED", "FILE_NOT_FOUND", "NOT_FOUND",
                    "QUOTA_EXCEEDED", "FILE_SIZE_CHANGED")


def client(client_id, client_secret):
    """A TransferClient acting as the conductor's confidential client."""
    auth = globus_sdk.ConfidentialAppAuthClient(client_id, client_secret)
    authorizer = globus_sdk.ClientCredentialsAuthorizer(
        auth, TransferScopes.all)
    return globus_sdk.TransferClient(authorizer=authorizer)


def collection_path(site, path):
    """``path`` on the site's DTN as its Globus collection names it.

    Only paths under the export are moved; the collection may show the
    export elsewhere (``globus_export_path``).
    """
    relative = posixpath.relpath(posixpath.normpath(path), site.dtn_export)
    if relative == ".." or relative.startswith("../"):
        raise exceptions.StageFailed(
            stage=STAGE, image=posixpath.basename(path),
            reason="a path is not under the export of site %s" % site.name,
            detail="%s is not under %s" % (path, site.dtn_export))
    return posixpath.normpath(posixpath.join(site.globus_export_path,
                                             relative))


def transfer_data(source, destination, source_path, destination_path,
                  label, submission_id, hash_algo=None, hash_value=None):
    """The TransferData of one staged image.

    ``sync_level = checksum`` makes a resubmitted task skip a file that
    already arrived whole; the image's own digest, when the service knows
    its algorithm, is what the destination's copy is checked against.
    """
    data = globus_sdk.TransferData(
        source.globus_endpoint_id, destination.globus_endpoint_id,
        label=label, submission_id=submission_id, sync_level="checksum",
        verify_checksum=True, encrypt_data=True, fail_on_quota_errors=True,
        notify_on_succeeded=False, notify_on_failed=False,
        notify_on_inactive=False)
    algorithm = _ALGORITHMS.get((hash_algo or "").lower())
    extra = {}
    if algorithm and hash_value:
        extra = {"external_checksum": hash_value,
                 "checksum_algorithm": algorithm}
    data.add_item(collection_path(source, source_path),
                  collection_path(destination, destination_path), **extra)
    return data


def _failed(row, reason, transient, detail=None):
    """A stage failure: ``reason`` for the job, ``detail`` for the log.

    What the job's project reads names no task id, collection, path or
    host: the Globus service's own words (which name them) and the task
    id go to the conductor's log, where the operator finds the task.
    """
    return exceptions.StageFailed(stage=STAGE, image=row["image_id"],
                                  reason=reason, transient=transient,
                                  detail=detail)


def _api_error(row, what, error, task_id=None):
    """A service error as a stage failure.

    The network, 5xx and rate limits are worth another attempt (the SDK
    has already retried them a few times); 4xx is a user's error.
    """
    task = "task %s: " % task_id if task_id else ""
    if isinstance(error, globus_sdk.NetworkError):
        return _failed(row, "%s: the Globus Transfer service did not "
                       "answer" % what, True, detail=task + str(error))
    transient = error.http_status >= 500 or error.http_status == 429
    return _failed(row, "%s: the Globus Transfer service answered %d %s"
                   % (what, error.http_status, error.code), transient,
                   detail="%s%s" % (task, error.message))


def _submit(ctx, transfer, row, source_path, destination_path, hash_algo,
            hash_value):
    label = "gvfs-openstack %s image %s" % (ctx.job_id[:8], row["image_id"])
    try:
        submission_id = transfer.get_submission_id()["value"]
        data = transfer_data(ctx.source, ctx.destination, source_path,
                             destination_path, label, submission_id,
                             hash_algo, hash_value)
        task_id = transfer.submit_transfer(data)["task_id"]
    except _SERVICE_ERRORS as e:
        raise _api_error(row, "submitting the transfer", e) from e
    LOG.info("transfer of %s: Globus task %s", row["image_id"], task_id)
    # Recorded before waiting: a restarted runner waits for this task.
    ctx.record(row, transfer_task=task_id)
    return task_id


def _cancel(transfer, task_id):
    try:
        transfer.cancel_task(task_id)
    except _SERVICE_ERRORS as e:
        LOG.warning("cannot cancel Globus task %s: %s", task_id, e)


def _wait(ctx, transfer, row, task_id):
    """Until the task ends; its final document."""
    while True:
        try:
            task = transfer.get_task(task_id)
        except _SERVICE_ERRORS as e:
            raise _api_error(row, "asking how the transfer goes", e,
                             task_id) from e
        if task["status"] in ("SUCCEEDED", "FAILED"):
            return task
        if task["status"] == "INACTIVE":
            # Paused for credentials or consent no conductor can give.
            _cancel(transfer, task_id)
            ctx.record(row, transfer_task=None)
            raise _failed(row, "the Globus transfer is paused for "
                          "credentials: the collections need the "
                          "conductor's client to be granted access",
                          False, detail="task %s is inactive: %s" % (
                              task_id, task.get("nice_status")))
        try:
            ctx.progress(row, task.get("bytes_transferred") or 0)
        except jobs.Cancelled:  # The task must not go on without us.
            _cancel(transfer, task_id)
            raise
        time.sleep(ctx.globus_poll_interval)


def cancel_recorded(ctx, row):
    """Cancel the task a cancelled job left running (its runner had died).

    Before the staging directories go: a running task would write into
    them again.
    """
    _cancel(ctx.globus_client(), row["transfer_task"])
    ctx.record(row, transfer_task=None)


def run(ctx, row):
    """Stage 2 for one image; returns the job-store values it completed."""
    return send(ctx, row, row["source_path"],
                ctx.destination.staged_path(ctx.job_id, row["image_id"]),
                row.get("hash_algo"), row.get("hash_value"))


def send(ctx, row, source_path, destination_path, hash_algo=None,
         hash_value=None):
    """Move one file between the collections, as a task of ``row``.

    A packed job's archive goes as its first image's task.  Returns the
    job-store values to record once the stage completed.
    """
    transfer = ctx.globus_client()
    task_id = row.get("transfer_task")
    if task_id:
        LOG.info("transfer of %s: waiting again for Globus task %s",
                 row["image_id"], task_id)
    else:
        task_id = _submit(ctx, transfer, row, source_path, destination_path,
                          hash_algo, hash_value)
    task = _wait(ctx, transfer, row, task_id)
    if task["status"] == "SUCCEEDED":
        return {"transfer_task": None}
    # The next attempt submits a new task.
    ctx.record(row, transfer_task=None)
    fatal = task.get("fatal_error") or {}
    code = fatal.get("code") or "FAILED"
    raise _failed(row, "the Globus transfer failed: %s" % code,
                  code not in _PERMANENT_CODES, detail="task %s: %s" % (
                      task_id, fatal.get("description") or
                      task.get("nice_status") or ""))
