# SPDX-License-Identifier: Apache-2.0
"""A recorded boot, replayed through a mount as the guest read it.

A boot storm of real guests needs a TCG guest per host, and two cores
run two at most; what the storage tiers see of a boot is only its reads.
So a boot is recorded once (a boot profile: the blocks a real guest read,
in first-touch order, with the time of each after the first) and each
host replays it through its own mount, as QEMU reads a backing file:
``O_DIRECT`` where the mount allows it, one block per read.

The replay keeps the guest's pacing.  The recording was made where reads
cost next to nothing, so the time between two reads is what the guest
did in between (its CPU, not the disk); a guest blocked on a read does
none of it until the read returns.  With ``readers`` readers (the guest's
concurrency: one for the lab's test guest, several for a distribution
booting its services in parallel), read *i* goes to reader *i* mod
``readers``, which waits the recorded time between its previous read and
read *i* after its previous read returned.  Where reads are instant the
replay takes the recording's time; every slow read adds its wait.

No processes: one thread per reader.
"""

import dataclasses
import functools
import hashlib
import mmap
import os
import threading
import time

from gvfs_lab import process


@dataclasses.dataclass(frozen=True)
class Trace:
    """What a boot read: ``(block, seconds after the first read)``."""

    block_size: int
    reads: tuple

    @classmethod
    def from_profile(cls, boot_profile):
        """The trace of a :class:`~gvfs_openstack.sidecar.profile.Profile`.

        A profile merged from several boots may list a block whose time
        is earlier than its predecessor's; the times are made monotonic.
        """
        reads, latest = [], 0.0
        for block, ms in boot_profile.blocks:
            latest = max(latest, ms / 1000.0)
            reads.append((block, latest))
        return cls(boot_profile.block_size, tuple(reads))

    @property
    def bytes(self):
        return len(self.reads) * self.block_size

    @property
    def seconds(self):
        """The recording's length: first read to last."""
        return self.reads[-1][1] if self.reads else 0.0


@dataclasses.dataclass(frozen=True)
class Result:
    """One replay: its length, what it read, and how slow each read was."""

    seconds: float
    #: sha256 of the blocks' sha256 digests, in trace order (the
    #: readers finish their blocks in no set order).
    digest: str
    bytes_read: int
    #: Seconds the reads themselves took, added up.
    read_seconds: float


def expected_digest(path, trace):
    """The digest a replay of ``trace`` on the file ``path`` must give."""
    hasher = hashlib.sha256()
    with open(path, "rb") as f:
        for block, _ in trace.reads:
            f.seek(block * trace.block_size)
            hasher.update(hashlib.sha256(f.read(trace.block_size)).digest())
    return hasher.hexdigest()


def _open(path):
    """``path`` opened as QEMU with ``cache=none`` opens a backing file."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECT)
    except OSError:
        fd = os.open(path, os.O_RDONLY)
        # No read-ahead: a buffered read must not fetch what the guest
        # did not read.
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
        return fd


def replay(path, trace, readers=1, start_at=None):
    """Replay ``trace`` on the file ``path``; a :class:`Result`.

    ``start_at``: a :func:`time.monotonic` value to begin at (hosts of a
    storm begin together).  An error of any read is raised.
    """
    if readers < 1:
        raise ValueError("readers must be at least 1, not %r" % readers)
    fd = _open(path)
    try:
        return _replay(fd, trace, readers, start_at)
    finally:
        os.close(fd)


def _replay(fd, trace, readers, start_at):
    hashes = [None] * len(trace.reads)
    sizes = [0] * len(trace.reads)
    failed = threading.Event()
    if start_at is not None:
        time.sleep(max(0.0, start_at - time.monotonic()))
    began = time.monotonic()

    def reader(index):
        """Seconds its reads took."""
        spent = 0.0
        # An anonymous map is page-aligned, as O_DIRECT wants.
        with mmap.mmap(-1, trace.block_size) as buffer:
            previous = 0.0
            for i in range(index, len(trace.reads), readers):
                if failed.is_set():
                    break
                block, at = trace.reads[i]
                if at > previous:
                    time.sleep(at - previous)
                previous = at
                asked = time.monotonic()
                try:
                    size = os.preadv(fd, [buffer], block * trace.block_size)
                except OSError:
                    failed.set()  # The other readers stop too.
                    raise
                spent += time.monotonic() - asked
                sizes[i] = size
                hashes[i] = hashlib.sha256(buffer[:size]).digest()
        return spent

    spent = process.together([functools.partial(reader, index)
                              for index in range(readers)])
    seconds = time.monotonic() - began
    hasher = hashlib.sha256()
    for data in hashes:
        hasher.update(data)
    return Result(seconds, hasher.hexdigest(), sum(sizes), sum(spent))


def replay_together(paths, trace, readers=1, delay=0.5):
    """Replay ``trace`` on every file of ``paths`` at once; Results.

    Each replay begins at the same instant, ``delay`` seconds from now
    (time for every thread to be ready); in the order of ``paths``.
    """
    start_at = time.monotonic() + delay
    return process.together([
        functools.partial(replay, path, trace, readers, start_at)
        for path in paths])
