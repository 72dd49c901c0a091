# SPDX-License-Identifier: Apache-2.0
"""The post-operation attributes of files that an NFSv3 result carries.

Write-back shows a file with dirty bytes with the size and times those
bytes imply.  A client learns a file's attributes from any reply that
carries them, not only from GETATTR: it caches what ACCESS, LINK, CREATE
or FSSTAT said as readily, so every one of those replies must show the
file as GETATTR does, or the file seems to shrink and grow again.  This
module knows where each procedure's successful result keeps which file's
attributes, so that write-back can rewrite them all in one place.

READ is left out: a READ of a dirty file is answered by write-back with
its own attributes; one that reaches the server anyway carries the
server's bytes too, which no attribute rewrite would make right.
READLINK, MKDIR, SYMLINK and MKNOD name objects that are never dirty.
"""

import dataclasses

from gvfs_openstack.nfs.const import Nfs3Proc as P


def _one(handle_of, field):
    """A rewriter of ``body.<field>``, the attributes of one handle."""
    def rewrite(args, body, change):
        fh = handle_of(args, body)
        old = getattr(body, field)
        if not fh or old is None:
            return body
        new = change(bytes(fh), old)
        return body if new == old else dataclasses.replace(
            body, **{field: new})
    return rewrite


def _wcc(handle_of, field):
    """A rewriter of ``body.<field>.after`` (wcc_data of one handle).

    Only the post-operation attributes: the pre-operation ones say what
    the file was before the call, which the dirty bytes do not change.
    """
    def rewrite(args, body, change):
        fh = handle_of(args, body)
        wcc = getattr(body, field)
        if not fh or wcc is None or wcc.after is None:
            return body
        new = change(bytes(fh), wcc.after)
        return body if new == wcc.after else dataclasses.replace(
            body, **{field: dataclasses.replace(wcc, after=new)})
    return rewrite


def _entries(args, body, change):
    entries = tuple(
        dataclasses.replace(e, name_attributes=change(
            bytes(e.name_handle), e.name_attributes))
        if e.name_handle and e.name_attributes is not None else e
        for e in body.entries)
    return body if entries == body.entries else dataclasses.replace(
        body, entries=entries)


def _arg(name):
    return lambda args, body: getattr(args, name)


def _res(name):
    return lambda args, body: getattr(body, name)


_REWRITERS = {
    P.GETATTR: _one(_arg("object"), "obj_attributes"),
    P.SETATTR: _wcc(_arg("object"), "obj_wcc"),
    P.LOOKUP: _one(_res("object"), "obj_attributes"),
    P.ACCESS: _one(_arg("object"), "obj_attributes"),
    P.WRITE: _wcc(_arg("file"), "file_wcc"),
    P.CREATE: _one(_res("obj"), "obj_attributes"),
    P.LINK: _one(_arg("file"), "file_attributes"),
    P.READDIRPLUS: _entries,
    P.FSSTAT: _one(_arg("fsroot"), "obj_attributes"),
    P.FSINFO: _one(_arg("fsroot"), "obj_attributes"),
    P.PATHCONF: _one(_arg("fsroot"), "obj_attributes"),
    P.COMMIT: _wcc(_arg("file"), "file_wcc"),
}

#: Procedures whose successful results carry some file's attributes.
CARRYING = frozenset(_REWRITERS)


def rewrite(proc, args, body, change):
    """``body`` with every file's attributes passed through ``change``.

    ``body`` is the successful result of ``proc`` called with ``args``
    (both decoded); ``change(fh, fattr)`` returns the attributes to show
    for ``fh``.  The very same ``body`` comes back if nothing changed.
    """
    rewriter = _REWRITERS.get(proc)
    return body if rewriter is None else rewriter(args, body, change)
