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
``.gvfs-refs/``).

This is bookkeeping without I/O, beside :mod:`handles`: which directory
handles are those directories (learned from MNT and LOOKUP replies on
the way down from an export's root, and from the export guard's walk),
which file handles are files in them, and whether a call would change
one.  A proxy does not hold every handle from its start: until the
export guard has walked the exports once, a call that changes a file
waits for that walk (:meth:`ReadOnlyDirs.needs_walk`).
"""

import posixpath

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
                     Nfs3Proc.REMOVE})

#: The field of each call's arguments that names its file or directory.
_FIRST = {Nfs3Proc.WRITE: "file", Nfs3Proc.SETATTR: "object",
          Nfs3Proc.CREATE: "where", Nfs3Proc.SYMLINK: "where",
          Nfs3Proc.MKNOD: "where", Nfs3Proc.REMOVE: "object"}

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
        self._above = set()
        for path in self.paths:
            while path not in ("/", ""):
                path = posixpath.dirname(path)
                self._above.add(path)
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
        if path in self.paths:
            self._dirs.add(fh)
        elif path in self._above:
            self._on_the_way[fh] = path

    def learn_entry(self, entry):
        """``entry.name`` in ``entry.dir`` is ``entry.fh`` (reply, walk)."""
        if entry.name in handles.NOT_DOWN or not entry.fh:
            return
        directory = bytes(entry.dir)
        above = self._on_the_way.get(directory)
        if above is not None:
            self._place(bytes(entry.fh), posixpath.join(above, entry.name))
        elif directory in self._dirs and not names_a_profile(entry.name) \
                and (entry.attrs is None or
                     entry.attrs.type != const.FileType.NF3DIR):
            self._files.add(bytes(entry.fh))

    # --- the check -----------------------------------------------------------

    def _protected_name(self, where):
        return bytes(where.dir) in self._dirs and \
            not names_a_profile(where.name)

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
        elif proc in _NAMING:
            where = _first(proc, args)
            if self._protected_name(where):
                return "%s of %r in a read-only directory" % (
                    Nfs3Proc(proc).name, where.name)
        elif proc == Nfs3Proc.RENAME:
            parsed = nfs3.decode_args(proc, args)
            for where in (parsed.from_, parsed.to):
                if self._protected_name(where):
                    return "RENAME of %r in a read-only directory" % (
                        where.name)
        elif proc == Nfs3Proc.LINK:
            parsed = nfs3.decode_args(proc, args)
            if bytes(parsed.file) in self._files or \
                    self._protected_name(parsed.link):
                return "LINK of a read-only image"
        return None

    def refuses_bulk_write(self, args):
        """Why a bulk channel WRITE may not pass, or None."""
        if bytes(bulk.decode_args(bulk.BulkProc.WRITE, args).file) in \
                self._files:
            return "a change of a read-only image"
        return None
