# SPDX-License-Identifier: Apache-2.0
"""One job's images through the three stages, with the DTN paper's fork().

The paper coordinates a transfer with ``fork()``: the first child does the
local copy, the second child the DTN-to-DTN transfer, and the parent the
remote copy, each starting when the one before has finished.  Here the
three processes work on different images at once -- image k crosses the
DTN link while k+1 is in local copy and k-1 in remote copy -- handing
images on through pipes, with at most ``images_in_flight`` images between
the start of the local copy and the end of the remote copy (a semaphore
the parent releases).

The runner must be forked while it has one thread (it is started as its
own process, see :mod:`gvfs_openstack.migration.runner`), and the children
die with it (``PR_SET_PDEATHSIG``), so a killed runner leaves no stage
running; what each stage completed is in the job store, and the next
runner resumes from there.
"""

from concurrent import futures
import dataclasses
import multiprocessing
import os
import signal
import socket
import threading
import time
import typing

from keystoneauth1 import exceptions as ks_exceptions
from oslo_log import log as logging

from gvfs_openstack import exceptions
from gvfs_openstack.migration import cleanup
from gvfs_openstack.migration import dtn_to_dtn
from gvfs_openstack.migration import images_api as glance_api
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import lifeline
from gvfs_openstack.migration import localcopy
from gvfs_openstack.migration import pack
from gvfs_openstack.migration import remotecopy
from gvfs_openstack.migration import sites
from gvfs_openstack.migration import states
from gvfs_openstack.migration import transfer
from gvfs_openstack.nfs.errors import NfsError

LOG = logging.getLogger(__name__)

_FORK = multiprocessing.get_context("fork")
_END = -1  # Sent down a pipe after the last image.
_MAX_BACKOFF = 60.0

#: Faults a retry may cure: the network, a restarting server.
_TRANSIENT = (ConnectionError, TimeoutError, NfsError,
              ks_exceptions.ConnectFailure, ks_exceptions.ConnectTimeout)


class StageContext:
    """What a stage needs, built in the process that runs it."""

    def __init__(self, conf, store_url, job):
        self.job_id = job["id"]
        #: The requester's project (None: an operator's job).
        self.project_id = job.get("project_id")
        self.store = jobs.open_store(conf, store_url)
        self.source = sites.load(conf, job["source"])
        self.destination = sites.load(conf, job["destination"])
        # As the user who asked, where they delegated a trust: Glance
        # lets the conductor read only what it lets them read.
        self.source_glance = glance_api.GlanceClient(
            sites.glance_session(conf, job["source"], job.get("trust_id")),
            self.source)
        self.destination_glance = glance_api.GlanceClient(
            sites.glance_session(conf, job["destination"]),
            self.destination)
        self.globus_url_copy = conf.conductor.globus_url_copy
        self.globus_poll_interval = conf.globus.poll_interval
        self._globus_credentials = (conf.globus.client_id,
                                    conf.globus.client_secret)
        self._globus = None
        self.delta_transfer = conf.conductor.delta_transfer
        self.delta_max_ratio = conf.conductor.delta_max_ratio
        self.retries = conf.conductor.retries
        self.retry_backoff = conf.conductor.retry_backoff
        self._cancel_checked = 0.0

    def globus_client(self):
        """The Globus TransferClient, made once in the process using it."""
        if self._globus is None:
            from gvfs_openstack.migration import globus
            self._globus = globus.client(*self._globus_credentials)
        return self._globus

    def cancelled(self):
        return self.store.job(self.job_id)["cancel_requested"]

    def progress(self, row, stage_bytes):
        """A stage's resume point; raises Cancelled if the job was."""
        self.store.progress(self.job_id, row["position"], stage_bytes)
        now = time.monotonic()
        if now - self._cancel_checked > 1.0:
            self._cancel_checked = now
            if self.cancelled():
                raise jobs.Cancelled()

    def record(self, row, **values):
        self.store.set_image(self.job_id, row["position"], **values)
        row.update(values)


@dataclasses.dataclass(frozen=True)
class Stage:
    """One stage of an image's migration, as :func:`run_stage` runs it.

    ``run(ctx, row)`` does the stage's work and returns the job-store
    values it completed; ``resume_point(ctx, row)`` says where a
    restarted run goes on, in bytes (None: the row's ``stage_bytes``).
    """

    name: str
    run: typing.Callable
    next: str
    resume_point: typing.Optional[typing.Callable] = None


#: The stages in order.
STAGES = (
    Stage(states.LOCAL_COPY, localcopy.run, states.TRANSFER),
    Stage(states.TRANSFER, dtn_to_dtn.run, states.REMOTE_COPY,
          transfer.resume_point),
    Stage(states.REMOTE_COPY, remotecopy.run, states.DONE),
)


