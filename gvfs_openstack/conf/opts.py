"""Entry point for oslo-config-generator: every option of the project."""

from gvfs_openstack.conf import proxy

_MODULES = (proxy,)


def list_opts():
    opts = []
    for module in _MODULES:
        opts.extend(module.list_opts())
    return opts
