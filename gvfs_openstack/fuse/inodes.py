# SPDX-License-Identifier: Apache-2.0
"""FUSE inode numbers for NFS file handles.

FUSE names files by 64-bit inode numbers the file system hands out and the
kernel gives back, counting its references ("lookups"); NFS names them by
opaque handles of up to 64 bytes.  The table gives each handle a number
for as long as the kernel holds a reference to it.  Numbers are never
reused within a mount, so a forgotten handle cannot be mistaken for a new
one.  The NFS fileid is not used as the number: it is only unique within
one server file system, and the export's root would collide with FUSE's
fixed root inode 1.
"""

ROOT_INODE = 1


class StaleInode(KeyError):
    """The kernel named an inode this table no longer knows."""


class InodeTable:
    def __init__(self, root_fh):
        self._handles = {ROOT_INODE: root_fh}
        self._inodes = {root_fh: ROOT_INODE}
        self._lookups = {}
        self._next = ROOT_INODE + 1

    def __len__(self):
        return len(self._handles)

    def inode(self, fh):
        """The number of ``fh``, assigned now if it has none."""
        ino = self._inodes.get(fh)
        if ino is None:
            ino, self._next = self._next, self._next + 1
            self._inodes[fh] = ino
            self._handles[ino] = fh
        return ino

    def known(self, fh):
        """The number of ``fh`` if it has one, else None."""
        return self._inodes.get(fh)

    def remember(self, fh):
        """Count a reference the kernel took to ``fh``; its number."""
        ino = self.inode(fh)
        if ino != ROOT_INODE:
            self._lookups[ino] = self._lookups.get(ino, 0) + 1
        return ino

    def handle(self, ino):
        try:
            return self._handles[ino]
        except KeyError:
            raise StaleInode(ino) from None

    def forget(self, ino, count):
        """Drop ``count`` references; the number goes with the last.

        Returns whether it went.
        """
        if ino == ROOT_INODE or ino not in self._handles:
            return False
        left = self._lookups.get(ino, 0) - count
        if left > 0:
            self._lookups[ino] = left
            return False
        self._lookups.pop(ino, None)
        del self._inodes[self._handles.pop(ino)]
        return True
