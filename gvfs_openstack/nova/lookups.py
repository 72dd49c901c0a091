# SPDX-License-Identifier: Apache-2.0
"""Which Glance images are golden images on the export, remembered a while.

Every clone needs to know whether its image lives on the export, which
only Glance can say (the image's locations).  In a research cloud the
Images API may be far away -- across the WAN with the DTN -- and asking
it costs a clone one more round trip (about a fifth of a later clone in
``tox -e bench -- clone``).  What is asked for does not change while an
image is active: Glance does not let its disk format change, and its
file on the export is named by its id.  What could change -- the image
deleted meanwhile -- is seen by the clone anyway: taking the reference
finds the file gone, the answer is forgotten and Nova's usual path
reports the image missing.  So positive answers are kept for
``[gvfs] image_lookup_cache_seconds``.
"""

import collections
import threading
import time

#: Answers kept at most (the least recently stored dropped first).
MAX_ENTRIES = 1024


class GoldenLookups:
    """``image id -> (file name on the export, disk format)``, with a TTL.

    nova-compute spawns on several threads at once, hence the lock.
    """

    def __init__(self, seconds, clock=time.monotonic):
        self.seconds = seconds
        self.clock = clock
        self._found = collections.OrderedDict()
        self._lock = threading.Lock()

    def get(self, image_id):
        """The answer stored less than ``seconds`` ago, or None."""
        with self._lock:
            entry = self._found.get(image_id)
            if entry is None:
                return None
            if self.clock() - entry[0] >= self.seconds:
                del self._found[image_id]
                return None
            return entry[1]

    def put(self, image_id, found):
        if self.seconds <= 0:
            return
        with self._lock:
            self._found[image_id] = (self.clock(), found)
            self._found.move_to_end(image_id)
            while len(self._found) > MAX_ENTRIES:
                self._found.popitem(last=False)

    def forget(self, image_id):
        with self._lock:
            self._found.pop(image_id, None)
