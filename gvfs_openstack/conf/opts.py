# SPDX-License-Identifier: Apache-2.0
"""Entry points for oslo-config-generator, and each program's options.

One function per program, the namespaces its sample is made from
(``etc/oslo-config-generator``), and :func:`list_opts` with every option
of the project: all are built from :data:`PROGRAMS`, the one list a
program also registers from (:func:`modules`), so an option a program
registers cannot be left out of its sample.
"""

import importlib
import itertools

#: The option modules (of this package) of each program, by the short
#: name of its namespace.
PROGRAMS = {
    "proxy": ("proxy", "cache", "mount"),
    "glance": ("glance",),
    "nova": ("nova",),
    "conductor": ("migration",),
    "privileged": ("privileged",),
    "api": ("api",),
    # gvfs-proxy's, gvfs-conductor's and gvfs-api's: shown once.
    "metrics": ("metrics",),
}


def modules(program):
    """The option modules of ``program``, imported now.

    Only these: a program does not load another's options, some of which
    pull in large libraries (oslo.privsep, keystoneauth's plugins) that
    would cost ``gvfs-proxy`` memory and start-up time.
    """
    return [importlib.import_module("gvfs_openstack.conf." + name)
            for name in PROGRAMS[program]]


def _listed(*programs):
    names = dict.fromkeys(itertools.chain.from_iterable(
        PROGRAMS[program] for program in programs))
    return list(itertools.chain.from_iterable(
        importlib.import_module("gvfs_openstack.conf." + name).list_opts()
        for name in names))


def list_proxy_opts():
    """``gvfs-proxy``: both roles, the cache and the FUSE mount."""
    return _listed("proxy")


def list_glance_opts():
    """The glance_store driver."""
    return _listed("glance")


def list_nova_opts():
    """Nova's ``[gvfs]``."""
    return _listed("nova")


def list_conductor_opts():
    """``gvfs-conductor`` and its sites."""
    return _listed("conductor")


def list_privileged_opts():
    """The privsep section of kernel NFS mounts, in glance-api and Nova."""
    return _listed("privileged")


def list_metrics_opts():
    """``[metrics]`` of ``gvfs-proxy``, ``gvfs-conductor``, ``gvfs-api``."""
    return _listed("metrics")


def list_api_opts():
    """``gvfs-api``."""
    return _listed("api")


def list_opts():
    """Every option of the project, each module once."""
    return _listed(*PROGRAMS)
