# SPDX-License-Identifier: Apache-2.0
"""What the conductor does for its callers: check a request, record the job,
start its runner; list, show and cancel jobs; resume unfinished jobs.

The RPC service (:mod:`gvfs_openstack.conductor.service`) exposes these
methods; they hold no RPC knowledge themselves.
"""

import datetime
import os
import subprocess
import sys
import threading

from oslo_log import log as logging

from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration import images_api as glance_api
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import notifications
from gvfs_openstack.migration import references
from gvfs_openstack.migration import sites
from gvfs_openstack.migration import states
from gvfs_openstack.migration import transfer

LOG = logging.getLogger(__name__)


#: What a job's row holds for the conductor alone: the trust it acts
#: with, the runner's lease, what was announced.
_PRIVATE = ("trust_id", "owner", "heartbeat", "notified")


def _job_view(store, job):
    """A job with its images and their progress, for callers."""
    view = {key: value.isoformat() if isinstance(value, datetime.datetime)
            else value for key, value in job.items()
            if key not in _PRIVATE}
    view["images"] = []
    for row in store.images(job["id"]):
        image = {k: row[k] for k in (
            "position", "image_id", "name", "size", "stage", "state",
            "stage_bytes", "destination_image_id", "delta_base",
            "sent_bytes", "attempts", "error")}
        image["updated_at"] = row["updated_at"].isoformat()
        view["images"].append(image)
    return view