def _is_transient(error):
    if isinstance(error, exceptions.StageFailed):
        return error.transient
    return isinstance(error, _TRANSIENT)


def run_stage(ctx, stage, position):
    """Run ``stage`` of one image, with retries; True if it completed.

    An image whose row is already past this stage (a resumed job) or
    failed passes through untouched.
    """
    name, next_stage = stage.name, stage.next
    row = ctx.store.image(ctx.job_id, position)
    ended = (states.FAILED, states.CANCELLED)
    if row["state"] in ended or row["stage"] != name:
        return row["state"] not in ended
    delay = ctx.retry_backoff
    for attempt in range(ctx.retries + 1):
        if ctx.cancelled():
            return False
        ctx.record(row, state=states.RUNNING, attempts=attempt + 1)
        run_id = ctx.store.start_run(
            ctx.job_id, position, name, os.getpid(),
            stage.resume_point(ctx, row) if stage.resume_point
            else row["stage_bytes"])
        try:
            values = stage.run(ctx, row)
        except jobs.Cancelled:
            ctx.store.end_run(run_id, states.CANCELLED, 0)
            return False
        except Exception as e:  # Every failure is recorded, not lost.
            transient = _is_transient(e)
            ctx.store.end_run(run_id, states.FAILED, 0)
            LOG.warning("%s of image %s failed (attempt %d of %d, %s): %s",
                        name, row["image_id"], attempt + 1, ctx.retries + 1,
                        "transient" if transient else "permanent",
                        exceptions.described(e))
            ctx.record(row, error="%s: %s" % (name, e))
            if not transient or attempt == ctx.retries:
                ctx.record(row, state=states.FAILED)
                return False
            time.sleep(delay)
            delay = min(delay * 2, _MAX_BACKOFF)
            row = ctx.store.image(ctx.job_id, position)
            continue
        ctx.store.end_run(run_id, "done", row["size"] or 0)
        ctx.store.finish_stage(ctx.job_id, position, next_stage,
                               state=(states.DONE if next_stage == states.DONE
                                      else states.RUNNING), **values)
        return True
    return False


def _worker(parent_pid, conf, store_url, job, stage, inbox, outbox, slots,
            workers=1):
    """A forked stage worker: images in from ``inbox``, on to ``outbox``.

    ``workers`` images at once (threads), each passed on as it is done.
    """
    lifeline.die_with_parent(parent_pid)
    ctx = StageContext(conf, store_url, job)
    positions = iter(inbox.get, _END) if inbox is not None else \
        (row["position"] for row in ctx.store.images(job["id"]))

    def one(position):
        run_stage(ctx, stage, position)
        outbox.put(position)

    with futures.ThreadPoolExecutor(
            max_workers=workers,
            thread_name_prefix="gvfs-%s" % stage.name) as pool:
        running = []
        for position in positions:
            if slots is not None:
                slots.acquire()
            running.append(pool.submit(one, position))
    outbox.put(_END)
    for future in running:
        future.result()     # Failures are recorded; a bug is raised.


def _keep_lease(conf, store_url, job_id, owner, every, stop):
    """Renew the job's lease until ``stop`` is set (a thread)."""
    store = jobs.open_store(conf, store_url)
    try:
        while not stop.wait(every):
            if not store.heartbeat(job_id, owner):
                LOG.error("job %s was taken over by another runner",
                          job_id)
                os.kill(os.getpid(), signal.SIGTERM)
                return
    finally:
        store.dispose()


def run(conf, store_url, job_id, owner=None):
    """Run (or resume) one job to its end; returns the job's final state.

    Raises JobBusy when another live runner holds the job.
    """
    owner = owner or "%s:%d" % (socket.gethostname(), os.getpid())
    store = jobs.open_store(conf, store_url)
    job = store.job(job_id)
    if job["state"] in states.FINISHED:
        return job["state"]
    if not store.claim(job_id, owner, conf.conductor.lease_seconds):
        raise exceptions.JobBusy(job=job_id, owner=store.job(job_id)["owner"])
    try:
        store.set_job(job_id, state=states.RUNNING, error=None)
        store.dispose()  # No connection crosses the fork.
        state = _run_claimed(conf, store_url, job, owner)
        if job.get("trust_id") and state in states.FINISHED:
            _forget_trust(conf, job)
        return state
    finally:
        store.release(job_id, owner)
        store.dispose()


def _forget_trust(conf, job):
    """The job's trust is no longer needed: delete it, or say so."""
    try:
        forgotten = sites.forget_trust(conf, job["source"], job["trust_id"])
    except exceptions.GvfsError:
        forgotten = False
    if not forgotten:
        LOG.warning("could not delete trust %s of job %s; it expires by "
                    "itself", job["trust_id"], job["id"])


