# SPDX-License-Identifier: Apache-2.0
"""Which file handle each directory entry the proxy has seen names.

REMOVE, RMDIR and RENAME name a file by its directory and name, not by
its handle, yet what the cache keeps (attributes, blocks, sidecars, the
export) is per handle.  So the replies that hand out a handle for a name
(LOOKUP, CREATE, MKDIR, SYMLINK, MKNOD, LINK, READDIRPLUS) are
remembered here, and a removal that passes through the proxy can tell
the cache which handle it may have made stale.

Bounded: the least recently learned entries go first.  An entry it no
longer has (or one made by another client) costs only that: the file's
cached state lasts until its next revalidation, as for any change made
behind the proxy's back.
"""

import collections

#: Entries kept (least recently learned dropped), as many as the files
#: whose state :class:`freshness.FileStates` keeps.
MAX_NAMES = 65536


class Names:
    """(directory handle, name) -> handle, least recently learned first."""

    def __init__(self, limit=MAX_NAMES):
        self.limit = limit
        self._handles = collections.OrderedDict()

    def learn(self, dir_fh, name, fh):
        """``name`` in directory ``dir_fh`` is ``fh`` now."""
        if not fh or name in (".", ".."):
            return
        key = (bytes(dir_fh), name)
        self._handles[key] = bytes(fh)
        self._handles.move_to_end(key)
        if len(self._handles) > self.limit:
            self._handles.popitem(last=False)

    def get(self, dir_fh, name):
        """The handle ``name`` in ``dir_fh`` was last seen to be, or None."""
        return self._handles.get((bytes(dir_fh), name))

    def pop(self, dir_fh, name):
        """Forget ``name`` in ``dir_fh``; returns its handle, or None."""
        return self._handles.pop((bytes(dir_fh), name), None)

    def clear(self):
        self._handles.clear()