class ConductorManager:
    def __init__(self, conf, config_args=None, notify=False):
        self.conf = conf
        self.store = jobs.open_store(conf)
        #: Announces job changes (the RPC service's manager does).
        self.notifier = notifications.JobNotifier(
            conf, self.store, _job_view) if notify else None
        self.local_site = conf.conductor.local_site
        # The runner reads the same configuration the conductor did.
        self.config_args = config_args if config_args is not None else \
            [arg for path in conf.config_file
             for arg in ("--config-file", path)] + \
            [arg for path in ([conf.config_dir] if conf.config_dir else [])
             for arg in ("--config-dir", path)]
        self._runners = {}
        #: Job id -> its project, for the jobs in ``_runners``.
        self._projects = {}
        #: A job was refused a slot since runners last ended.
        self._waiting = False
        self._lock = threading.Lock()  # RPC calls come in on threads.

    # --- requests ------------------------------------------------------------

    def migrate(self, image_ids, destination, images_in_flight=None,
                pack=None, project_id=None, user_id=None, trust_id=None,
                base=None, may_migrate=None):
        """Start moving images (ids or names) to ``destination``; the job.

        ``project_id`` and ``user_id``: who asked (gvfs-api's caller),
        recorded with the job.  ``trust_id``: the Keystone trust they
        delegated; the source images are found and read with it, so
        Glance shows the conductor only what it shows the user.
        ``base``: an image (id or name) the destination has, to send the
        images as deltas against.  ``may_migrate(image)``: whether the
        caller may move that image (one it may not is answered as missing).
        """
        if not image_ids:
            raise exceptions.ImageNotMigratable(image="-",
                                                reason="no image was named")
        if pack is not None and pack not in states.PACK_METHODS:
            raise exceptions.InvalidConfig(
                option="pack", reason="%r is not one of: %s" % (
                    pack, ", ".join(states.PACK_METHODS)))
        target = sites.load(self.conf, destination)
        source = sites.load(self.conf, self.local_site)
        if target.name == source.name:
            raise exceptions.InvalidConfig(
                option="destination",
                reason="site %s is this conductor's own site" % destination)
        method = transfer.method_of(source)
        if not getattr(target, method.site_option):
            raise exceptions.InvalidConfig(
                option="[site:%s] %s" % (target.name, method.site_option),
                reason="site %s sends with %s and site %s has no %s" % (
                    source.name, method.label, target.name,
                    method.site_part))
        method.check_pair(source, target)
        images = {}
        for image in self._find(source, image_ids, trust_id):
            name_or_id = image["requested_as"]
            if may_migrate is not None and not may_migrate(image):
                raise exceptions.ImageNotFound(image=name_or_id,
                                               site=source.name)
            if image.get("status") != "active":
                raise exceptions.ImageNotMigratable(
                    image=name_or_id, reason="it is %s, not active"
                    % image.get("status"))
            if not image.get("os_hash_value"):
                raise exceptions.ImageNotMigratable(
                    image=name_or_id, reason="Glance recorded no hash of "
                    "it to check the copy against")
            images[image["id"]] = image
        if base is not None:
            # Copies keep their source's id: the base is named as the
            # user knows it, at the source.
            [base_image] = self._find(source, [base], trust_id)
            if trust_id is None and project_id is not None and \
                    base_image.get("owner") != project_id and \
                    base_image.get("visibility") != "public":
                # Without a trust the conductor sees every project's
                # images: another's private one is answered as missing.
                raise exceptions.ImageNotFound(image=base, site=source.name)
            base = base_image["id"]
        job_id = self.store.create_job(
            source.name, target.name, list(images.values()),
            images_in_flight or self.conf.conductor.images_in_flight,
            pack=pack, project_id=project_id, user_id=user_id,
            trust_id=trust_id, delta_base=base)
        LOG.info("job %s of user %s of project %s moves %s to %s", job_id,
                 user_id, project_id, ", ".join(images), target.name)
        self._announce()
        self._launch(job_id, project_id)
        return self.show(job_id)

    def _find(self, source, image_ids, trust_id=None, visible_to=None):
        """The source images named by ids or names, in that order.

        ``visible_to``: the requester's project, whose images a name
        means when the lookup runs with the conductor's own credentials.
        """
        glance = glance_api.GlanceClient(
            sites.glance_session(self.conf, source.name, trust_id), source)
        for name_or_id in image_ids:
            yield dict(glance.find(name_or_id, visible_to),
                       requested_as=name_or_id)

    def check_trust(self, trust_id, user_id, project_id):
        """Refuse a migration asked without the requester's own trust.

        The request context comes over the message bus: without a trust
        the conductor would read the named project's images with its own
        credentials for whoever sent it (``[conductor] require_trust``).
        """
        if trust_id is None:
            if self.conf.conductor.require_trust:
                raise exceptions.TrustRefused(
                    reason="the request carries none ([conductor] "
                    "require_trust)")
            return
        sites.check_trust(self.conf, self.local_site, trust_id, user_id,
                          project_id)

    def find_images(self, image_ids, project_id=None):
        """What gvfs-api checks policy on, for each image named.

        Names mean the images ``project_id`` may see (the request's).
        """
        source = sites.load(self.conf, self.local_site)
        return [dict({key: image.get(key) for key in (
            "id", "name", "owner", "visibility", "status", "requested_as")},
            site=source.name) for image in self._find(
                source, image_ids, visible_to=project_id)]

    def golden_references(self, image_id, may_see=None):
        """The source image's owner and who holds it on the DTN export.

        ``may_see(image)``: whether the caller may see that image; one it
        may not is answered as missing before the export is walked.
        """
        source = sites.load(self.conf, self.local_site)
        [image] = self._find(source, [image_id])
        if may_see is not None and not may_see(image):
            raise exceptions.ImageNotFound(image=image_id, site=source.name)
        return {"image_id": image["id"], "owner": image.get("owner"),
                "references": references.of_image(source, image["id"])}

    def sites(self):
        """The sites, and which of them are destinations of this one."""
        return [{"name": name, "local": name == self.local_site,
                 "destination": name != self.local_site,
                 "glance_region": self.conf[
                     migration_conf.SITE_GROUP % name].glance_region}
                for name in self.conf.conductor.sites]

    def list(self, project_id=None, states=None, limit=None, marker=None):
        return [_job_view(self.store, job) for job in self.store.jobs(
            states=states, project_id=project_id, limit=limit,
            marker=marker)]

    def show(self, job_id):
        return _job_view(self.store, self.store.job(job_id))

    def cancel(self, job_id):
        """Ask the job's runner to stop and undo the job."""
        job = self.store.job(job_id)
        if job["state"] in states.FINISHED:
            raise exceptions.JobFinished(job=job_id, state=job["state"])
        self.store.set_job(job_id, cancel_requested=True)
        if not self._running(job_id):
            # Its runner does the undoing, at once: it starts no work.
            self._launch(job_id, job["project_id"], capped=False)
        return self.show(job_id)

    # --- runners -------------------------------------------------------------

    def _running(self, job_id):
        with self._lock:
            runner = self._runners.get(job_id)
            return runner is not None and runner.poll() is None

    def _launch(self, job_id, project_id, capped=True):
        """Start the runner of ``job_id``, if it has a slot.

        ``capped``: it waits, queued, while this conductor runs
        ``max_running_jobs``, or ``max_running_jobs_per_project`` of its
        project ``project_id`` (:meth:`_after` starts it when a runner
        ends).
        """
        argv = [sys.executable, "-m", "gvfs_openstack.migration.runner"] + \
            self.config_args + [job_id]
        with self._lock:
            runner = self._runners.get(job_id)
            if runner is not None and runner.poll() is None:
                return
            if capped and not self._has_slot(project_id):
                self._waiting = True
                LOG.info("job %s waits for a slot (max_running_jobs, "
                         "max_running_jobs_per_project)", job_id)
                return
            LOG.info("starting the runner of job %s", job_id)
            runner = self._runners[job_id] = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, start_new_session=True,
                env=dict(os.environ))
            self._projects[job_id] = project_id
        threading.Thread(target=self._after, args=(job_id, runner),
                         name="gvfs-runner-%s" % job_id[:8],
                         daemon=True).start()

    def _has_slot(self, project):
        """Whether a job of ``project`` may start now (under the lock)."""
        opts = self.conf.conductor
        live = [job_id for job_id, runner in self._runners.items()
                if runner.poll() is None]
        if len(live) >= opts.max_running_jobs:
            return False
        return project is None or sum(
            self._projects.get(job_id) == project for job_id in live) < \
            opts.max_running_jobs_per_project

    def _after(self, job_id, runner):
        """When a runner ends: announce it, start the jobs that waited.

        Only after a job was refused a slot, and not the job that just
        ended: a runner that exits at once (its job leased by another
        conductor) must not start itself again in a loop.
        """
        runner.wait()
        self._announce()
        with self._lock:
            waiting, self._waiting = self._waiting, False
        if waiting:
            for job in self.store.jobs(states=(states.QUEUED,)):
                if job["id"] != job_id and not self._running(job["id"]):
                    self._launch(job["id"], job["project_id"])

    def _announce(self):
        if self.notifier is not None:
            self.notifier.announce()

    def resume(self):
        """Start runners for unfinished jobs that have none here.

        Called at start and periodically: a job whose runner died (with
        its host, or with a conductor that shared the job store) is taken
        over once its lease has expired; until then the new runner finds
        the job busy and exits.
        """
        self.reap()
        self._announce()
        for job in self.store.jobs(states=(states.QUEUED, states.RUNNING)):
            if not self._running(job["id"]):
                LOG.info("resuming job %s", job["id"])
                self._launch(job["id"], job["project_id"])

    def reap(self):
        """Forget runners that ended."""
        with self._lock:
            for job_id, runner in list(self._runners.items()):
                if runner.poll() is not None:
                    del self._runners[job_id]
                    self._projects.pop(job_id, None)

    def stop(self):
        """Leave the runners running: the next conductor sees their work."""
        self.store.dispose()
