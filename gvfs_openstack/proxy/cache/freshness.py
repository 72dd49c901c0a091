# SPDX-License-Identifier: Apache-2.0
"""What the proxy knows of each file's attributes, and which blocks hold.

Never serve stale bytes silently: every cached block carries the file's
(size, mtime, ctime) from when it was fetched.  The proxy keeps, per
file, the set of attributes that are "current" -- the last ones the
server reported, plus those produced by writes that went through this
very proxy.  An unexplained change empties that set, so every older
block is a miss.  Replies to calls in flight together come back in any
order, so attributes older than the newest the proxy has (by ctime, then
size: a WRITE only grows a file) are past news and change nothing,
unless nothing at all was heard of the file while that call was out.

A file that a REMOVE, RMDIR or RENAME through this proxy may have
unlinked for good is forgotten (:meth:`FileStates.removed`): its handle
may be stale now, and only the server can say (NFS3ERR_STALE, or fresh
attributes if another link keeps it).  A reply to a call sent before
that removal is past news too: it does not bring the file back.

Block reads, whole-file transfers and the replies passing through the
proxy all report and consult the same :class:`FileStates`.
"""

import collections
import dataclasses
import time

from gvfs_openstack.nfs import nfs3
from gvfs_openstack.proxy.cache.store import Attrs
from gvfs_openstack.proxy.cache.store import fh_digest

#: Files whose state is kept in memory (least recently used dropped).
MAX_FILES = 65536
#: Attribute versions remembered as current per file.
MAX_CURRENT = 64
#: Removed files remembered (least recently removed dropped): only
#: replies to calls in flight at the removal need them.
MAX_REMOVED = 4096


def attrs_of(attrs):
    """Change attributes of a fattr3 or a wcc_attr (both have them)."""
    return Attrs(attrs.size,
                 attrs.mtime.seconds << 32 | attrs.mtime.nseconds,
                 attrs.ctime.seconds << 32 | attrs.ctime.nseconds)


def version_key(fattr):
    """What a zero map is valid for: the file's size and mtime."""
    return fattr.size, fattr.mtime.nanoseconds


def _is_older(attrs, than):
    """Whether ``attrs`` of a file are from before ``than``.

    The server's ctime orders changes; a WRITE never shrinks a file, so
    within one tick of its clock the larger size is the later.
    """
    return (attrs.ctime, attrs.size) < (than.ctime, than.size)


@dataclasses.dataclass(slots=True)
class ReadStream:
    """One reader of a file as its READs show it: where it goes next.

    NFS has no open files to hang read-ahead on, so a READ that starts
    where an earlier one ended continues that one's stream; several
    readers of one image (four ``qemu-img convert``, four downloads)
    each keep their own.
    """

    next_offset: int = -1
    #: READs in a row that each started where the one before ended.
    streak: int = 0
    #: Read-ahead has looked at the blocks before this one.
    ahead: int = 0
    #: Where a read-ahead guided by the zero map last looked from.
    ahead_from: int = 0


#: Readers of one file whose read-ahead is followed.
MAX_STREAMS = 8


def stream_for(state, offset, end):
    """The :class:`ReadStream` the READ of [offset, end) continues.

    None for a READ that continues none (a scattered read); it may start
    one, which its next READ then continues.  A READ at offset 0 starts
    a stream afresh.  Past :data:`MAX_STREAMS` the least recent stream
    of the least established is dropped: scattered reads replace each
    other before they push out a reader in full flow.
    """
    streams = state.streams
    for i, stream in enumerate(streams):
        if stream.next_offset == offset and offset:
            streams.append(streams.pop(i))
            stream.streak += 1
            stream.next_offset = end
            return stream
    stream = ReadStream(end, 1 if offset == 0 else 0)
    if len(streams) >= MAX_STREAMS:
        streams.pop(min(range(len(streams)),
                        key=lambda i: (streams[i].streak > 0, i)))
    streams.append(stream)
    return stream if offset == 0 else None


@dataclasses.dataclass(slots=True)
class FileState:
    fh: bytes
    fattr: nfs3.Fattr
    checked: float
    current: list
    digest: bytes
    #: The :class:`ReadStream` of each reader of the file, least
    #: recently read first.
    streams: list = dataclasses.field(default_factory=list)
    #: The file's sidecar, its zero map, and the (size, mtime) they are
    #: valid for.
    sidecar: object = None
    zeros: object = None
    zeros_for: tuple = None
    #: Counts the attribute reports taken: one that is unchanged since a
    #: call went out means the call's reply is the newest word.
    reports: int = 0


def zeros_of(state):
    """The file's zero map, if it holds for the file as it is now."""
    if state.zeros is not None and \
            state.zeros_for == version_key(state.fattr):
        return state.zeros
    return None


