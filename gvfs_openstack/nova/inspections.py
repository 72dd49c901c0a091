# SPDX-License-Identifier: Apache-2.0
"""What Nova's format inspector found in golden images, kept per file.

Nova inspects an image's data when it downloads it into ``_base``, and
again, with its safety check, each time it makes an overlay of it
(``create_image``), in case an upgrade added checks since.  Both read
the image's head and run every inspector over it in 4 KiB steps: about
0.25 s of CPU a clone in ``tox -e bench -- clone``, a third of a later
clone.  Here a golden image is inspected and checked once per file in
nova-compute's memory, so an upgraded nova-compute, being restarted,
checks again.

A golden image is never written in place: Glance writes a new file named
by the image's id, and this backend never writes it.  So what was found
in one file stands while the file is the same one -- the same path,
device, inode, size, mtime and ctime (in nanoseconds).  A file replaced
or touched is inspected again; a refusal is not kept.
"""

import collections
import os
import threading

#: Files whose findings are kept at most (least recently used out first).
MAX_ENTRIES = 256


def _identity(path):
    st = os.stat(path)
    return (path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
            st.st_ctime_ns)


class Inspections:
    """``path -> inspect(path)``, asked again only of a changed file.

    nova-compute spawns on several threads at once, hence the lock; two
    clones of one image at once may both inspect it, which is only the
    cost it was before.
    """

    def __init__(self, inspect):
        self.inspect = inspect
        self._found = collections.OrderedDict()
        self._lock = threading.Lock()

    def format_of(self, path):
        """``inspect(path)``, or what it said of this very file before.

        Errors are not kept: a refused image is inspected (and refused)
        again.
        """
        identity = _identity(path)
        with self._lock:
            found = self._found.get(identity)
            if found is not None:
                self._found.move_to_end(identity)
                return found
        found = self.inspect(path)
        if _identity(path) != identity:
            return found    # Changed while read: do not keep it.
        with self._lock:
            self._found[identity] = found
            while len(self._found) > MAX_ENTRIES:
                self._found.popitem(last=False)
        return found
