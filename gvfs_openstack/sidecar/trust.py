# SPDX-License-Identifier: Apache-2.0
"""Whose sidecars and boot profiles a reader believes: the file's owners'.

A sidecar makes proxies serve zeros they never read, and a boot profile
decides what a proxy or a mount fetches first and keeps in its cache:
believed from anyone, it would let whoever may create a file beside an
image (in a shared, sticky directory, or on an all-squash export where
every writer is the same account as the images) change what guests
read or fill the caches with what they choose, by planting
``.gvfs-meta.<name>`` before the real one is made.  So both must belong
to root, to the described file's owner or to the owner of their
directory -- accounts that could change the file itself -- and others
may not write them.  (Their group may: on an export the server proxy
squashes to the file account, files are made in that account's group,
some clients' with group write.)  And both are bounded in size before a
byte is read: a reader parses what it reads.

The checks take NFS attributes (``type``, ``mode``, ``uid``, ``size``)
and do no I/O: the caching proxy and the FUSE mount ask for the
attributes each their own way.
"""

from gvfs_openstack.nfs import const
from gvfs_openstack.sidecar import format as meta_format


def check_file(attrs, max_bytes):
    """SidecarError unless a small regular file others may not write.

    Small: at most ``max_bytes``, known from ``attrs`` before reading.
    """
    if attrs.type != const.FileType.NF3REG or attrs.size > max_bytes:
        raise meta_format.SidecarError(
            "not a regular file of at most %d bytes" % max_bytes)
    if attrs.mode & 0o002:
        raise meta_format.SidecarError(
            "writable by others (mode %04o)" % (attrs.mode & 0o7777))


def needs_directory(attrs, described_uid):
    """Whether only the directory's owner could vouch for ``attrs``.

    Root's and the described file's owner's are believed without asking
    for the directory's attributes.
    """
    return attrs.uid not in (0, described_uid)


def check_owner(attrs, described_uid, directory_uid):
    """SidecarError unless root, the file's or the directory's owner.

    ``described_uid`` owns the file described, ``directory_uid`` their
    directory.
    """
    if attrs.uid not in (0, described_uid, directory_uid):
        raise meta_format.SidecarError(
            "owned by uid %d: not root, nor the owner of the file (%d) "
            "or of its directory (%d)"
            % (attrs.uid, described_uid, directory_uid))
