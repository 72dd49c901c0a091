# SPDX-License-Identifier: Apache-2.0
"""``openstack gvfs migrate`` and ``openstack gvfs migration ...``."""

import sys
import time

from cliff import columns
from osc_lib.command import command
from osc_lib import exceptions as osc_exceptions

from gvfs_openstack.migration import jobs
from gvfs_openstack.osc import progress

_JOB_COLUMNS = ("id", "state", "source", "destination", "project_id",
                "user_id", "images_in_flight", "pack", "created_at",
                "updated_at", "error")


class ImagesColumn(columns.FormattableColumn):
    """A job's images: a line each in a table, the list itself in JSON."""

    def human_readable(self):
        return "\n".join(
            "%s %s %s%s" % (i["image_id"], i["stage"], i["state"],
                            (": " + i["error"]) if i["error"] else "")
            for i in self._value)

    def machine_readable(self):
        return self._value


def _job_row(job):
    columns = _JOB_COLUMNS + ("images",)
    return columns, tuple(job.get(c) for c in _JOB_COLUMNS) + (
        ImagesColumn(job["images"]),)


def _wait(client, job, interval, stream=None):
    stream = stream or sys.stdout
    view = progress.view(stream, stream.isatty())
    while True:
        view.show(job)
        if job["state"] in jobs.FINISHED:
            return job
        time.sleep(interval)
        job = client.show_job(job["id"])


class Migrate(command.ShowOne):
    """Move images to another site's cloud (disaster recovery)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("images", metavar="<image>", nargs="+",
                            help="Image to migrate (name or ID)")
        parser.add_argument("--to", metavar="<site>", required=True,
                            dest="site",
                            help="Destination site (openstack gvfs site "
                                 "list)")
        parser.add_argument("--parallel", metavar="<n>", type=int,
                            help="Images in flight at once (default: the "
                                 "conductor's images_in_flight)")
        parser.add_argument("--pack", choices=jobs.PACK_METHODS,
                            help="Pack the images into one compressed "
                                 "archive on the source DTN and send that "
                                 "(the DTN paper's tar+compress, for many "
                                 "small images); no pipelining")
        parser.add_argument("--base", metavar="<image>",
                            help="An image the destination has (name or "
                                 "ID, as at the source) to send the images "
                                 "as deltas against: only the blocks it "
                                 "lacks cross the DTN link (default: the "
                                 "newest image of the same name family)")
        parser.add_argument("--wait", action="store_true",
                            help="Show progress until the job ends; fail "
                                 "if it does not end done")
        parser.add_argument("--poll-interval", metavar="<seconds>",
                            type=float, default=2.0,
                            help="Seconds between progress updates with "
                                 "--wait (default: 2)")
        return parser

    def take_action(self, parsed_args):
        if parsed_args.parallel is not None and parsed_args.parallel < 1:
            raise osc_exceptions.CommandError("--parallel must be 1 or more")
        client = self.app.client_manager.gvfs
        job = client.migrate(parsed_args.images, parsed_args.site,
                             parsed_args.parallel, parsed_args.pack,
                             parsed_args.base)
        if parsed_args.wait:
            job = _wait(client, job, parsed_args.poll_interval,
                        self.app.stderr)
            if job["state"] != jobs.DONE:
                raise osc_exceptions.CommandError(
                    "migration %s ended %s: %s" % (job["id"], job["state"],
                                                   job["error"] or ""))
        return _job_row(job)


class ListMigrations(command.Lister):
    """List migration jobs (of your project, unless you are admin)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--long", action="store_true",
                            help="List more fields")
        parser.add_argument("--all-projects", action="store_true",
                            help="Jobs of every project (admin)")
        parser.add_argument("--project", metavar="<project-id>",
                            help="Jobs of this project (admin, unless it "
                                 "is yours)")
        parser.add_argument("--status", metavar="<state>",
                            choices=("queued", "running", jobs.DONE,
                                     jobs.FAILED, jobs.CANCELLED),
                            help="Only jobs in this state")
        parser.add_argument("--limit", metavar="<n>", type=int,
                            help="At most this many jobs (one page)")
        parser.add_argument("--marker", metavar="<job>",
                            help="Jobs after this one (the last of the "
                                 "previous page)")
        return parser

    def take_action(self, parsed_args):
        if parsed_args.limit is not None and parsed_args.limit < 1:
            raise osc_exceptions.CommandError("--limit must be 1 or more")
        found = self.app.client_manager.gvfs.list_jobs(
            project_id=parsed_args.project,
            all_projects=parsed_args.all_projects,
            status=parsed_args.status, limit=parsed_args.limit,
            marker=parsed_args.marker)
        headers = ["ID", "State", "Source", "Destination", "Images",
                   "Created At"]
        fields = ["id", "state", "source", "destination", None,
                  "created_at"]
        if parsed_args.long:
            headers[4:4] = ["Project ID", "User ID"]
            fields[4:4] = ["project_id", "user_id"]
            headers += ["Updated At", "Error"]
            fields += ["updated_at", "error"]
        return (headers, [
            tuple(len(j["images"]) if f is None else j.get(f)
                  for f in fields) for j in found])


class _OneJobCommand(command.ShowOne):
    """A command on one job, named by its ID."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("job", metavar="<job>", help="Job ID")
        return parser


class ShowMigration(_OneJobCommand):
    """Show a migration job and the stage of each of its images."""

    def take_action(self, parsed_args):
        return _job_row(self.app.client_manager.gvfs.show_job(
            parsed_args.job))


class CancelMigration(_OneJobCommand):
    """Cancel a migration: what it staged and did not finish is removed."""

    def take_action(self, parsed_args):
        return _job_row(self.app.client_manager.gvfs.cancel_job(
            parsed_args.job))
