# SPDX-License-Identifier: Apache-2.0
"""The root-only steps of a kernel NFS mount, behind oslo.privsep.

Two narrow entry points -- mount an NFSv3 share of a local proxy at a
path under the mount base, and unmount such a path -- each checking its
arguments itself, so the privileged daemon can be asked for nothing else
(no "run any command as root" helper, no shell).
"""

import os
import re

from oslo_concurrency import processutils
from oslo_privsep import capabilities
from oslo_privsep import priv_context

from gvfs_openstack.conf import privileged as privileged_conf

context = priv_context.PrivContext(
    "gvfs_openstack",
    cfg_section=privileged_conf.GROUP,
    pypath=__name__ + ".context",
    capabilities=[capabilities.CAP_SYS_ADMIN],
)

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


def check_mount_args(share, mount_path, options, base):
    """Raise ValueError unless this is a mount the service may ask for."""
    if not _SHARE.match(share) or "/../" in share + "/":
        raise ValueError("not an NFS share: %r" % share)
    _check_path(mount_path, base)
    parts = options.split(",")
    for part in parts:
        match = _OPTION.match(part)
        if match is None or match.group(1) not in NFS_OPTIONS:
            raise ValueError("mount option %r is not allowed in %r"
                             % (part, options))
    if "vers=3" not in parts:
        raise ValueError("only NFSv3 mounts of the proxy: %r" % options)


def _check_path(mount_path, base):
    # The parent only: the mount point itself may hang when stat'ed.
    parent, name = os.path.split(mount_path)
    if os.path.realpath(parent) != os.path.realpath(base) or \
            name in ("", ".", "..") or os.path.islink(parent):
        raise ValueError("%r is not directly under the mount base %r"
                         % (mount_path, base))


@context.entrypoint
def mount_nfs(share, mount_path, options, base):
    check_mount_args(share, mount_path, options, base)
    processutils.execute("mount", "-t", "nfs", "-o", options, share,
                         mount_path)


@context.entrypoint
def unmount(mount_path, base):
    """Force and detach: a hung NFS mount would block a plain umount."""
    _check_path(mount_path, base)
    processutils.execute("umount", "-f", "-l", mount_path)
