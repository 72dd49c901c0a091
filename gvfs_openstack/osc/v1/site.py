# SPDX-License-Identifier: Apache-2.0
"""``openstack gvfs site list`` and ``openstack gvfs site show``."""

from osc_lib.command import command

_COLUMNS = ("name", "local", "destination", "glance_region")


class ListSites(command.Lister):
    """List the sites of gvfs-conductor, and which you can migrate to."""

    def take_action(self, parsed_args):
        return (("Name", "Local", "Destination", "Glance Region"),
                [tuple(site.get(c) for c in _COLUMNS)
                 for site in self.app.client_manager.gvfs.list_sites()])


class ShowSite(command.ShowOne):
    """Show a site."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("site", metavar="<site>", help="Site name")
        return parser

    def take_action(self, parsed_args):
        site = self.app.client_manager.gvfs.show_site(parsed_args.site)
        return _COLUMNS, tuple(site.get(c) for c in _COLUMNS)
