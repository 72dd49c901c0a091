# SPDX-License-Identifier: Apache-2.0
"""The mount's RAM cache of file contents, coherent as NFS close-to-open.

A guest disk opened with ``cache=none`` (Nova's default where O_DIRECT
works) bypasses the kernel's page cache, and so does its backing golden
image: every guest read is a FUSE request, an NFS READ to the node's
client proxy and a read of its disk cache, about 0.4 ms of CPU per
64 KiB block in the two daemons.  Later clones on a host read the same
boot blocks again; holding them here answers those reads without the
proxy.

Coherence is the kernel NFS client's.  A file's blocks are kept under
the attributes (size, mtime, ctime) they were read with.  Attributes
seen later -- the GETATTR sent at every open, any attributes the kernel
asks for, those every READ reply carries -- that differ drop all of the
file's blocks, so a file changed on another host is read afresh from its
next open on.  Writes and truncates through this mount drop what they
cover before they are sent, and bytes a fetch brought back after
something was dropped (or attributes changed) while it was out are not
kept: they may predate it.

Sans-IO: the FUSE operations fetch and call in; nothing here waits.
"""

import collections
import math

BLOCK_SIZE = 64 * 1024


def version_of(fattr):
    """What must stay the same for cached bytes of a file to stand."""
    return (fattr.size, fattr.mtime.seconds, fattr.mtime.nseconds,
            fattr.ctime.seconds, fattr.ctime.nseconds)


class _File:
    __slots__ = ("version", "epoch", "blocks")

    def __init__(self):
        self.version = None     # (size, mtime, ctime) of the kept blocks
        self.epoch = 0          # bumped by every drop and version change
        self.blocks = set()     # indices of the kept blocks


class ReadCache:
    """Least recently used blocks of files, up to ``capacity`` bytes.

    Files are named by the mount's inode numbers, which are never reused
    within a mount.
    """

    def __init__(self, capacity, block_size=BLOCK_SIZE):
        self.capacity = capacity
        self.block_size = block_size
        self.used = 0
        self.hits = 0
        self.misses = 0
        #: Blocks let go to make room (not those dropped as stale).
        self.evictions = 0
        self._blocks = collections.OrderedDict()   # (inode, index) -> bytes
        self._files = {}

    def span(self, offset, size):
        """The block-aligned range a fetch for [offset, +size) reads."""
        block = self.block_size
        return (offset // block * block,
                -(-(offset + size) // block) * block)

    def get(self, inode, offset, size):
        """The bytes at [offset, +size) if all are kept, else None.

        Short at the end of the file, as a READ is.
        """
        file = self._files.get(inode)
        if file is None or file.version is None:
            self.misses += 1
            return None
        end = min(offset + size, file.version[0])
        if offset >= end:
            self.hits += 1
            return b""
        block = self.block_size
        first, last = offset // block, (end - 1) // block
        pieces = []
        for index in range(first, last + 1):
            data = self._blocks.get((inode, index))
            if data is None:
                self.misses += 1
                return None
            pieces.append(data)
        for index in range(first, last + 1):
            self._blocks.move_to_end((inode, index))
        self.hits += 1
        start = offset - first * block
        joined = pieces[0] if len(pieces) == 1 else b"".join(pieces)
        return joined[start:start + end - offset]

    def holds(self, inode, offset, size):
        """Whether every block of [offset, +size) is kept (no counting)."""
        file = self._files.get(inode)
        if file is None or file.version is None:
            return False
        block = self.block_size
        end = min(offset + size, file.version[0])
        return all(index in file.blocks
                   for index in range(offset // block, -(-end // block)))

    def begin(self, inode):
        """A token for a fetch of ``inode`` about to be sent."""
        file = self._files.get(inode)
        return 0 if file is None else file.epoch

    def observe(self, inode, fattr):
        """Attributes of ``inode`` seen now; differing ones drop its blocks."""
        version = version_of(fattr)
        file = self._file(inode)
        if file.version != version:
            if file.version is not None:
                self._drop(inode, file, 0, math.inf)
            file.version = version
            file.epoch += 1

    def store(self, inode, token, fattr, offset, data):
        """Keep ``data`` read at ``offset`` with ``fattr`` in its reply.

        Kept only if nothing of the file was dropped and no other
        attributes of it were seen since :meth:`begin` gave ``token``;
        and only whole blocks, or the last block of the file.
        """
        if fattr is None:
            return  # Nothing to validate them by later.
        file = self._files.get(inode)
        fresh = (file.epoch if file is not None else 0) == token
        self.observe(inode, fattr)
        if not fresh or self.capacity < self.block_size:
            return
        file = self._files[inode]
        block, size = self.block_size, file.version[0]
        end = min(offset + len(data), size)
        index = -(-offset // block)     # The first whole block in data.
        view = memoryview(data)
        while index * block < end:
            at = index * block
            stop = min(at + block, size)
            if stop > end:
                return
            # A READ of one block is kept as it came, not copied.
            piece = data if (at, stop) == (offset, offset + len(data)) \
                else view[at - offset:stop - offset]
            self._put(inode, file, index, bytes(piece))
            index += 1

    def invalidate(self, inode, start=0, end=math.inf):
        """Drop the blocks over [start, end): this mount writes there."""
        file = self._file(inode)
        self._drop(inode, file, start, end)
        file.epoch += 1

    def forget(self, inode):
        """The kernel let go of ``inode``: its number will not come back."""
        file = self._files.pop(inode, None)
        if file is not None:
            self._drop(inode, file, 0, math.inf)

    def _file(self, inode):
        file = self._files.get(inode)
        if file is None:
            file = self._files[inode] = _File()
        return file

    def _put(self, inode, file, index, data):
        key = (inode, index)
        old = self._blocks.pop(key, None)
        if old is not None:
            self.used -= len(old)
        self._blocks[key] = data
        file.blocks.add(index)
        self.used += len(data)
        while self.used > self.capacity:
            (victim, victim_index), evicted = self._blocks.popitem(
                last=False)
            self.used -= len(evicted)
            self.evictions += 1
            self._files[victim].blocks.discard(victim_index)

    def _drop(self, inode, file, start, end):
        block = self.block_size
        if end - start < len(file.blocks) * block:
            # A write: look up the blocks it covers, not every kept one.
            indices = [i for i in range(start // block, -(-end // block))
                       if i in file.blocks]
        else:
            indices = [i for i in file.blocks
                       if i * block < end and (i + 1) * block > start]
        for index in indices:
            self.used -= len(self._blocks.pop((inode, index)))
            file.blocks.discard(index)
