# SPDX-License-Identifier: Apache-2.0
"""``openstack gvfs replication ...``: images that keep themselves copied
to another site."""

from cliff import columns
from osc_lib.command import command
from osc_lib import exceptions as osc_exceptions

_COLUMNS = ("id", "name", "project_id", "source", "destination",
            "selector_kind",
            "selector", "delete_follows", "paused", "images_in_sync",
            "images_pending", "images_failed", "bytes_moved",
            "recovery_point_seconds", "reconciled_at", "created_at")


class SelectorColumn(columns.FormattableColumn):
    """What a policy selects: ``tag=golden``, ``os_distro=debian``."""

    def human_readable(self):
        value = self._value
        if "tag" in value:
            return "tag=%s" % value["tag"]
        if "images" in value:
            return "images=%s" % ",".join(value["images"])
        return "%s=%s" % (value["key"], value["value"])

    def machine_readable(self):
        return self._value


class ImagesColumn(columns.FormattableColumn):
    """A policy's images: a line each in a table, the list in JSON."""

    def human_readable(self):
        return "\n".join(
            "%s %s%s" % (i["image_id"], i["state"],
                         (": " + i["error"]) if i["error"] else "")
            for i in self._value)

    def machine_readable(self):
        return self._value


def _row(view):
    values = tuple(SelectorColumn(view[c]) if c == "selector" else view.get(c)
                   for c in _COLUMNS)
    return _COLUMNS + ("images",), values + (ImagesColumn(view["images"]),)


class _NamesPolicy:
    """A command about one policy, named by its id."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("policy", metavar="<replication>",
                            help="Replication policy (ID)")
        return parser


class _PolicyCommand(_NamesPolicy, command.ShowOne):
    pass


class CreateReplication(command.ShowOne):
    """Keep images of your project copied to another site.

    Every image of your project that the policy selects -- now and when
    it becomes active later -- is migrated to the site; property changes
    follow, and with --delete-follows so do deletes.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--to", metavar="<site>", required=True,
                            dest="site", help="Destination site")
        selector = parser.add_mutually_exclusive_group(required=True)
        selector.add_argument("--tag", metavar="<tag>",
                              help="Images with this tag")
        selector.add_argument("--property", metavar="<key=value>",
                              help="Images with this property value")
        selector.add_argument("--image", metavar="<image-id>",
                              action="append", dest="images",
                              help="This image (repeat for more)")
        parser.add_argument("--delete-follows", action="store_true",
                            help="Delete the copy when the source image "
                                 "is deleted")
        parser.add_argument("--name", metavar="<name>",
                            help="Name of the policy")
        return parser

    def take_action(self, parsed_args):
        if parsed_args.tag is not None:
            kind, selector = "tag", parsed_args.tag
        elif parsed_args.images:
            kind, selector = "images", parsed_args.images
        else:
            key, sep, value = parsed_args.property.partition("=")
            if not sep or not key:
                raise osc_exceptions.CommandError(
                    "--property takes <key>=<value>")
            kind, selector = "property", (key, value)
        return _row(self.app.client_manager.gvfs.create_replication(
            parsed_args.site, kind, selector,
            delete_follows=parsed_args.delete_follows,
            name=parsed_args.name))


class ListReplications(command.Lister):
    """List replication policies and how far behind each is."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("--all-projects", action="store_true",
                            help="Of every project (admin)")
        return parser

    def take_action(self, parsed_args):
        shown = ("id", "name", "destination", "selector", "paused",
                 "images_in_sync", "images_pending", "images_failed",
                 "recovery_point_seconds")
        found = self.app.client_manager.gvfs.list_replications(
            all_projects=parsed_args.all_projects)
        return (("ID", "Name", "Destination", "Selector", "Paused",
                 "In Sync", "Pending", "Failed", "Recovery Point (s)"),
                [tuple(SelectorColumn(v[c]) if c == "selector" else v.get(c)
                       for c in shown) for v in found])


class ShowReplication(_PolicyCommand):
    """Show a replication policy, its images and its recovery point."""

    def take_action(self, parsed_args):
        return _row(self.app.client_manager.gvfs.show_replication(
            parsed_args.policy))


class PauseReplication(_PolicyCommand):
    """Stop copying new images until resumed."""

    def take_action(self, parsed_args):
        return _row(self.app.client_manager.gvfs.pause_replication(
            parsed_args.policy, True))


class ResumeReplication(_PolicyCommand):
    """Copy again; images that failed are tried again."""

    def take_action(self, parsed_args):
        return _row(self.app.client_manager.gvfs.pause_replication(
            parsed_args.policy, False))


class DeleteReplication(_NamesPolicy, command.Command):
    """Delete a replication policy; the copies it made stay."""

    def take_action(self, parsed_args):
        self.app.client_manager.gvfs.delete_replication(parsed_args.policy)