def cached_block(store, state, block, expected_len):
    """A block's bytes from ``store`` if cached under current attributes."""
    found = store.get(state.digest, block)
    if found is None:
        return None
    data, attrs = found
    if attrs not in state.current or len(data) != expected_len:
        return None
    return data


class FileStates:
    """Per file handle: its attributes, which of them are current."""

    def __init__(self, counters, clock=time.monotonic):
        #: :class:`counters.CacheCounters`
        self.counters = counters
        self.clock = clock
        self._files = collections.OrderedDict()
        #: fh -> the mark of its removal (see :meth:`removed`).
        self._removed = collections.OrderedDict()

    def get(self, fh):
        """The state of ``fh``, or None if nothing is known of it."""
        return self._files.get(bytes(fh))

    def reports_of(self, fh):
        """A mark to give :meth:`observe` for a reply to a call sent now."""
        fh = bytes(fh)
        state = self._files.get(fh)
        return self._removed.get(fh) if state is None else state.reports

    def observe(self, fh, fattr, reports=None):
        """The server reported ``fattr`` for ``fh``.

        ``reports`` is :meth:`reports_of` from when the call went out.
        Returns the file's state, unchanged if ``fattr`` is past news;
        None if the file may have been removed since the call went out.
        """
        if fattr is None:
            return None
        fh = bytes(fh)
        attrs = attrs_of(fattr)
        state = self._files.get(fh)
        if state is None:
            removal = self._removed.get(fh)
            if removal is not None:
                if reports is not removal:
                    # Sent before the file was removed: it may be gone.
                    self.counters.cache_stale_replies += 1
                    return None
                del self._removed[fh]
            state = FileState(fh, fattr, self.clock(), [attrs],
                              fh_digest(fh))
            self._files[fh] = state
            if len(self._files) > MAX_FILES:
                self._files.popitem(last=False)
            return state
        if (reports is None or reports != state.reports) and \
                _is_older(attrs, attrs_of(state.fattr)):
            self.counters.cache_stale_replies += 1
            return state
        self._take(state, fattr, attrs)
        return state

    def _take(self, state, fattr, attrs):
        """``fattr`` (``attrs`` of it) is the file's newest word.

        Attributes not among the current ones mean the file changed in a
        way the proxy did not see: they become the only current ones,
        and every older block is stale.
        """
        state.reports += 1
        if attrs not in state.current:
            self.counters.cache_invalidations += 1
            state.current = [attrs]
        state.fattr = fattr
        state.checked = self.clock()
        self._files.move_to_end(state.fh)

    def observe_own_change(self, fh, wcc, reset=False):
        """A WRITE or SETATTR that went through this proxy changed ``fh``.

        If the file was as we knew it just before (``wcc.before``), the
        new attributes join the current ones and blocks cached under the
        old ones stay valid (except those the caller discards); a size
        change by SETATTR (``reset``) keeps only the new attributes.
        """
        state = self._files.get(bytes(fh))
        if state is None or wcc is None or wcc.after is None:
            return
        after = attrs_of(wcc.after)
        if not reset and _is_older(after, attrs_of(state.fattr)):
            # A WRITE answered after a later one: its bytes were
            # discarded all the same; its attributes are past.
            self.counters.cache_stale_replies += 1
            return
        state.reports += 1
        ours = wcc.before is not None and \
            attrs_of(wcc.before) in state.current
        if reset or not ours:
            if not ours:
                self.counters.cache_invalidations += 1
            state.current = [after]
        elif after not in state.current:
            state.current.append(after)
            del state.current[:-MAX_CURRENT]
        state.fattr = wcc.after
        state.checked = self.clock()

    def observe_created(self, fh, fattr):
        """A CREATE through this proxy answered ``fattr`` for ``fh``.

        An UNCHECKED or GUARDED CREATE of an existing name, with a size
        in its attributes, truncates that file: a reply no other call
        can be newer than, even when the server's clock did not tick
        between the two sizes (:func:`_is_older` would call it past).
        Blocks cached under other attributes are stale.  With no
        attributes in the reply nothing of the file is trusted until
        the server is asked again.
        """
        fh = bytes(fh)
        state = self._files.get(fh)
        if state is None:
            return
        if fattr is None:
            self.removed(fh)
            return
        self._take(state, fattr, attrs_of(fattr))

    def forget(self, fh):
        """Ask the server about ``fh`` again before trusting it."""
        self._files.pop(bytes(fh), None)

    def removed(self, fh):
        """A removal through this proxy may have unlinked ``fh`` for good.

        Its state goes, and until the server is asked again (a call
        marked by :meth:`reports_of` from now on) no reply makes a new
        one: a GETATTR or READ answered before the removal would bring
        back attributes of a file that may no longer exist.
        """
        fh = bytes(fh)
        self._files.pop(fh, None)
        self._removed[fh] = object()
        self._removed.move_to_end(fh)
        if len(self._removed) > MAX_REMOVED:
            self._removed.popitem(last=False)

    def clear(self):
        self._files.clear()
