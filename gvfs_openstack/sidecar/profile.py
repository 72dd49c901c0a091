# SPDX-License-Identifier: Apache-2.0
"""The boot profile: which blocks of an image a boot reads, in what order.

A guest reads a small, predictable set of blocks while it boots, but one
at a time: across a 50 ms WAN each miss is a round trip (806 of them for
the lab's test guest, 45 s of its 66 s first boot).  A profile names
those blocks in the order a boot first touched them, so that a proxy can
fetch them all at once, ahead of the guest, with many in flight.

A profile sits beside its image as ``.gvfs-meta.<name>.profile`` (a dot
file under the sidecar prefix: listings, scans and the proxies' name
tables skip it).  It is one JSON document, version 1::

    {
      "format": "gvfs-profile",
      "version": 1,
      "size": 1073741824,              # the image's size when recorded
      "mtime_ns": 1795300000123456789,  # its mtime
      "block_size": 65536,
      "boots": 3,                       # how many boots it was made from
      "blocks": [[1234, 0], [88, 57]]   # [block, ms after the first read]
    }

Like a metadata sidecar it is trusted only for the file it was made for
(same size and mtime), bounded in size, and checked as a whole: blocks
inside the file, each at most once, times within bounds.  Parsing never
raises anything but :class:`ProfileError`, whatever the bytes.  A profile
can only make a proxy fetch blocks early; it never changes the bytes a
reader gets.

No I/O here: :class:`Recording` is fed reads and clock values by its
caller.
"""

import dataclasses
import json
import os

from gvfs_openstack.sidecar import format as meta_format

SUFFIX = ".profile"
FORMAT = "gvfs-profile"
VERSION = 1
#: Most blocks a profile names: 1 GiB of 64 KiB blocks.  A boot that
#: reads more than that is a scan, not a boot set.
MAX_BLOCKS = 16384
#: Largest profile a proxy loads (MAX_BLOCKS entries take ~400 KiB).
MAX_BYTES = 1024 * 1024
#: Latest first touch a profile keeps: one hour after the first read.
MAX_MS = 3600 * 1000
MIN_BLOCK_SIZE = 4096
MAX_BLOCK_SIZE = 4 * 1024 * 1024
#: A recording that read more than this share of a file larger than
#: :data:`SMALL_FILE` was a copy -- ``qemu-img convert`` of a snapshot,
#: a download, a checksum -- not a boot: a boot reads a few per cent of
#: an image.  A small image's boot may read most of it, and prefetching
#: all of a small image costs little.
COPY_SHARE = 0.5
SMALL_FILE = 64 * 1024 * 1024
#: Boots a merged profile counts at the most: the weight of history in a
#: merge stays bounded, so a changed boot moves the order within a few
#: boots.
MAX_BOOTS = 16


class ProfileError(meta_format.SidecarError):
    """A profile that must not be used (malformed, hostile, unknown)."""


def profile_name(name):
    """The profile's file name for the image file ``name``."""
    return meta_format.sidecar_name(name) + SUFFIX


def profile_path(path):
    """Where the profile of the image at ``path`` is kept."""
    directory, name = os.path.split(path)
    return os.path.join(directory, profile_name(name))


