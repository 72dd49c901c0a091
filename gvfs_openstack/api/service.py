# SPDX-License-Identifier: Apache-2.0
"""gvfs-api's configuration, loaded once per process.

Shared by ``gvfs-api`` (:mod:`gvfs_openstack.cmd.api`) and the WSGI
module a WSGI server imports (:mod:`gvfs_openstack.wsgi.api`).
"""

import os

from oslo_config import cfg
from oslo_log import log as logging

from gvfs_openstack.api import app
from gvfs_openstack import conf as conf_pkg
from gvfs_openstack.conf import api as api_conf
from gvfs_openstack import version

#: Where the packages, the systemd unit and devstack put the configuration.
DEFAULT_CONFIG_FILE = "/etc/gvfs-openstack/gvfs-api.conf"


def load(argv, prog="gvfs-api", default_config_files=None):
    """Parse ``argv`` into the global configuration; set up logging."""
    conf = cfg.CONF  # oslo.messaging 18 wants the global configuration.
    logging.register_options(conf)
    api_conf.register_opts(conf)
    conf(argv, project=conf_pkg.PROJECT, prog=prog,
         default_config_files=default_config_files,
         version=version.string())
    logging.setup(conf, prog)
    return conf


def wsgi_application():
    """The application of a WSGI server's process.

    ``GVFS_API_CONFIG_FILE`` names the configuration (default
    :data:`DEFAULT_CONFIG_FILE`).
    """
    path = os.environ.get("GVFS_API_CONFIG_FILE", DEFAULT_CONFIG_FILE)
    conf = load([], default_config_files=[path])
    return app.build(conf)
