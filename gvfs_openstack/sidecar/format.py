# SPDX-License-Identifier: Apache-2.0
"""The metadata sidecar: what a proxy may know about a file in advance.

A sidecar sits next to the file it describes, named ``.gvfs-meta.<name>``
(a dot file: ``ls`` and image listings skip it, and anything can tell it
apart by the prefix).  It is one JSON document, version 1::

    {
      "format": "gvfs-meta",
      "version": 1,
      "size": 536870912,          # the file's size when described
      "mtime_ns": 1795300000123456789,   # its mtime (ns since the epoch)
      "digest": {"algorithm": "sha256-nonzero", "value": "<hex>"},
      "zero_extents": [[0, 4096], [65536, 1048576]],   # [offset, length]
      "action": "on_demand",      # or "whole_file"
      "compression": "zstd"       # with whole_file: the channel's codec
    }

``zero_extents`` are sorted, non-overlapping, within the file, multiples
of 4096 bytes apart from one that ends at EOF.  ``sha256-nonzero`` is the
SHA-256 of the file's bytes outside the zero extents, in offset order: a
reader that has the whole file checks the zero extents are zero and the
rest hashes to it, without hashing gigabytes of zeros.

A sidecar is trusted only for the file it was made for: if the size or
mtime differ it is stale and ignored.  A proxy also ignores one that an
account other than root or the owner of the file or its directory owns,
or that others may write (:mod:`gvfs_openstack.sidecar.trust`).
Parsing never raises anything but :class:`SidecarError`, whatever the
bytes.
"""

import bisect
import dataclasses
import json

PREFIX = ".gvfs-meta."
FORMAT = "gvfs-meta"
VERSION = 1
#: Largest sidecar a proxy loads (a map of 64 Ki extents is ~2 MiB).
MAX_BYTES = 16 * 1024 * 1024
MAX_EXTENTS = 1 << 20
ACTIONS = ("on_demand", "whole_file")
COMPRESSIONS = ("zstd", "none")
DIGESTS = ("sha256-nonzero",)
ZERO_GRAIN = 4096


class SidecarError(ValueError):
    """A sidecar that must not be used (malformed, hostile, unknown)."""


def sidecar_name(name):
    """The sidecar's file name for the file ``name``."""
    return PREFIX + name


def is_sidecar(name):
    return name.startswith(PREFIX)


@dataclasses.dataclass(frozen=True)
class ZeroMap:
    """Sorted, non-overlapping [offset, end) ranges that are all zeros."""

    starts: tuple = ()
    ends: tuple = ()

    @classmethod
    def from_extents(cls, extents):
        return cls(tuple(o for o, _ in extents),
                   tuple(o + n for o, n in extents))

    def extents(self):
        return [[s, e - s] for s, e in zip(self.starts, self.ends)]

    @property
    def zero_bytes(self):
        return sum(e - s for s, e in zip(self.starts, self.ends))

    def covers(self, start, end):
        """Whether every byte of [start, end) is known to be zero."""
        if start >= end:
            return True
        at = bisect.bisect_right(self.starts, start) - 1
        return at >= 0 and self.ends[at] >= end

    def data_horizon(self, start, want, limit):
        """Where [start, horizon) first holds ``want`` non-zero bytes.

        ``limit`` if it never does before it.
        """
        for part_start, part_end in self._nonzero(start, limit):
            if part_end - part_start >= want:
                return part_start + want
            want -= part_end - part_start
        return limit

    def nonzero(self, start, end):
        """The parts of [start, end) not known to be zero."""
        return list(self._nonzero(start, end))

    def _nonzero(self, start, end):
        at = max(0, bisect.bisect_right(self.starts, start) - 1)
        position = start
        while position < end and at < len(self.starts):
            zero_start, zero_end = self.starts[at], self.ends[at]
            if zero_end <= position:
                at += 1
                continue
            if zero_start >= end:
                break
            if zero_start > position:
                yield position, zero_start
            position = max(position, zero_end)
            at += 1
        if position < end:
            yield position, end


@dataclasses.dataclass(frozen=True)
class Sidecar:
    size: int
    mtime_ns: int
    digest_algorithm: str
    digest: str
    zeros: ZeroMap
    action: str = "on_demand"
    compression: str = "none"

    def matches(self, size, mtime_ns):
        """Whether this sidecar describes the file as it is now."""
        return self.size == size and self.mtime_ns == mtime_ns

    def to_bytes(self):
        doc = {"format": FORMAT, "version": VERSION, "size": self.size,
               "mtime_ns": self.mtime_ns,
               "digest": {"algorithm": self.digest_algorithm,
                          "value": self.digest},
               "zero_extents": self.zeros.extents(),
               "action": self.action}
        if self.action == "whole_file":
            doc["compression"] = self.compression
        return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


def _int(doc, key, minimum=0):
    value = doc.get(key)
    if type(value) is not int or value < minimum:
        raise SidecarError("%s must be an integer >= %d" % (key, minimum))
    return value


def parse(data):
    """A :class:`Sidecar` from its bytes; SidecarError if unusable."""
    if len(data) > MAX_BYTES:
        raise SidecarError("larger than %d bytes" % MAX_BYTES)
    try:
        doc = json.loads(bytes(data))
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise SidecarError("not JSON: %s" % e) from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise SidecarError("not a %s document" % FORMAT)
    if doc.get("version") != VERSION:
        raise SidecarError("version %r is not %d" % (doc.get("version"),
                                                     VERSION))
    size = _int(doc, "size")
    mtime_ns = _int(doc, "mtime_ns")
    digest = doc.get("digest")
    if not isinstance(digest, dict) or \
            digest.get("algorithm") not in DIGESTS or \
            not isinstance(digest.get("value"), str) or \
            len(digest["value"]) != 64:
        raise SidecarError("digest must be one of %s with a 64-digit hex "
                           "value" % ", ".join(DIGESTS))
    try:
        bytes.fromhex(digest["value"])
    except ValueError:
        raise SidecarError("digest value is not hex") from None
    action = doc.get("action", "on_demand")
    if action not in ACTIONS:
        raise SidecarError("action %r is not one of %s" % (
            action, ", ".join(ACTIONS)))
    compression = doc.get("compression", "none")
    if compression not in COMPRESSIONS:
        raise SidecarError("compression %r is not one of %s" % (
            compression, ", ".join(COMPRESSIONS)))
    return Sidecar(size, mtime_ns, digest["algorithm"], digest["value"],
                   _zero_map(doc.get("zero_extents", []), size), action,
                   compression)


def _zero_map(extents, size):
    if not isinstance(extents, list) or len(extents) > MAX_EXTENTS:
        raise SidecarError("zero_extents must be a list of at most %d "
                           "[offset, length] pairs" % MAX_EXTENTS)
    previous_end = 0
    pairs = []
    for extent in extents:
        if not isinstance(extent, list) or len(extent) != 2 or \
                any(type(x) is not int for x in extent):
            raise SidecarError("zero extent %r is not [offset, length]"
                               % (extent,))
        offset, length = extent
        if offset < previous_end or length <= 0:
            raise SidecarError("zero extents overlap, are out of order or "
                               "empty at offset %d" % offset)
        if offset + length > size:
            raise SidecarError("zero extent at %d runs past the end of the "
                               "file (%d bytes)" % (offset, size))
        if offset % ZERO_GRAIN or (length % ZERO_GRAIN and
                                   offset + length != size):
            raise SidecarError("zero extent at %d is not aligned to %d "
                               "bytes" % (offset, ZERO_GRAIN))
        pairs.append((offset, length))
        previous_end = offset + length
    return ZeroMap.from_extents(pairs)
