"""Entry point for oslo-config-generator: every option of the project."""

from gvfs_openstack import conf


def list_opts():
    opts = []
    for module in conf.MODULES:
        opts.extend(module.list_opts())
    return opts
