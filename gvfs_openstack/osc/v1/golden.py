# SPDX-License-Identifier: Apache-2.0
"""``openstack gvfs golden reference list``: what holds a golden image."""

from osc_lib.command import command


class ListGoldenReferences(command.Lister):
    """List the instance disks whose backing file is a golden image.

    Glance refuses to delete an image in the gvfs store while any holds
    it; this says which.  Compute hosts are shown to admins.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument("image", metavar="<image>",
                            help="Golden image (name or ID)")
        return parser

    def take_action(self, parsed_args):
        found = self.app.client_manager.gvfs.golden_references(
            parsed_args.image)
        with_hosts = any("host" in ref for ref in found)
        headers = ["Instance ID", "Disk"] + (["Host"] if with_hosts else [])
        fields = ["instance_id", "disk"] + (["host"] if with_hosts else [])
        return headers, [tuple(ref.get(f) for f in fields) for ref in found]
