# SPDX-License-Identifier: Apache-2.0
"""Golden images a server proxy's clients may read but never change.

A compute node needs the golden images read-only: a node that could
rewrite one (or its sidecar) could change what every other node's guests
boot, and swap it for a qcow2 backed by a host file.  Glance's node needs
them writable.  So a DTN runs a server proxy for compute nodes whose
``[server] read_only_dirs`` lists the image directories; calls through
it that would change, remove, rename, replace or create a file there get
NFS3ERR_ROFS.  Two kinds of file stay writable in those directories,
because compute nodes make them: boot profiles
(``.gvfs-meta.<name>.profile`` and the temporary names they are written
under), and anything in a subdirectory (golden references live in
``.gvfs-refs/``, the one directory a compute node may make or remove
there).

Protecting the files is not enough: whoever may rename, remove or replace
a directory on the way down to a read-only directory (``images`` in the
export's root, or the directory itself) puts a directory of its own in
its place, and every node and Glance then read its files as the golden
images.  So every name on that way is fixed too -- no RENAME from or to
it, no REMOVE, RMDIR, LINK, SYMLINK, MKDIR, MKNOD or CREATE of it in its
parent -- and so are the read-only directories' and their parents' own
attributes (a SETATTR ``mode=000`` would hide every image).  Giving the
images an export of their own instead would leave this to each
deployment's configuration; the check holds whatever is exported.

This is bookkeeping without I/O, beside :mod:`handles`: which directory
handles are those directories (learned from MNT and LOOKUP replies on
the way down from an export's root, and from the export guard's walk),
which file handles are files in them, and whether a call would change
one.  A proxy does not hold every handle from its start: until the
export guard has walked the exports once, a call that changes a file
waits for that walk (:meth:`ReadOnlyDirs.needs_walk`).
"""

import posixpath

from gvfs_openstack.images import golden
from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.proxy import handles
from gvfs_openstack.sidecar import profile as profile_format

#: Calls that change a file named by its handle (the first argument).
_CHANGING_A_FILE = frozenset({Nfs3Proc.WRITE, Nfs3Proc.SETATTR})

#: Calls that make or remove a name in a directory (their first argument).
_NAMING = frozenset({Nfs3Proc.CREATE, Nfs3Proc.SYMLINK, Nfs3Proc.MKNOD,
                     Nfs3Proc.REMOVE, Nfs3Proc.MKDIR, Nfs3Proc.RMDIR})

#: The field of each call's arguments that names its file or directory.
_FIRST = {Nfs3Proc.WRITE: "file", Nfs3Proc.SETATTR: "object",
          Nfs3Proc.CREATE: "where", Nfs3Proc.SYMLINK: "where",
          Nfs3Proc.MKNOD: "where", Nfs3Proc.REMOVE: "object",
          Nfs3Proc.MKDIR: "where", Nfs3Proc.RMDIR: "object"}

#: Directories compute nodes make and remove in a read-only directory:
#: the golden references' (:func:`gvfs_openstack.images.golden.hold`
#: makes it, its ``_prune`` removes it once empty).
_DIRS_MADE_THERE = frozenset({golden.REFS_DIR})

#: Calls :meth:`ReadOnlyDirs.refuses` looks at.
CHECKED = _CHANGING_A_FILE | _NAMING | {Nfs3Proc.RENAME, Nfs3Proc.LINK}


def _first(proc, args):
    return getattr(nfs3.decode_args(proc, args), _FIRST[proc])


def names_a_profile(name):
    """Whether ``name`` is a boot profile, or a profile being written.

    Compute nodes record boot profiles beside the images: written under
    ``<profile>.<random>.tmp`` and renamed over ``<profile>``.
    """
    if name.endswith(profile_format.SUFFIX):
        stem = name
    elif name.endswith(".tmp"):
        stem = name[:-len(".tmp")].rpartition(".")[0]
    else:
        return False
    return stem.startswith(profile_format.meta_format.PREFIX) and \
        stem.endswith(profile_format.SUFFIX) and "/" not in stem


