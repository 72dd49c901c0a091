# SPDX-License-Identifier: Apache-2.0
"""Entry points for oslo-config-generator.

One function per program, the namespaces its sample is made from
(``etc/oslo-config-generator``), and :func:`list_opts` with every option
of the project: all are built from the same tuples of option modules, so
an option a program registers cannot be left out of its sample.
"""

import itertools

from gvfs_openstack.conf import cache
from gvfs_openstack.conf import glance
from gvfs_openstack.conf import migration
from gvfs_openstack.conf import mount
from gvfs_openstack.conf import nova
from gvfs_openstack.conf import privileged
from gvfs_openstack.conf import proxy

#: The option modules of each program, by its namespace's short name.
PROGRAMS = {
    "proxy": (proxy, cache, mount),
    "glance": (glance,),
    "nova": (nova,),
    "conductor": (migration,),
    "privileged": (privileged,),
}


def _listed(modules):
    return list(itertools.chain.from_iterable(
        module.list_opts() for module in modules))


def list_proxy_opts():
    """``gvfs-proxy``: both roles, the cache and the FUSE mount."""
    return _listed(PROGRAMS["proxy"])


def list_glance_opts():
    """The glance_store driver."""
    return _listed(PROGRAMS["glance"])


def list_nova_opts():
    """Nova's ``[gvfs]``."""
    return _listed(PROGRAMS["nova"])


def list_conductor_opts():
    """``gvfs-conductor`` and its sites."""
    return _listed(PROGRAMS["conductor"])


def list_privileged_opts():
    """The privsep section of kernel NFS mounts, in glance-api and Nova."""
    return _listed(PROGRAMS["privileged"])


def list_opts():
    """Every option of the project, each module once."""
    modules = dict.fromkeys(itertools.chain.from_iterable(
        PROGRAMS.values()))
    return _listed(modules)