@dataclasses.dataclass(frozen=True)
class Profile:
    size: int
    mtime_ns: int
    block_size: int
    boots: int
    #: ``(block, ms)`` pairs in first-touch order.
    blocks: tuple

    def matches(self, size, mtime_ns):
        """Whether the profile was made for a file of this size and mtime."""
        return self.size == size and self.mtime_ns == mtime_ns

    def to_bytes(self):
        return json.dumps({
            "format": FORMAT, "version": VERSION, "size": self.size,
            "mtime_ns": self.mtime_ns, "block_size": self.block_size,
            "boots": self.boots,
            "blocks": [list(entry) for entry in self.blocks],
        }, separators=(",", ":")).encode()

    def byte_ranges(self):
        """``(start, end)`` of each block in order, clipped to the file."""
        bs = self.block_size
        return [(b * bs, min((b + 1) * bs, self.size))
                for b, _ in self.blocks]

    def with_identity(self, size, mtime_ns):
        """The same blocks for another version of the file."""
        last = -(-size // self.block_size)
        return dataclasses.replace(
            self, size=size, mtime_ns=mtime_ns,
            blocks=tuple(e for e in self.blocks if e[0] < last))


def _int(doc, key, minimum, maximum):
    value = doc.get(key)
    if type(value) is not int or not minimum <= value <= maximum:
        raise ProfileError("%s must be an integer in [%d, %d]"
                           % (key, minimum, maximum))
    return value


def parse(data):
    """The :class:`Profile` in ``data`` (bytes); ProfileError if unusable."""
    if len(data) > MAX_BYTES:
        raise ProfileError("larger than %d bytes" % MAX_BYTES)
    try:
        doc = json.loads(bytes(data).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise ProfileError("not JSON: %s" % e) from e
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ProfileError("not a %s document" % FORMAT)
    if doc.get("version") != VERSION:
        raise ProfileError("unknown version %r" % (doc.get("version"),))
    size = _int(doc, "size", 0, 2 ** 63 - 1)
    mtime_ns = _int(doc, "mtime_ns", 0, 2 ** 63 - 1)
    block_size = _int(doc, "block_size", MIN_BLOCK_SIZE, MAX_BLOCK_SIZE)
    if block_size & (block_size - 1):
        raise ProfileError("block_size must be a power of two")
    boots = _int(doc, "boots", 1, MAX_BOOTS)
    entries = doc.get("blocks")
    if not isinstance(entries, list) or len(entries) > MAX_BLOCKS:
        raise ProfileError("blocks must be a list of at most %d entries"
                           % MAX_BLOCKS)
    last_block = -(-size // block_size)
    seen = set()
    blocks = []
    for entry in entries:
        if not (isinstance(entry, list) and len(entry) == 2 and
                all(type(v) is int for v in entry)):
            raise ProfileError("each block must be [block, ms]")
        block, ms = entry
        if not 0 <= block < last_block:
            raise ProfileError("block %d is outside the file" % block)
        if not 0 <= ms <= MAX_MS:
            raise ProfileError("time %d ms is out of range" % ms)
        if block in seen:
            raise ProfileError("block %d is named twice" % block)
        seen.add(block)
        blocks.append((block, ms))
    return Profile(size, mtime_ns, block_size, boots, tuple(blocks))


def merge(old, new):
    """One profile from an older one and a new recording of the same file.

    The union of their blocks, ordered by typical first touch: a block
    both name gets the mean of its times, weighted by the boots each
    stands for; a block only one names keeps its time.  A profile of
    another block size or file is replaced by the new one.
    """
    if old is None or old.block_size != new.block_size or \
            not old.matches(new.size, new.mtime_ns):
        return new
    times = dict(old.blocks)
    weight_old = min(old.boots, MAX_BOOTS - 1)
    weight_new = new.boots
    for block, ms in new.blocks:
        if block in times:
            times[block] = (times[block] * weight_old + ms * weight_new) \
                // (weight_old + weight_new)
        else:
            times[block] = ms
    ordered = sorted(times.items(), key=lambda e: (e[1], e[0]))
    return dataclasses.replace(
        new, boots=min(MAX_BOOTS, weight_old + weight_new),
        blocks=tuple(ordered[:MAX_BLOCKS]))


def inherit(old, same, size, mtime_ns):
    """``old``'s profile for a new version of its file, where they match.

    ``same(start, end)`` says whether the new version holds the same
    bytes as the old one in [start, end) (the delta transfer's block
    signatures say it without reading either file).  A boot of the new
    version reads where the old one's did wherever nothing changed
    there; elsewhere it may read anything, and a block not kept is only
    fetched on demand.  None if nothing is kept.
    """
    last = -(-size // old.block_size)
    kept = tuple((block, ms) for block, ms in old.blocks
                 if block < last and same(
                     block * old.block_size,
                     min((block + 1) * old.block_size, size)))
    if not kept:
        return None
    return Profile(size, mtime_ns, old.block_size, old.boots, kept)


def adds_to(old, new):
    """Whether merging ``new`` into ``old`` would name blocks ``old`` lacks."""
    if old is None or old.block_size != new.block_size or \
            not old.matches(new.size, new.mtime_ns):
        return True
    have = {b for b, _ in old.blocks}
    return any(b not in have for b, _ in new.blocks)


class Recording:
    """The first touches of one file's blocks, as a boot reads them.

    ``touch`` is given each read's byte range and the clock; the
    recording ends when its caller says (a quiet period, a cap).  It
    gives up (``overflowed``) past :data:`MAX_BLOCKS`; :meth:`is_copy`
    also says so of a recording of most of a large file: a reader of
    that much is copying the file, not booting from it.
    """

    def __init__(self, block_size, started):
        self.block_size = block_size
        self.started = started
        self.last = started
        self._first = {}
        self.overflowed = False

    def __len__(self):
        return len(self._first)

    def touch(self, start, end, now):
        self.last = now
        if self.overflowed or end <= start:
            return
        ms = min(MAX_MS, max(0, int((now - self.started) * 1000)))
        bs = self.block_size
        for block in range(start // bs, (end - 1) // bs + 1):
            if block not in self._first:
                if len(self._first) >= MAX_BLOCKS:
                    self.overflowed = True
                    self._first.clear()
                    return
                self._first[block] = ms

    def is_copy(self, size):
        """Whether what was read of a file of ``size`` bytes was a copy."""
        return self.overflowed or (
            size > SMALL_FILE and
            len(self._first) * self.block_size > size * COPY_SHARE)

    def profile(self, size, mtime_ns):
        """The recording as a one-boot :class:`Profile` of that file."""
        last = -(-size // self.block_size)
        return Profile(size, mtime_ns, self.block_size, 1, tuple(
            (b, ms) for b, ms in self._first.items() if b < last))
