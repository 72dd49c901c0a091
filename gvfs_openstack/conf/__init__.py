"""oslo.config options, one module per area."""

from oslo_config import cfg

from gvfs_openstack.conf import cache
from gvfs_openstack.conf import mount
from gvfs_openstack.conf import proxy

CONF = cfg.CONF
MODULES = (proxy, cache, mount)


def register_opts(conf):
    for module in MODULES:
        module.register_opts(conf)


register_opts(CONF)
