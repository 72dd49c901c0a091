"""oslo.config options, one module per area."""

from oslo_config import cfg

from gvfs_openstack.conf import proxy

CONF = cfg.CONF

proxy.register_opts(CONF)
