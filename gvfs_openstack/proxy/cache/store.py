# SPDX-License-Identifier: Apache-2.0
"""The block disk cache: banks of frames on local disk, tags beside them.

Laid out as in the GVFS paper (section 3.2.1) and classic hardware caches:
the cache is ``sets`` sets of ``ways`` frames; the set of a block is a hash
of the file handle *plus* the block number, so consecutive blocks of a
file land in consecutive sets (and a sequential read touches consecutive
parts of the bank files).  Sets are grouped into bank files that are
created on first use.  Within a set the least recently used frame is
replaced.

Each bank is two files: ``.data`` holds the frames, ``.tags`` one record
per frame, memory-mapped, so the proxy's memory does not grow with the
cache's capacity.  A tag names the block (a digest of the file handle and
the block number), how many bytes are valid, a CRC-32 of them, and the
file's change attributes when the block was fetched -- the proxy compares
those with the file's current attributes before serving a hit.  Data is
written before its tag; a torn write or a corrupted bank fails the CRC and
is a miss, never wrong bytes.
"""

import dataclasses
import hashlib
import json
import mmap
import os
import struct
import threading
import zlib

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

FORMAT_VERSION = 1
_TAG = struct.Struct("<II16sQIIQQQQ")
TAG_SIZE = _TAG.size
_VALID = 0x47564653  # "GVFS"


def fh_digest(fh):
    """16 bytes naming a file handle in tags."""
    return hashlib.blake2b(bytes(fh), digest_size=16).digest()


