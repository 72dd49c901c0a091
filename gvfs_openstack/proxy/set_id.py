# SPDX-License-Identifier: Apache-2.0
"""The server proxy clears set-user-ID and set-group-ID from new modes.

Behind the server proxy every caller is the one file account: a client
that may write the export may also ``chmod u+s`` a copy of a binary
there, and a set-user-ID file owned by the file account runs as that
account for whoever on the DTN executes it -- a compute node (or any
local account) would gain the DTN account's rights, not only the
files'.  Nothing the design stores needs either bit (images, sidecars,
profiles and references are plain files; with every caller squashed
the set-group-ID bit of a directory inherits the one group there is).

So the bits are cleared from the mode of every sattr3 a client sends
(SETATTR, CREATE UNCHECKED/GUARDED, MKDIR, SYMLINK, MKNOD; an EXCLUSIVE
CREATE carries no mode, and the SETATTR that follows it is cleared
here), and the call goes on: silently, as a ``nosuid`` file system
ignores the bits and as Linux drops set-group-ID from a ``chmod`` by a
caller outside the file's group.  Refusing the call instead would break
``cp -a``, ``rsync -a`` and ``tar -p`` of a tree holding such a file,
whose every other attribute is lawful; the reply's post-operation
attributes tell the client the mode it got.  The sticky bit stays: it
only restricts who may remove a directory's entries.
"""

import dataclasses
import stat

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import nfs3

#: The bits a client may not set through the server proxy.
CLEARED = stat.S_ISUID | stat.S_ISGID

#: The NFSv3 procedures whose arguments carry a sattr3.
CARRYING_MODE = frozenset({Nfs3Proc.SETATTR, Nfs3Proc.CREATE,
                           Nfs3Proc.MKDIR, Nfs3Proc.SYMLINK,
                           Nfs3Proc.MKNOD})


def cleared(proc, args):
    """``args`` of NFSv3 ``proc`` without set-ID bits; None if none is set.

    Returns ``(encoded_args, mode_asked)``: the caller logs what it
    changed.  Raises ProtocolError for arguments
    that cannot be decoded (the caller answers GARBAGE_ARGS, as the NFS
    server would).
    """
    if proc not in CARRYING_MODE:
        return None
    decoded = nfs3.decode_args(proc, args)
    attributes = _sattr(proc, decoded)
    if attributes is None or attributes.mode is None or \
            not attributes.mode & CLEARED:
        return None
    lawful = dataclasses.replace(attributes,
                                 mode=attributes.mode & ~CLEARED)
    return (nfs3.encode_args(proc, _with_sattr(proc, decoded, lawful)),
            attributes.mode)


def _sattr(proc, args):
    """The sattr3 in decoded ``args``, None if the call carries none."""
    if proc == Nfs3Proc.SETATTR:
        return args.new_attributes
    if proc == Nfs3Proc.CREATE:
        return args.how.attributes      # None for EXCLUSIVE
    if proc == Nfs3Proc.MKDIR:
        return args.attributes
    if proc == Nfs3Proc.SYMLINK:
        return args.symlink_attributes
    body = args.what.body               # MKNOD
    if isinstance(body, nfs3.DeviceData):
        return body.dev_attributes
    return body if isinstance(body, nfs3.Sattr) else None


def _with_sattr(proc, args, attributes):
    """Decoded ``args`` with ``attributes`` as their sattr3."""
    replace = dataclasses.replace
    if proc == Nfs3Proc.SETATTR:
        return replace(args, new_attributes=attributes)
    if proc == Nfs3Proc.CREATE:
        return replace(args, how=replace(args.how, attributes=attributes))
    if proc == Nfs3Proc.MKDIR:
        return replace(args, attributes=attributes)
    if proc == Nfs3Proc.SYMLINK:
        return replace(args, symlink_attributes=attributes)
    what = args.what
    if what.type in (const.FileType.NF3CHR, const.FileType.NF3BLK):
        body = replace(what.body, dev_attributes=attributes)
    else:
        body = attributes
    return replace(args, what=replace(what, body=body))
