# SPDX-License-Identifier: Apache-2.0
"""Files unlinked (or renamed over) while open, kept until their last close.

POSIX keeps an unlinked file readable and writable through the descriptors
open on it; NFS has no open state, so a REMOVE makes the file's handle
stale at once (qemu, for one, then fails with ESTALE).  The kernel NFS
client hides the file under a ``.nfsXXXX`` name instead ("silly rename")
and removes it at the last close.  The mount does the same, with one
difference: the hidden files go to one directory at the export's root,
``.gvfs-unlinked``, named after the mount (host, mount point and export),
so that the next start of the same mount finds and removes what a crash
left behind there without walking the export, and never touches the
files another host's mount keeps open.  The directory does not appear in
listings through the mount.
"""

import errno
import hashlib
import os
import secrets
import socket

from oslo_log import log as logging

from gvfs_openstack.fuse import session as nfs_session

LOG = logging.getLogger(__name__)

#: The directory at the export's root where unlinked open files wait.
DIRECTORY = ".gvfs-unlinked"

#: Sticky and open to all, as /tmp: a mount acting as its callers
#: (``[mount] identity = caller``) hides each user's files as that user,
#: and no user may remove another's.
_MODE = 0o1777


def mount_id(mountpoint, export, host=None):
    """A name for one mount that survives its restarts."""
    key = "%s\0%s\0%s" % (host or socket.gethostname(),
                          os.path.realpath(mountpoint), export)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


class UnlinkedFiles:
    """Hides files still open when unlinked, and removes them later."""

    def __init__(self, session, mount_id):
        self.session = session
        self.prefix = mount_id + "-"
        self._directory = None

    async def _hidden_directory(self):
        if self._directory is None:
            root = self.session.root
            try:
                self._directory = await self.session.call(
                    "mkdir", root, DIRECTORY, _MODE, idempotent=False)
            except nfs_session.OperationFailed as e:
                if e.errno != errno.EEXIST:
                    raise
                self._directory = (await self.session.call(
                    "lookup", root, DIRECTORY)).object
        return self._directory

    async def hide(self, dir_fh, name):
        """Move ``name`` out of sight; returns where it went."""
        hidden = (await self._hidden_directory(),
                  self.prefix + secrets.token_hex(8))
        await self.session.call("rename", dir_fh, name, *hidden,
                                idempotent=False)
        return hidden

    async def drop(self, hidden):
        """Remove a hidden file (its last descriptor was closed)."""
        try:
            await self.session.call("remove", *hidden, idempotent=False)
        except nfs_session.OperationFailed as e:
            LOG.warning("cannot remove %s/%s, unlinked while open: %s",
                        DIRECTORY, hidden[1], e)

    async def clean_up(self):
        """Remove what an earlier run of this mount left hidden."""
        try:
            directory = (await self.session.call(
                "lookup", self.session.root, DIRECTORY)).object
        except nfs_session.OperationFailed:
            return 0    # Never used, or not readable: nothing of ours.
        left = [entry.name for entry in await self.session.call(
            "readdirplus", directory) if entry.name.startswith(self.prefix)]
        for name in left:
            await self.drop((directory, name))
        if left:
            LOG.info("removed %d files unlinked while open before the "
                     "mount last stopped", len(left))
        return len(left)
