# SPDX-License-Identifier: Apache-2.0
"""The hook OpenStackClient loads (``openstack.cli.extension`` entry point).

The commands talk to gvfs-api, found in the Keystone catalog (service
type ``gvfs``) with the user's credentials, as every service's commands
do; ``--os-gvfs-endpoint`` overrides the catalog.
"""

from osc_lib import utils

DEFAULT_API_VERSION = "1"
API_VERSION_OPTION = "os_gvfs_api_version"
API_NAME = "gvfs"
API_VERSIONS = {"1": "gvfs_openstack.osc.client.ApiClient"}


def make_client(instance):
    """The gvfs-api client for the command being run."""
    client_class = utils.get_client_class(API_NAME, instance._api_version[
        API_NAME], API_VERSIONS)
    config = instance.get_configuration()
    return client_class(
        instance.session, region_name=instance.region_name,
        interface=instance.interface,
        endpoint_override=config.get("gvfs_endpoint"),
        timeout=float(config.get("gvfs_timeout") or 60))


def build_option_parser(parser):
    parser.add_argument(
        "--os-gvfs-api-version", metavar="<gvfs-api-version>",
        default=utils.env("OS_GVFS_API_VERSION",
                          default=DEFAULT_API_VERSION),
        help="gvfs API version, default=%s (Env: OS_GVFS_API_VERSION)"
             % DEFAULT_API_VERSION)
    parser.add_argument(
        "--os-gvfs-endpoint", metavar="<url>",
        default=utils.env("OS_GVFS_ENDPOINT"),
        help="gvfs-api's URL, instead of the catalog's "
             "(Env: OS_GVFS_ENDPOINT)")
    parser.add_argument(
        "--os-gvfs-timeout", metavar="<seconds>",
        default=utils.env("OS_GVFS_TIMEOUT", default="60"),
        help="Seconds to wait for gvfs-api to answer "
             "(Env: OS_GVFS_TIMEOUT)")
    return parser
