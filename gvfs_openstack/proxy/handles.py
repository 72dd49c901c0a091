# SPDX-License-Identifier: Apache-2.0
"""Which file handles the server proxy lets through, with no I/O.

MNT is refused outside the allowlist (:class:`access.ExportAllowlist`),
but an NFSv3 file handle is a bearer token: the NFS server serves any
handle of any of its exports to whoever presents it.  A client that
forged or kept the handle of a file in another export of the same server
-- or of the parent of an allowed subdirectory, one LOOKUP of ".." away
-- would reach it through the proxy.

So the server proxy admits only handles it has seen come down from an
allowed root: the root handles of MNT replies for allowed paths, and the
handles that LOOKUP, CREATE, MKDIR, SYMLINK, MKNOD and READDIRPLUS hand
out under handles already admitted, by any name but "." and "..".

This module is that bookkeeping: which handles a call names, which a
reply hands out, and the refusal sent for an unknown one.  Finding the
handles again after a restart is :mod:`exportguard`'s job.
"""

import collections

from gvfs_openstack.nfs import codec
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs.xdr import Unpacker

#: Calls whose replies hand out handles.
HANDING_OUT = frozenset({Nfs3Proc.LOOKUP, Nfs3Proc.CREATE, Nfs3Proc.MKDIR,
                         Nfs3Proc.SYMLINK, Nfs3Proc.MKNOD,
                         Nfs3Proc.READDIRPLUS})

#: Names that do not lead further down: "." is the directory itself,
#: ".." of an allowed root is outside it.
NOT_DOWN = frozenset({".", ".."})


class AdmittedHandles:
    """Handles of allowed exports, the least recently used dropped first.

    Roots (from MNT) are few and never dropped.  A dropped handle is not
    refused for good: the guard finds it again by walking the exports.
    """

    def __init__(self, limit):
        self.limit = limit
        self._roots = set()
        self._handles = collections.OrderedDict()

    def __len__(self):
        return len(self._roots) + len(self._handles)

    @property
    def full(self):
        return len(self._handles) >= self.limit

    def admits(self, fh):
        if fh in self._roots:
            return True
        if fh in self._handles:
            self._handles.move_to_end(fh)
            return True
        return False

    def add(self, fh, root=False):
        if root:
            self._roots.add(fh)
            return
        if fh in self._roots:
            return
        self._handles[fh] = None
        self._handles.move_to_end(fh)
        while len(self._handles) > self.limit:
            self._handles.popitem(last=False)


#: The procedures whose arguments carry a file name (``diropargs3``).
NAMING = frozenset({Nfs3Proc.LOOKUP, Nfs3Proc.CREATE, Nfs3Proc.MKDIR,
                    Nfs3Proc.SYMLINK, Nfs3Proc.MKNOD, Nfs3Proc.REMOVE,
                    Nfs3Proc.RMDIR, Nfs3Proc.RENAME, Nfs3Proc.LINK})


def named_handles(proc, args):
    """The handles an NFSv3 call names (ProtocolError if unreadable).

    Every procedure but NULL starts with one; RENAME and LINK name a
    second, further on.  A call that carries a file name is decoded
    whole, so that a name with a NUL or a slash in it is unreadable
    (``nfs3.FILENAME``): the server's file system would see another
    name than every check made here by name, the export guard's
    included (``LOOKUP "..\0"`` is ``..`` at NFS-Ganesha).
    """
    if proc == Nfs3Proc.NULL:
        return ()
    if proc in NAMING and proc not in (Nfs3Proc.RENAME, Nfs3Proc.LINK):
        nfs3.decode_args(proc, args)
    if proc == Nfs3Proc.RENAME:
        parsed = nfs3.decode_args(proc, args)
        return parsed.from_.dir, parsed.to.dir
    if proc == Nfs3Proc.LINK:
        parsed = nfs3.decode_args(proc, args)
        return parsed.file, parsed.link.dir
    return (Unpacker(args).unpack_opaque(const.NFS3_FHSIZE),)


#: One name a reply hands out: ``name`` in directory ``dir`` is ``fh``
#: (with its attributes, or None).
Entry = collections.namedtuple("Entry", "dir name fh attrs")


def entries_handed_out(proc, args, results):
    """The :class:`Entry` of each name a successful reply hands out.

    LOOKUP and READDIRPLUS name what is there, "." and ".." included;
    CREATE, MKDIR, SYMLINK and MKNOD what they made, if the server
    returned its handle (post_op_fh3 may be empty).  ``args`` are the
    call's, ``results`` the reply's result bytes.  An unreadable reply
    hands out nothing: the client gets it unchanged, and a handle it
    then uses is looked for like any unknown one.
    """
    try:
        res = nfs3.decode_res(proc, results)
        if not res.ok:
            return ()
        parsed = nfs3.decode_args(proc, args)
        if proc == Nfs3Proc.READDIRPLUS:
            return tuple(Entry(parsed.dir, e.name, e.name_handle,
                               e.name_attributes)
                         for e in res.body.entries if e.name_handle)
        if proc == Nfs3Proc.LOOKUP:
            return (Entry(parsed.what.dir, parsed.what.name,
                          res.body.object, res.body.obj_attributes),)
        if not res.body.obj:
            return ()
        return (Entry(parsed.where.dir, parsed.where.name, res.body.obj,
                      res.body.obj_attributes),)
    except ProtocolError:
        return ()


def handed_out(proc, args, results):
    """The handles a successful reply to ``proc`` hands out below its dir."""
    return tuple(e.fh for e in entries_handed_out(proc, args, results)
                 if e.name not in NOT_DOWN)


_FAILURE_BODIES = {
    nfs3.AttrBody.CODEC: nfs3.AttrBody(None),
    nfs3.WccBody.CODEC: nfs3.WccBody(nfs3.WccData()),
    nfs3.RenameBody.CODEC: nfs3.RenameBody(nfs3.WccData(), nfs3.WccData()),
    nfs3.LinkBody.CODEC: nfs3.LinkBody(None, nfs3.WccData()),
    codec.VOID: None,
}


def refusal(proc, status=const.NfsStat.NFS3ERR_STALE):
    """The result bytes refusing an NFSv3 call: ``status``, no attributes.

    NFS3ERR_STALE is what an NFS server answers for a handle of nothing
    it exports; clients give up on the handle (and look the path up
    again) instead of retrying it.
    """
    fail = nfs3.PROCEDURES[proc].res.fail_codec
    return nfs3.encode_res(proc, nfs3.Result(status, _FAILURE_BODIES[fail]))