class ReadOnlyDirs:
    """The handles of the read-only directories and of the files in them.

    ``paths`` are absolute paths on the NFS server, each inside an export
    the proxy allows.  File handles are kept for as long as the proxy
    runs: they are as many as the files ever seen in those directories.
    """

    def __init__(self, paths):
        self.paths = frozenset(posixpath.normpath(p) for p in paths)
        #: Path of a directory above one of them -> the names in it that
        #: lead down to one.
        self._leading = {}
        for path in self.paths:
            while path not in ("/", ""):
                parent, name = posixpath.split(path)
                self._leading.setdefault(parent, set()).add(name)
                path = parent
        #: Handle -> path of a directory on the way down to one of them.
        self._on_the_way = {}
        self._dirs = set()
        self._files = set()
        #: Whether the export guard has walked the exports since start.
        self.walked = False

    def __bool__(self):
        return bool(self.paths)

    # --- learning ------------------------------------------------------------

    def learn_root(self, path, fh):
        """An export's root handle, from a MNT reply or the guard's walk.

        A client may mount a subdirectory, or a file, below an export:
        the read-only directory itself, or an image in it, too.
        """
        path = posixpath.normpath(path)
        directory, name = posixpath.split(path)
        if directory in self.paths and not names_a_profile(name):
            self._files.add(bytes(fh))
        self._place(bytes(fh), path)

    def _place(self, fh, path):
        # Both, for a read-only directory inside another.
        if path in self.paths:
            self._dirs.add(fh)
        if path in self._leading:
            self._on_the_way[fh] = path

    def learn_entry(self, entry):
        """``entry.name`` in ``entry.dir`` is ``entry.fh`` (reply, walk)."""
        if entry.name in handles.NOT_DOWN or not entry.fh:
            return
        directory = bytes(entry.dir)
        above = self._on_the_way.get(directory)
        if above is not None:
            self._place(bytes(entry.fh), posixpath.join(above, entry.name))
        if directory in self._dirs and not names_a_profile(entry.name) \
                and (entry.attrs is None or
                     entry.attrs.type != const.FileType.NF3DIR):
            self._files.add(bytes(entry.fh))

    # --- the check -----------------------------------------------------------

    def _protected_name(self, where, proc=None):
        """Why ``proc`` of the name ``where`` would change a protected name.

        None if it would not: a name off the way down to a read-only
        directory, a profile in one, or the MKDIR or RMDIR of a directory
        compute nodes make there.
        """
        directory = bytes(where.dir)
        above = self._on_the_way.get(directory)
        if above is not None and where.name in self._leading[above]:
            return "%r on the way down to a read-only directory" % (
                where.name)
        if directory in self._dirs and not names_a_profile(where.name) \
                and not (proc in (Nfs3Proc.MKDIR, Nfs3Proc.RMDIR) and
                         where.name in _DIRS_MADE_THERE):
            return "%r in a read-only directory" % where.name
        return None

    def _protected_dir(self, fh):
        """Whether ``fh`` is a read-only directory or one above it."""
        return fh in self._dirs or fh in self._on_the_way

    def needs_walk(self, proc):
        """Whether ``proc`` must wait for the guard's first walk."""
        return not self.walked and (
            proc in _CHANGING_A_FILE or proc == Nfs3Proc.LINK)

    def refuses(self, proc, args):
        """Why the NFSv3 call ``proc`` may not pass, or None.

        ProtocolError if its arguments cannot be read.
        """
        if proc in _CHANGING_A_FILE:
            fh = bytes(_first(proc, args))
            if fh in self._files:
                return "a change of a read-only image"
            if proc == Nfs3Proc.SETATTR and self._protected_dir(fh):
                return "a change of the attributes of a read-only " \
                    "directory or of one above it"
        elif proc in _NAMING:
            where = _first(proc, args)
            why = self._protected_name(where, proc)
            if why is not None:
                return "%s of %s" % (Nfs3Proc(proc).name, why)
        elif proc == Nfs3Proc.RENAME:
            parsed = nfs3.decode_args(proc, args)
            for where in (parsed.from_, parsed.to):
                why = self._protected_name(where)
                if why is not None:
                    return "RENAME of %s" % why
        elif proc == Nfs3Proc.LINK:
            parsed = nfs3.decode_args(proc, args)
            if bytes(parsed.file) in self._files:
                return "LINK of a read-only image"
            why = self._protected_name(parsed.link)
            if why is not None:
                return "LINK as %s" % why
        return None

    def refuses_bulk_write(self, args):
        """Why a bulk channel WRITE may not pass, or None."""
        if bytes(bulk.decode_args(bulk.BulkProc.WRITE, args).file) in \
                self._files:
            return "a change of a read-only image"
        return None
