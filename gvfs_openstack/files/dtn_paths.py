# SPDX-License-Identifier: Apache-2.0
"""Removing and making names on a DTN without following a link.

Export clients write in a job's staging directory, and through the
proxies in the export's root where the staging directory lives: any name
the conductor removes or makes there may be a symbolic link planted to
send it elsewhere.  Removed by path over SFTP, ``staging/<job> ->
../images`` emptied the destination's ``images/`` (issue 61, item 3).
So every component below a trusted root (the export, which only the
operator configures) is opened with ``O_NOFOLLOW | O_DIRECTORY``
relative to the descriptor of the one before, and names are removed by
``unlinkat`` relative to such a descriptor: a link is removed as a link,
never followed, and a swap between two steps can at worst make a step
fail, never move it elsewhere.

The conductor runs this module's own source on the DTN (``python3 -I -c
SOURCE VERB ROOT NAME...``, see :class:`dtnssh.DtnSession`): it imports
only the standard library, so the DTN needs no package of this project
for it, and what runs there is the code tested here.  It prints one JSON
object a line for each name, and exits 1 with the reason on stderr when
it refused or failed.
"""

import errno
import json
import os
import stat
import sys

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
#: Deeper than any staging directory: a deeper planted tree is refused
#: (and left) rather than hold a descriptor for every level.
MAX_DEPTH = 32


class Refused(OSError):
    """A name that is a link, not a directory, or not the file account's."""

    def __init__(self, path, why):
        super().__init__(errno.EPERM, "refusing %s: %s" % (path, why))

    def __str__(self):
        return self.strerror


def _parts(relative):
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise Refused(relative, "not a name below the root")
    return parts


def _open_dir(name, dir_fd, shown):
    """A descriptor of directory ``name`` in ``dir_fd``, never a link's."""
    try:
        return os.open(name, _DIR, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(shown, "it is a symbolic link or not a "
                          "directory; not followed") from e
        raise


def _walk_to_parent(root, relative):
    """``(descriptor, leaf)``: the directory holding ``relative``'s leaf.

    ``root`` is opened as configured; every component below it must be a
    real directory.
    """
    parts = _parts(relative)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for n, part in enumerate(parts[:-1]):
            below = _open_dir(part, fd, "/".join(parts[:n + 1]))
            os.close(fd)
            fd = below
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]


def remove(root, relative):
    """Remove ``relative`` below ``root``, whatever it is, and all in it.

    A missing name is no error.  Returns ``{"path", "removed", "links"}``:
    how many names went, and which of them were symbolic links (removed
    themselves; what they named is untouched).
    """
    parent, leaf = _walk_to_parent(root, relative)
    done = {"path": relative, "removed": 0, "links": []}
    try:
        _remove_entry(parent, os.fstat(parent).st_dev, leaf, relative,
                      done, 0)
    finally:
        os.close(parent)
    return done


def _remove_entry(parent, device, name, shown, done, depth):
    try:
        st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(st.st_mode):
        try:
            os.unlink(name, dir_fd=parent)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            done["links"].append(shown)
        done["removed"] += 1
        return
    if depth >= MAX_DEPTH:
        raise Refused(shown, "deeper than %d directories" % MAX_DEPTH)
    fd = _open_dir(name, parent, shown)
    try:
        if os.fstat(fd).st_dev != device:
            raise Refused(shown, "another file system is mounted there")
        for entry in os.listdir(fd):
            _remove_entry(fd, device, entry, "%s/%s" % (shown, entry), done,
                          depth + 1)
    finally:
        os.close(fd)
    # unlinkat(AT_REMOVEDIR): a link swapped in meanwhile is ENOTDIR.
    os.rmdir(name, dir_fd=parent)
    done["removed"] += 1


def make_dir(root, relative):
    """Make ``relative`` below ``root`` as its parent is made.

    Owner, group and mode of the parent, as GridFTP (the parent's owner)
    would make it.  An existing name is accepted only if it is a real
    directory of the parent's owner.  Returns ``{"path", "made"}``.
    """
    parent, leaf = _walk_to_parent(root, relative)
    try:
        like = os.fstat(parent)
        mode = stat.S_IMODE(like.st_mode)
        try:
            os.mkdir(leaf, mode, dir_fd=parent)
            made = True
        except FileExistsError:
            made = False
        fd = _open_dir(leaf, parent, relative)
        try:
            st = os.fstat(fd)
            if not made:
                if st.st_uid != like.st_uid:
                    raise Refused(relative, "it belongs to uid %d, not to "
                                  "the owner of its parent (uid %d)"
                                  % (st.st_uid, like.st_uid))
                return {"path": relative, "made": False}
            _give_as_parent(fd, st, like, mode, relative, parent, leaf)
        finally:
            os.close(fd)
    finally:
        os.close(parent)
    return {"path": relative, "made": True}


def _give_as_parent(fd, st, like, mode, relative, parent, leaf):
    """The parent's owner and mode for a directory made now; else undone."""
    try:
        if (st.st_uid, st.st_gid) != (like.st_uid, like.st_gid):
            os.fchown(fd, like.st_uid, like.st_gid)
        os.fchmod(fd, mode)
    except OSError as e:
        try:
            os.rmdir(leaf, dir_fd=parent)
        except OSError:
            pass        # Written in already: left, and the error says why.
        raise Refused(relative, "cannot make it as its parent is made (%s)"
                      % (e.strerror or e)) from e


_VERBS = {"remove": remove, "mkdir": make_dir}


def main(argv):
    """``VERB ROOT NAME...``: 0, or 1 with the reason on stderr."""
    if len(argv) < 3 or argv[0] not in _VERBS:
        print("usage: remove|mkdir ROOT NAME...", file=sys.stderr)
        return 2
    verb, root = _VERBS[argv[0]], argv[1]
    for relative in argv[2:]:
        try:
            print(json.dumps(verb(root, relative)), flush=True)
        except OSError as e:
            print(str(e) if isinstance(e, Refused) else "%s: %s" % (
                relative, e), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
