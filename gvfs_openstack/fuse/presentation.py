# SPDX-License-Identifier: Apache-2.0
"""Whose the mount's files look like on this node.

With ``[mount] identity = daemon`` every call through the mount reaches
the NFS server as the mount's own account, which the server proxy maps to
the export's file account: whoever may open a file on the mount has the
file account's rights to it.  The kernel decides who may open it, from
the owner, group and mode the mount presents (``default_permissions``).
Presented as the NFS server has them, those are the DTN's numbers, which
on a node may name any local account or none: a 0644 image is readable
by every local account, a 0600 one by whoever holds the file account's
uid here and not by the glance, nova or qemu accounts that need it.

So the mount can present every file as owned by its own account and a
local group (the one glance, nova and qemu share), with the group given
the owner's permission bits and others none.  Then exactly root, the
mount's account and that group's members use the mount, with the rights
the file account has on the DTN.
"""

import dataclasses
import grp
import os
import stat

#: Permission bits of "others", cleared when a group is presented.
_OTHERS = stat.S_IRWXO
_GROUP = stat.S_IRWXG


class PresentationError(ValueError):
    """A ``[mount] group`` this mount cannot show its files to."""


@dataclasses.dataclass(frozen=True)
class Presentation:
    """Present files as ``uid:gid``; None: as the NFS server has them."""

    uid: int = None
    gid: int = None

    def apply(self, fields):
        """Change the ``st_*`` ``fields`` of one file in place."""
        if self.gid is None:
            return fields
        mode = fields["st_mode"]
        owner_bits = mode & stat.S_IRWXU
        fields["st_mode"] = (mode & ~(_GROUP | _OTHERS)) | (owner_bits >> 3)
        fields["st_uid"] = self.uid
        fields["st_gid"] = self.gid
        return fields


def for_group(group, identity="daemon"):
    """The :class:`Presentation` of ``[mount] group`` for this process.

    ``group``: a group name or number; None or empty: none.  ``identity``:
    ``[mount] identity``; a mount acting as its callers must show the
    files' own owners, for the kernel to check.
    """
    if not group:
        return Presentation()
    if identity == "caller":
        raise PresentationError("[mount] group is for identity = daemon: a "
                                "mount acting as its callers shows the "
                                "files' own owners")
    try:
        gid = int(group) if group.isdigit() else grp.getgrnam(group).gr_gid
    except KeyError:
        raise PresentationError("[mount] group %s: no such group on this "
                                "node" % group) from None
    return Presentation(uid=os.geteuid(), gid=gid)