def _start_lease(conf, store_url, job, owner):
    """The thread renewing the job's lease; set the event to stop it."""
    stop = threading.Event()
    lease = threading.Thread(target=_keep_lease, name="gvfs-lease", args=(
        conf, store_url, job["id"], owner, conf.conductor.lease_seconds / 3.0,
        stop), daemon=True)
    lease.start()
    return stop


def _run_claimed(conf, store_url, job, owner):
    if job["pack"]:
        return _run_packed(conf, store_url, job, owner)
    slots = _FORK.Semaphore(job["images_in_flight"])
    to_transfer, to_remote = _FORK.SimpleQueue(), _FORK.SimpleQueue()
    children = [
        _FORK.Process(target=_worker, name="gvfs-local-copy", args=(
            os.getpid(), conf, store_url, job, STAGES[0], None,
            to_transfer, slots)),
        _FORK.Process(target=_worker, name="gvfs-transfer", args=(
            os.getpid(), conf, store_url, job, STAGES[1], to_transfer,
            to_remote, None, conf.conductor.transfers)),
    ]
    for child in children:
        child.start()
    # Threads only now: the children are forked.
    stop = _start_lease(conf, store_url, job, owner)
    ctx = StageContext(conf, store_url, job)
    finished = False
    try:
        _remote_copies(ctx, iter(to_remote.get, _END),
                       conf.conductor.remote_copies, slots.release)
        state = _finish(ctx)
        finished = True
        return state
    finally:
        stop.set()
        for child in children:
            if not finished:
                child.terminate()
            child.join()
        ctx.store.dispose()


def _run_packed(conf, store_url, job, owner):
    """The paper's procedure with packing (``--pack tar``).

    Every local copy, then one archive across the DTN link, then every
    remote copy.  Nothing to overlap, so no fork: the stages run one
    after another in the runner, each image's progress recorded as in the
    pipeline.
    """
    stop = _start_lease(conf, store_url, job, owner)
    ctx = StageContext(conf, store_url, job)
    try:
        for row in ctx.store.images(ctx.job_id):
            run_stage(ctx, STAGES[0], row["position"])
        waiting = [r for r in ctx.store.images(ctx.job_id)
                   if r["stage"] == states.TRANSFER
                   and r["state"] not in (states.FAILED, states.CANCELLED)]
        if waiting:
            lead = waiting[0]
            sent = run_stage(ctx, Stage(
                states.TRANSFER, pack.PackedTransfer(waiting).run,
                states.REMOTE_COPY), lead["position"])
            outcome = ctx.store.image(ctx.job_id, lead["position"])
            for row in waiting[1:]:
                if sent:
                    ctx.store.finish_stage(ctx.job_id, row["position"],
                                           states.REMOTE_COPY,
                                           state=states.RUNNING)
                elif outcome["state"] == states.FAILED:
                    ctx.record(row, state=states.FAILED, error="%s (packed "
                               "with image %s)" % (outcome["error"],
                                                   lead["image_id"]))
        _remote_copies(ctx, [row["position"] for row in
                             ctx.store.images(ctx.job_id)],
                       conf.conductor.remote_copies)
        return _finish(ctx)
    finally:
        stop.set()
        ctx.store.dispose()


def _remote_copies(ctx, positions, workers, done=None):
    """The remote copy of each position as it comes, ``workers`` at once.

    Each image's source staging copy goes when it is registered, then
    ``done`` (a slot for the next image) is called.  Failures are recorded
    by run_stage; anything else is raised once all have ended.
    """
    def one(position):
        run_stage(ctx, STAGES[2], position)
        _clean_source_staging(ctx, position)
        if done is not None:
            done()

    with futures.ThreadPoolExecutor(
            max_workers=workers,
            thread_name_prefix="gvfs-remote-copy") as pool:
        running = [pool.submit(one, position) for position in positions]
    for future in running:
        future.result()


def _clean_source_staging(ctx, position):
    row = ctx.store.image(ctx.job_id, position)
    if row["state"] != states.DONE:
        return
    staged = ctx.source.staged_path(ctx.job_id, row["image_id"])
    if row["source_path"] != staged:
        return  # Sent from the gvfs store: not a copy of ours.
    try:
        cleanup.remove_source_file(ctx, row["image_id"])
    except (OSError, NfsError) as e:
        LOG.warning("cannot remove %s from the source DTN (the job's "
                    "end tries again): %s", staged, e)


def _finish(ctx):
    rows = ctx.store.images(ctx.job_id)
    if ctx.cancelled():
        cleanup.cancel(ctx, rows)
        return states.CANCELLED
    failed = [r for r in rows if r["state"] != states.DONE]
    state = states.FAILED if failed else states.DONE
    # Clean first: a finished job has nothing left in transit.
    cleanup.staging_dirs(ctx)
    ctx.store.set_job(ctx.job_id, state=state, error="; ".join(
        "%s: %s" % (r["image_id"], r["error"]) for r in failed) or None)
    return state
