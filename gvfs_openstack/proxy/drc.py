# SPDX-License-Identifier: Apache-2.0
"""Duplicate request cache for non-idempotent calls.

When a tunnel breaks, the proxy below re-sends its in-flight calls on a new
connection with the *same* XID.  For CREATE, REMOVE, RENAME and friends a
second execution can give a different answer (NFS3ERR_EXIST for a file the
first one created), so the proxy above remembers them by XID and a digest of
the call and answers a repeat with the first execution's reply -- or, if the
first is still running, with the reply it is about to get.
"""

import asyncio
import collections
import time
import zlib


def request_key(xid, prog, proc, cred_body, args):
    """The identity of a request: XID plus a digest of what it asks."""
    digest = zlib.crc32(args, zlib.crc32(cred_body))
    return (xid, prog, proc, digest)


class DuplicateRequestCache:
    """Bounded by entry count and age; entries are futures of reply bytes."""

    def __init__(self, max_entries=4096, max_age=300.0, clock=time.monotonic):
        self.max_entries = max_entries
        self.max_age = max_age
        self._clock = clock
        self._entries = collections.OrderedDict()
        self.hits = 0

    def __len__(self):
        return len(self._entries)

    def _expire(self):
        now = self._clock()
        while self._entries:
            key, (stamp, future) = next(iter(self._entries.items()))
            too_many = len(self._entries) > self.max_entries
            if not too_many and now - stamp < self.max_age:
                break
            if not future.done() and not too_many:
                break
            self._entries.popitem(last=False)

    def lookup_or_reserve(self, key):
        """Return ``(future, is_new)``.

        A new future must be completed by the caller with the reply bytes
        (or cancelled if no reply was obtained, which forgets the entry so
        that a later retry executes again).
        """
        self._expire()
        entry = self._entries.get(key)
        if entry is not None:
            self.hits += 1
            return entry[1], False
        future = asyncio.get_running_loop().create_future()
        self._entries[key] = (self._clock(), future)
        future.add_done_callback(
            lambda f: self._forget_failed(key, f))
        return future, True

    def _forget_failed(self, key, future):
        if future.cancelled() or future.exception() is not None:
            entry = self._entries.get(key)
            if entry is not None and entry[1] is future:
                del self._entries[key]
