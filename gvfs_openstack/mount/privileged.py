# SPDX-License-Identifier: Apache-2.0
"""The root-only steps of a kernel NFS mount, behind oslo.privsep.

Two narrow entry points -- mount an NFSv3 share of a local proxy at a
path under a mount base, and unmount such a path -- each checking its
arguments itself against the daemon's own configuration
(``[gvfs_openstack_privileged] mount_bases``, ``proxy_hosts`` and
``exports``, read from the files the daemon was started with), so the
privileged daemon can be asked for nothing else (no "run any command as
root" helper, no shell, no mount base or share taken from the caller).
"""

import os
import re

from oslo_concurrency import processutils
from oslo_config import cfg
from oslo_privsep import capabilities
from oslo_privsep import priv_context

from gvfs_openstack.conf import privileged as privileged_conf

context = priv_context.PrivContext(
    "gvfs_openstack",
    cfg_section=privileged_conf.GROUP,
    pypath=__name__ + ".context",
    capabilities=[capabilities.CAP_SYS_ADMIN],
)
privileged_conf.register(cfg.CONF)

#: One option of ``mount -o``: a word, or word=value without separators
#: that ``mount`` or a shell would treat specially ...
_OPTION = re.compile(r"^([a-z][a-z0-9_]*)(=[A-Za-z0-9_.:+-]+)?$")
#: ... and one that nfs(5) documents for NFSv3, nothing that changes
#: another mount (``remount``, ``bind``) or loosens security (``suid``).
NFS_OPTIONS = frozenset((
    "vers", "nfsvers", "proto", "port", "mountport", "mountproto",
    "mountvers", "nolock", "lock", "local_lock", "rsize", "wsize", "soft",
    "softerr", "hard", "timeo", "retrans", "nconnect", "actimeo",
    "acregmin", "acregmax", "acdirmin", "acdirmax", "noac", "ac",
    "lookupcache", "cto", "nocto", "ro", "rw", "noatime", "relatime",
    "nodiratime", "nosuid", "nodev", "noexec", "sync", "async", "sec",
    "fsc", "nofsc", "resvport", "noresvport", "namlen", "retry"))
#: ``host:/path`` of the share; the host of a local proxy.
_SHARE = re.compile(r"^[A-Za-z0-9_.:\[\]-]+:/[A-Za-z0-9_./+-]*$")


def _allowed(conf):
    return conf[privileged_conf.GROUP]


def check_mount_args(share, mount_path, options, conf=cfg.CONF):
    """Raise ValueError unless this is a mount the service may ask for.

    What is allowed comes from ``conf``, the daemon's configuration.
    """
    allowed = _allowed(conf)
    if not _SHARE.match(share) or "/../" in share + "/":
        raise ValueError("not an NFS share: %r" % share)
    host, _, export = share.rpartition(":/")
    export = "/" + export
    if host.strip("[]") not in allowed.proxy_hosts:
        raise ValueError("%r is not a proxy host in [%s] proxy_hosts"
                         % (host, privileged_conf.GROUP))
    exports = [e.rstrip("/") or "/" for e in allowed.exports]
    if (export.rstrip("/") or "/") not in exports:
        raise ValueError("export %r is not in [%s] exports" % (
            export, privileged_conf.GROUP))
    _check_path(mount_path, allowed.mount_bases)
    parts = options.split(",")
    for part in parts:
        match = _OPTION.match(part)
        if match is None or match.group(1) not in NFS_OPTIONS:
            raise ValueError("mount option %r is not allowed in %r"
                             % (part, options))
    if "vers=3" not in parts:
        raise ValueError("only NFSv3 mounts of the proxy: %r" % options)


def _check_path(mount_path, bases):
    # The parent only: the mount point itself may hang when stat'ed.
    parent, name = os.path.split(mount_path)
    if name in ("", ".", "..") or os.path.islink(parent) or \
            os.path.realpath(parent) not in [os.path.realpath(b)
                                             for b in bases if b]:
        raise ValueError("%r is not directly inside a directory of [%s] "
                         "mount_bases" % (mount_path, privileged_conf.GROUP))


@context.entrypoint
def mount_nfs(share, mount_path, options):
    check_mount_args(share, mount_path, options)
    processutils.execute("mount", "-t", "nfs", "-o", options, share,
                         mount_path)


@context.entrypoint
def unmount(mount_path):
    """Force and detach: a hung NFS mount would block a plain umount."""
    _check_path(mount_path, _allowed(cfg.CONF).mount_bases)
    processutils.execute("umount", "-f", "-l", mount_path)
