# SPDX-License-Identifier: Apache-2.0
"""The hook OpenStackClient loads (``openstack.cli.extension`` entry point).

The commands talk to ``gvfs-conductor`` over its message bus, so the
plugin needs the bus's URL: ``--os-gvfs-transport-url`` or
``OS_GVFS_TRANSPORT_URL`` (or ``transport_url`` in the file named by
``--os-gvfs-config-file``).  Whoever holds that URL may start and cancel
migrations, as with any OpenStack RPC service; the conductor itself uses
its own credentials for the sites' Glance.
"""

import os

from osc_lib import utils

DEFAULT_API_VERSION = "1"
API_VERSION_OPTION = "os_gvfs_api_version"
API_NAME = "gvfs"
API_VERSIONS = {"1": "gvfs_openstack.osc.client.ConductorClient"}
# Where the packages, the systemd unit and devstack put the conductor's
# configuration; the CLI reads the message bus from it when it exists.
DEFAULT_CONFIG_FILE = "/etc/gvfs-openstack/gvfs-conductor.conf"


def make_client(instance):
    """The conductor client for the command being run."""
    config = instance.get_configuration()
    client_class = utils.get_client_class(API_NAME, instance._api_version[
        API_NAME], API_VERSIONS)
    return client_class(
        transport_url=config.get("gvfs_transport_url"),
        config_file=config.get("gvfs_config_file"),
        timeout=float(config.get("gvfs_rpc_timeout") or 60))


def build_option_parser(parser):
    parser.add_argument(
        "--os-gvfs-api-version", metavar="<gvfs-api-version>",
        default=utils.env("OS_GVFS_API_VERSION",
                          default=DEFAULT_API_VERSION),
        help="gvfs API version, default=%s (Env: OS_GVFS_API_VERSION)"
             % DEFAULT_API_VERSION)
    parser.add_argument(
        "--os-gvfs-transport-url", metavar="<url>",
        default=utils.env("OS_GVFS_TRANSPORT_URL"),
        help="Message bus of gvfs-conductor, e.g. "
             "rabbit://user:pass@host:5672/ (Env: OS_GVFS_TRANSPORT_URL)")
    parser.add_argument(
        "--os-gvfs-config-file", metavar="<path>",
        default=utils.env("OS_GVFS_CONFIG_FILE") or (
            DEFAULT_CONFIG_FILE if os.path.exists(DEFAULT_CONFIG_FILE)
            else None),
        help="A configuration file with the bus's [DEFAULT] transport_url "
             "and [oslo_messaging_*] options (Env: OS_GVFS_CONFIG_FILE)")
    parser.add_argument(
        "--os-gvfs-rpc-timeout", metavar="<seconds>",
        default=utils.env("OS_GVFS_RPC_TIMEOUT", default="60"),
        help="Seconds to wait for gvfs-conductor to answer "
             "(Env: OS_GVFS_RPC_TIMEOUT)")
    return parser
