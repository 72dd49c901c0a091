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
import stat

from oslo_concurrency import processutils
from oslo_config import cfg
from oslo_privsep import capabilities
from oslo_privsep import priv_context

from gvfs_openstack.conf import privileged as privileged_conf
from gvfs_openstack.mount import mountinfo

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


def _allowed(conf):
    # Registered here, not at import: the daemon imports this module
    # before it has a configuration, and registering twice is a no-op.
    privileged_conf.register(conf)
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
    values = {}
    for part in parts:
        match = _OPTION.match(part)
        if match is None or match.group(1) not in NFS_OPTIONS:
            raise ValueError("mount option %r is not allowed in %r"
                             % (part, options))
        values.setdefault(match.group(1), []).append(
            (match.group(2) or "=")[1:])
    if "vers=3" not in parts:
        raise ValueError("only NFSv3 mounts of the proxy: %r" % options)
    for name in REQUIRED_OPTIONS:
        if name not in values:
            raise ValueError("mount option %s is required: %r"
                             % (name, options))
    ports = {str(p) for p in allowed.proxy_ports}
    for name in ("port", "mountport"):
        # Named once each: the kernel takes the last of a repeated one.
        if values.get(name, [None])[-1:] != values.get(name) or \
                values[name][0] not in ports:
            raise ValueError("%s must be one of [%s] proxy_ports %s: %r"
                             % (name, privileged_conf.GROUP,
                                sorted(ports), options))
    _check_config_files(conf)


#: What a mount of the proxy must say: files on it never raise privileges.
REQUIRED_OPTIONS = ("nosuid", "nodev")


def _check_config_files(conf):
    """The files the daemon read its limits from must be root's alone.

    The service starts the daemon with a ``--config-file`` of its
    choosing; a file it (or anyone but root) can write would let it
    widen the limits above.
    """
    for path in list(conf.config_file or ()) + _files_in(conf.config_dir):
        info = os.stat(path)
        if info.st_uid != 0 or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise ValueError("%s, which the privileged daemon read its "
                             "limits from, is not owned and only "
                             "writable by root" % path)


def _files_in(config_dir):
    if not config_dir:
        return []
    return [os.path.join(config_dir, name)
            for name in sorted(os.listdir(config_dir))
            if name.endswith(".conf")] + [config_dir]


def _check_path(mount_path, bases):
    """Directly inside a base, whose path may hold no link.

    Only the parent is looked at: the mount point itself may hang when
    stat'ed (:func:`_check_mount_point` looks at it before a mount, and
    an unmount asks mountinfo).
    """
    parent, name = os.path.split(mount_path)
    if name in ("", ".", "..") or os.path.islink(parent) or \
            os.path.realpath(parent) not in [os.path.realpath(b)
                                             for b in bases if b]:
        raise ValueError("%r is not directly inside a directory of [%s] "
                         "mount_bases" % (mount_path, privileged_conf.GROUP))


def _check_mount_point(mount_path):
    """An existing directory, not a link, and nothing mounted on it yet.

    ``lstat`` of a path that is not a mount point cannot hang.
    """
    if mountinfo.fields_of(mount_path) is not None:
        raise ValueError("%r is mounted already" % mount_path)
    try:
        info = os.lstat(mount_path)
    except FileNotFoundError:
        raise ValueError("%r does not exist" % mount_path) from None
    if not stat.S_ISDIR(info.st_mode):
        raise ValueError("%r is not a directory (a link is refused)"
                         % mount_path)


@context.entrypoint
def mount_nfs(share, mount_path, options):
    check_mount_args(share, mount_path, options)
    _check_mount_point(mount_path)
    before = mountinfo.mounts_of(share)
    processutils.execute("mount", "-t", "nfs", "-o", options, share,
                         mount_path)
    if mountinfo.fields_of(mount_path) is None:
        # The directory was swapped for a link between the check and
        # the mount: take away what landed elsewhere.
        for _, path in mountinfo.mounts_of(share) - before:
            processutils.execute("umount", "-l", path,
                                 check_exit_code=False)
        raise ValueError("%r changed while it was mounted" % mount_path)


@context.entrypoint
def unmount(mount_path):
    """Force and detach: a hung NFS mount would block a plain umount.

    Only a mount point that ``/proc/self/mountinfo`` lists at exactly
    this path: umount resolves links, and a link in the base would
    otherwise unmount anything on the host.
    """
    _check_path(mount_path, _allowed(cfg.CONF).mount_bases)
    if mountinfo.fields_of(mount_path) is None:
        raise ValueError("nothing is mounted at %r" % mount_path)
    processutils.execute("umount", "-f", "-l", mount_path)
