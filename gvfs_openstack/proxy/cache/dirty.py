# SPDX-License-Identifier: Apache-2.0
"""Which bytes of which files are dirty, and where in the journal they are.

Write-back keeps every acknowledged WRITE in the journal until it is
flushed upstream.  This map says, for each file, which byte ranges are
newer than the server's copy and which journal record holds the newest
bytes of each: a later write over an earlier one cuts the earlier extent,
so a read or a flush never sees superseded bytes.  No I/O happens here.

A flush copies a snapshot of a file's extents upstream and then removes
the extents that came from the records it sent.  Writes that arrived
during the flush come from other records and stay dirty.
"""

import bisect
import dataclasses


@dataclasses.dataclass(frozen=True)
class Extent:
    """Dirty bytes of a file and where the journal holds them.

    ``length`` bytes at ``offset``, stored at ``position`` of journal
    segment ``segment`` by record ``record`` (a unique id).
    """

    offset: int
    length: int
    segment: int
    position: int
    record: int

    @property
    def end(self):
        return self.offset + self.length

    def cut(self, start, end):
        """The part of this extent inside [start, end), or None."""
        start, end = max(start, self.offset), min(end, self.end)
        if start >= end:
            return None
        return dataclasses.replace(
            self, offset=start, length=end - start,
            position=self.position + start - self.offset)


class DirtyFile:
    """The dirty extents of one file, sorted and never overlapping."""

    def __init__(self, fh, cred):
        self.fh = fh
        #: The (flavor, body) of the last writer: flushes act as them.
        self.cred = cred
        self._starts = []
        self._extents = []
        self.dirty_bytes = 0
        #: Wall-clock nanoseconds of the last write: the file's mtime as
        #: the proxy shows it until the data is flushed.
        self.written_ns = 0

    def __bool__(self):
        return bool(self._extents)

    @property
    def end(self):
        """One past the last dirty byte (0 if nothing is dirty)."""
        return max((e.end for e in self._extents[-1:]), default=0)

    def extents(self):
        return list(self._extents)

    def add(self, extent):
        """Record ``extent`` as the newest bytes of its range.

        An empty extent (a WRITE of no bytes) is no bytes of any range:
        kept, it would sort after a real extent at its offset and make
        :attr:`end` say the file ends there.
        """
        if not extent.length:
            return
        self._remove_range(extent.offset, extent.end)
        at = bisect.bisect_left(self._starts, extent.offset)
        self._starts.insert(at, extent.offset)
        self._extents.insert(at, extent)
        self.dirty_bytes += extent.length

    def _remove_range(self, start, end, before_record=None):
        lo = max(0, bisect.bisect_right(self._starts, start) - 1)
        hi = bisect.bisect_left(self._starts, end)
        kept = []
        for extent in self._extents[lo:hi]:
            if extent.end <= start or before_record is not None and \
                    extent.record >= before_record:
                kept.append(extent)
                continue
            self.dirty_bytes -= extent.length
            for piece in (extent.cut(extent.offset, start),
                          extent.cut(end, extent.end)):
                if piece is not None:
                    kept.append(piece)
                    self.dirty_bytes += piece.length
        self._extents[lo:hi] = kept
        self._starts[lo:hi] = [e.offset for e in kept]

    def forget_range(self, start, end, before_record):
        """Drop dirty bytes of [start, end): newer ones went upstream.

        Only records older than ``before_record`` lose bytes.
        """
        self._remove_range(start, end, before_record)

    def overlapping(self, start, end):
        """The dirty extents cut to [start, end), in offset order."""
        lo = max(0, bisect.bisect_right(self._starts, start) - 1)
        hi = bisect.bisect_left(self._starts, end)
        return [piece for extent in self._extents[lo:hi]
                if (piece := extent.cut(start, end)) is not None]

    def covers(self, start, end):
        """Whether every byte of [start, end) is dirty."""
        position = start
        for extent in self.overlapping(start, end):
            if extent.offset != position:
                return False
            position = extent.end
        return position >= end

    def remove_records(self, records):
        """Drop the extents that came from ``records`` (they were flushed).

        An extent cut by a later write is still part of its record's
        bytes, which the flush sent, so it goes too.
        """
        kept = [e for e in self._extents if e.record not in records]
        self.dirty_bytes = sum(e.length for e in kept)
        self._extents = kept
        self._starts = [e.offset for e in kept]

    def segments(self):
        return {e.segment for e in self._extents}


class DirtyMap:
    """Dirty files by file handle."""

    def __init__(self):
        self._files = {}

    def __len__(self):
        return len(self._files)

    def __contains__(self, fh):
        return bytes(fh) in self._files

    def get(self, fh):
        return self._files.get(bytes(fh))

    def files(self):
        return list(self._files.values())

    def add(self, fh, cred, extent, written_ns):
        """Record ``extent`` of ``fh``; the file's :class:`DirtyFile`.

        None for an empty extent of a file with nothing dirty: a WRITE of
        no bytes leaves nothing to write back.
        """
        fh = bytes(fh)
        if not extent.length:
            return self._files.get(fh)
        dirty = self._files.get(fh)
        if dirty is None:
            dirty = self._files[fh] = DirtyFile(fh, cred)
        dirty.cred = cred
        dirty.add(extent)
        dirty.written_ns = max(written_ns, dirty.written_ns + 1)
        return dirty

    def prune(self, fh):
        """Forget ``fh`` if nothing of it is dirty any more."""
        dirty = self._files.get(bytes(fh))
        if dirty is not None and not dirty:
            del self._files[bytes(fh)]

    def discard(self, fh):
        """Forget every dirty byte of ``fh``; their count."""
        dirty = self._files.pop(bytes(fh), None)
        return dirty.dirty_bytes if dirty else 0

    @property
    def dirty_bytes(self):
        return sum(f.dirty_bytes for f in self._files.values())

    def segments(self):
        """Journal segments still holding dirty bytes."""
        used = set()
        for dirty in self._files.values():
            used |= dirty.segments()
        return used