@dataclasses.dataclass(frozen=True)
class Geometry:
    block_size: int
    ways: int
    sets: int
    sets_per_bank: int

    @classmethod
    def for_capacity(cls, capacity, block_size, ways, bank_size):
        frames = max(ways, capacity // block_size)
        sets = max(1, frames // ways)
        sets_per_bank = max(1, min(sets, bank_size // (block_size * ways)))
        return cls(block_size, ways, sets, sets_per_bank)

    @property
    def banks(self):
        return -(-self.sets // self.sets_per_bank)

    @property
    def capacity(self):
        return self.sets * self.ways * self.block_size


@dataclasses.dataclass(frozen=True, slots=True)
class Attrs:
    """The change attributes a cached block was fetched under.

    Slotted: every file the proxy knows of holds some.
    """

    size: int
    mtime: int
    ctime: int


class _Bank:
    def __init__(self, directory, index, geometry):
        frames = geometry.sets_per_bank * geometry.ways
        base = os.path.join(directory, "bank-%05d" % index)
        self.data_fd = os.open(base + ".data", os.O_RDWR | os.O_CREAT, 0o600)
        tags_fd = os.open(base + ".tags", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            if os.fstat(tags_fd).st_size != frames * TAG_SIZE:
                os.ftruncate(tags_fd, frames * TAG_SIZE)
            self.tags = mmap.mmap(tags_fd, frames * TAG_SIZE)
        finally:
            os.close(tags_fd)
        #: Frames written or checked by this process: their CRC is not
        #: computed again on every hit (one byte per frame).
        self.verified = bytearray(frames)

    def close(self):
        self.tags.flush()
        self.tags.close()
        os.close(self.data_fd)


class BlockStore:
    """Frames on disk, addressed by (file handle digest, block number)."""

    def __init__(self, directory, geometry):
        self.directory = directory
        self.geometry = geometry
        self._banks = {}
        self._lock = threading.Lock()
        self._clock = 0
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self._check_format()
        self.corrupt_blocks = 0
        self.io_errors = 0
        #: Valid blocks replaced by others (their set was full).
        self.evictions = 0

    def _check_format(self):
        """Reuse a warm cache only if it was laid out the same way."""
        meta_path = os.path.join(self.directory, "cache.json")
        wanted = dict(dataclasses.asdict(self.geometry),
                      version=FORMAT_VERSION)
        try:
            with open(meta_path) as f:
                found = json.load(f)
        except (OSError, ValueError):
            found = None
        if found == wanted:
            self._clock = self._max_stamp()
            return
        if found is not None:
            LOG.warning("cache in %s has another layout (%s); discarding it",
                        self.directory, found)
        for name in os.listdir(self.directory):
            if name.startswith("bank-"):
                os.unlink(os.path.join(self.directory, name))
        tmp = meta_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(wanted, f)
        os.replace(tmp, meta_path)

    def _max_stamp(self):
        stamp = 0
        for name in os.listdir(self.directory):
            if name.endswith(".tags"):
                index = int(name[5:10])
                bank = self._bank(index)
                for off in range(0, len(bank.tags), TAG_SIZE):
                    tag = _TAG.unpack_from(bank.tags, off)
                    if tag[0] == _VALID:
                        stamp = max(stamp, tag[9])
        return stamp

    def _bank(self, index):
        bank = self._banks.get(index)
        if bank is None:
            bank = self._banks[index] = _Bank(self.directory, index,
                                              self.geometry)
        return bank

    def _locate(self, digest, block):
        """The bank and first frame of the block's set.

        ``(None, None)`` if the bank cannot be opened (full or failing
        disk).
        """
        g = self.geometry
        set_index = (int.from_bytes(digest[:8], "little") + block) % g.sets
        try:
            bank = self._bank(set_index // g.sets_per_bank)
        except OSError as e:
            self.io_errors += 1
            LOG.warning("cannot open a cache bank in %s: %s",
                        self.directory, e)
            return None, None
        first_frame = (set_index % g.sets_per_bank) * g.ways
        return bank, first_frame

    def _lookup(self, digest, block):
        """``(bank, first frame of the set, frame, tag)`` of a block.

        frame and tag are None when the block is not cached; everything is
        None when the bank cannot be opened.
        """
        bank, first = self._locate(digest, block)
        if bank is None:
            return None, None, None, None
        return (bank, first) + self._find(bank, first, digest, block)

    def _find(self, bank, first_frame, digest, block):
        for frame in range(first_frame, first_frame + self.geometry.ways):
            tag = _TAG.unpack_from(bank.tags, frame * TAG_SIZE)
            if tag[0] == _VALID and tag[2] == digest and tag[3] == block:
                return frame, tag
        return None, None

    def get(self, digest, block):
        """``(data, Attrs)`` of a cached block, or None.

        A block whose CRC does not match is dropped and counted.
        """
        with self._lock:
            bank, _, frame, tag = self._lookup(digest, block)
            if frame is None:
                return None
            length = tag[4]
            try:
                data = os.pread(bank.data_fd, length,
                                frame * self.geometry.block_size)
            except OSError as e:
                LOG.warning("cannot read the cache bank: %s", e)
                self.io_errors += 1
                return None
            if len(data) != length or not bank.verified[frame] and \
                    zlib.crc32(data) != tag[1]:
                self.corrupt_blocks += 1
                LOG.warning("cache block %d of a file failed its checksum; "
                            "fetching it again", block)
                bank.tags[frame * TAG_SIZE:(frame + 1) * TAG_SIZE] = \
                    bytes(TAG_SIZE)
                return None
            bank.verified[frame] = 1
            self._clock += 1
            _TAG.pack_into(bank.tags, frame * TAG_SIZE, *tag[:9],
                           self._clock)
            return data, Attrs(*tag[6:9])

    def peek(self, digest, block):
        """``(length, Attrs)`` of a cached block without reading it."""
        with self._lock:
            _, _, frame, tag = self._lookup(digest, block)
            if frame is None:
                return None
            return tag[4], Attrs(*tag[6:9])

    def put(self, digest, block, data, attrs, speculative=False):
        """Store a block (at most block_size bytes) fetched under attrs.

        Returns False if the disk refused it (full, failing): the cache
        then simply does not hold the block.

        A ``speculative`` block (one nobody asked for yet: the image
        stream's) takes only its own frame or a free one of a set less
        than half full, and enters as the least recently used: it never
        pushes out a block a reader used, leaves room for readers'
        misses, and is the first to go when a reader needs the frame.
        Returns False when there is no such frame.
        """
        if len(data) > self.geometry.block_size:
            raise ValueError("block of %d bytes exceeds the block size"
                             % len(data))
        with self._lock:
            bank, first, frame, _ = self._lookup(digest, block)
            if bank is None:
                return False
            if speculative:
                frame = self._speculative_frame(bank, first, frame)
                if frame is None:
                    return False
            elif frame is None:
                frame = self._victim(bank, first)
                if self._is_valid(bank, frame):
                    self.evictions += 1
            offset = frame * TAG_SIZE
            # Invalidate, write the data, then the tag: a crash in between
            # leaves an invalid or CRC-failing frame, never a wrong one.
            bank.tags[offset:offset + TAG_SIZE] = bytes(TAG_SIZE)
            bank.verified[frame] = 0
            try:
                written = os.pwrite(bank.data_fd, data,
                                    frame * self.geometry.block_size)
            except OSError as e:
                # A full or failing cache disk costs hits, never data: the
                # frame stays invalid and the reader has its bytes anyway.
                self.io_errors += 1
                LOG.warning("cannot store a block in the cache: %s", e)
                return False
            if written != len(data):
                self.io_errors += 1
                return False
            bank.verified[frame] = 1
            if speculative:
                stamp = 0
            else:
                self._clock += 1
                stamp = self._clock
            _TAG.pack_into(bank.tags, offset, _VALID, zlib.crc32(data),
                           digest, block, len(data), 0, attrs.size,
                           attrs.mtime, attrs.ctime, stamp)
            return True

    def has_room(self, digest, block):
        """Whether a speculative :meth:`put` of the block would be kept."""
        with self._lock:
            bank, first, frame, _ = self._lookup(digest, block)
            return bank is not None and \
                self._speculative_frame(bank, first, frame) is not None

    def _speculative_frame(self, bank, first, frame):
        """The frame a speculative block may take, or None.

        Its own (``frame``), or a free one of a set less than half full
        (of one way: an empty one).  Speculative blocks never hold the
        frames that readers' misses will want: with the whole of an
        image streamed into a cache smaller than the images in use, the
        later misses of other images would each push out a block a
        reader used, where the half kept free takes them.
        """
        if frame is not None:
            return frame
        free, valid = None, 0
        for f in range(first, first + self.geometry.ways):
            if self._is_valid(bank, f):
                valid += 1
            elif free is None:
                free = f
        return None if valid >= max(1, self.geometry.ways // 2) else free

    @staticmethod
    def _is_valid(bank, frame):
        return _TAG.unpack_from(bank.tags, frame * TAG_SIZE)[0] == _VALID

    def _victim(self, bank, first):
        best, best_stamp = first, None
        for frame in range(first, first + self.geometry.ways):
            tag = _TAG.unpack_from(bank.tags, frame * TAG_SIZE)
            if tag[0] != _VALID:
                return frame
            if best_stamp is None or tag[9] < best_stamp:
                best, best_stamp = frame, tag[9]
        return best

    def discard(self, digest, block):
        with self._lock:
            bank, _, frame, _ = self._lookup(digest, block)
            if frame is not None:
                bank.tags[frame * TAG_SIZE:(frame + 1) * TAG_SIZE] = \
                    bytes(TAG_SIZE)

    def drop_all(self):
        """Forget every block (the data files are truncated too)."""
        with self._lock:
            for bank in self._banks.values():
                bank.tags[:] = bytes(len(bank.tags))
                bank.verified[:] = bytes(len(bank.verified))
                os.ftruncate(bank.data_fd, 0)

    def close(self):
        with self._lock:
            for bank in self._banks.values():
                bank.close()
            self._banks.clear()
