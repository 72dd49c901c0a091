# SPDX-License-Identifier: Apache-2.0
"""``openstack gvfs migrate`` and ``openstack gvfs migration ...``."""

import datetime
import sys
import time

from cliff import columns
from osc_lib.command import command
from osc_lib import exceptions as osc_exceptions

from gvfs_openstack.migration import states
from gvfs_openstack.osc import progress
from gvfs_openstack.osc import servers

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


class LinesColumn(columns.FormattableColumn):
    """A list: a line each in a table, the list itself in JSON."""

    def human_readable(self):
        return "\n".join(self._value)

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
        if job["state"] in states.FINISHED:
            return job
        time.sleep(interval)
        job = client.show_job(job["id"])


class Migrate(command.ShowOne):
    """Move images to another site's cloud (disaster recovery)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("images", metavar="<image>", nargs="*",
                            help="Image to migrate (name or ID)")
        parser.add_argument("--server", metavar="<server>",
                            help="Migrate this server instead of images "
                                 "(name or ID): Nova snapshots it, its "
                                 "flavor, key pair name, metadata and "
                                 "volumes are recorded as properties of "
                                 "the snapshot, which is sent as a delta "
                                 "against the server's image where the "
                                 "destination has that image (its "
                                 "kernel and ramdisk images go first if "
                                 "the destination lacks them); implies "
                                 "--wait with --boot")
        parser.add_argument("--boot", action="store_true",
                            help="With --server: boot a server from the "
                                 "migrated snapshot at the destination "
                                 "(same name, flavor, metadata and key "
                                 "pair, no networks)")
        parser.add_argument("--flavor-map", metavar="<source>=<dest>",
                            action="append", default=[],
                            help="With --boot: the destination's flavor "
                                 "for a flavor of the source (repeat for "
                                 "more; default: the same name)")
        parser.add_argument("--timeout", metavar="<seconds>", type=float,
                            default=1800.0,
                            help="With --server: seconds to wait for the "
                                 "snapshot, and with --boot for the "
                                 "server to be active (default: 1800)")
        parser.add_argument("--to", metavar="<site>", required=True,
                            dest="site",
                            help="Destination site (openstack gvfs site "
                                 "list)")
        parser.add_argument("--parallel", metavar="<n>", type=int,
                            help="Images in flight at once (default: the "
                                 "conductor's images_in_flight)")
        parser.add_argument("--pack", choices=states.PACK_METHODS,
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
        if parsed_args.server is not None:
            if parsed_args.images or parsed_args.pack or parsed_args.base:
                raise osc_exceptions.CommandError(
                    "--server takes no images, --pack or --base: the "
                    "server's own image is the base of its snapshot")
            return self._migrate_server(parsed_args)
        if not parsed_args.images:
            raise osc_exceptions.CommandError(
                "name the images to migrate, or a --server")
        if parsed_args.boot or parsed_args.flavor_map:
            raise osc_exceptions.CommandError(
                "--boot and --flavor-map go with --server")
        client = self.app.client_manager.gvfs
        job = client.migrate(parsed_args.images, parsed_args.site,
                             parsed_args.parallel, parsed_args.pack,
                             parsed_args.base)
        if parsed_args.wait:
            job = self._finished(client, job, parsed_args)
        return _job_row(job)

    def _finished(self, client, job, parsed_args):
        job = _wait(client, job, parsed_args.poll_interval, self.app.stderr)
        if job["state"] != states.DONE:
            raise osc_exceptions.CommandError(
                "migration %s ended %s: %s" % (job["id"], job["state"],
                                               job["error"] or ""))
        return job

    def _migrate_server(self, parsed_args):
        """Snapshot, record, migrate and (``--boot``) boot one server.

        Everything that can be refused is checked before the snapshot
        is taken: the server, the site and, with ``--boot``, the flavor
        at the destination.
        """
        manager = self.app.client_manager
        client = manager.gvfs
        here = servers.Cloud(manager.session, manager.region_name,
                             manager.interface)
        server = here.find_server(parsed_args.server)
        properties, not_carried = servers.record(server)
        site = client.show_site(parsed_args.site)
        there = servers.Cloud(manager.session, site["glance_region"],
                              manager.interface)
        flavor_id = None
        if parsed_args.boot:
            flavor = servers.parse_flavor_map(parsed_args.flavor_map).get(
                properties[servers.FLAVOR], properties[servers.FLAVOR])
            flavor_id = there.flavor_id(flavor)
            if flavor_id is None:
                raise osc_exceptions.CommandError(
                    "site %s has no flavor %s: name one with --flavor-map "
                    "%s=<flavor there>" % (site["name"], flavor,
                                           properties[servers.FLAVOR]))
        name = "%s-dr-%s" % (properties[servers.NAME], datetime.datetime.now(
            datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
        image_id = here.snapshot(server["id"], name)
        snapshot = servers.wait_for(
            lambda: here.show_image(image_id),
            lambda image: image["status"] == "active",
            lambda image: image["status"] in ("killed", "deleted",
                                              "deactivated") and
            "it is %s" % image["status"],
            "snapshot %s of server %s" % (image_id, properties[servers.NAME]),
            parsed_args.timeout, parsed_args.poll_interval)
        here.add_properties(image_id, properties)
        # Its kernel and ramdisk go first, in a job of their own: they
        # are not versions of the server's image.
        needed = [dependency for dependency in servers.dependencies(snapshot)
                  if there.show_image(dependency, missing_ok=True) is None]
        if needed:
            self._finished(client, client.migrate(needed, parsed_args.site),
                           parsed_args)
        # The server's image, if still there, is the base of the delta;
        # a destination without it gets the whole snapshot.
        base = server["image"]["id"]
        job = client.migrate(
            [image_id], parsed_args.site, base=base if here.show_image(
                base, missing_ok=True) is not None else None)
        booted = None
        if parsed_args.wait or parsed_args.boot:
            job = self._finished(client, job, parsed_args)
        if parsed_args.boot:
            booted = self._boot(there, image_id, flavor_id,
                                properties.get(servers.KEY_NAME),
                                not_carried, site["name"], parsed_args)
        return (("server", "snapshot", "job", "state", "destination",
                 "destination_server", "not_carried"),
                (server["id"], image_id, job["id"], job["state"],
                 site["name"], booted, LinesColumn(not_carried)))

    def _boot(self, there, image_id, flavor_id, key_name, not_carried,
              site, parsed_args):
        """The id of the server booted at the destination, once active."""
        if key_name and not there.has_keypair(key_name):
            not_carried.append("key pair %s (site %s has none of that "
                               "name)" % (key_name, site))
            key_name = None
        image = there.show_image(image_id)
        server_id = there.create_server(servers.boot_request(
            image, flavor_id, key_name))
        servers.wait_for(
            lambda: there.show_server(server_id),
            lambda server: server["status"] == "ACTIVE",
            lambda server: server["status"] == "ERROR" and "it failed: %s"
            % (server.get("fault") or {}).get("message", "no fault given"),
            "server %s at site %s" % (server_id, site),
            parsed_args.timeout, parsed_args.poll_interval)
        return server_id


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
                            choices=states.JOB_STATES,
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
