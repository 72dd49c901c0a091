# SPDX-License-Identifier: Apache-2.0
"""What the lab's test guest reads at boot, and what it says when done.

The guest (see :mod:`gvfs_lab.guest`) stands for an instance booting
from a golden image: it reads a fixed *boot set* -- 64 KiB blocks
holding data, as many as 5% of the disk's blocks, scattered, as in the
GVFS paper's clone experiment -- hashes what it read in that order, and
prints one marker line on its serial console.  The host computes the
same digest from the image, so a test knows the guest read exactly those
bytes through whatever stack (overlay, FUSE mount, caching proxies) sat
below its disk.

No files written, no processes.
"""

import errno
import hashlib
import json
import os
import random
import re

BLOCK = 64 * 1024

#: The line the guest prints once its boot reads and writes are done.
#: ``io_start`` is the uptime when the boot reads began.
MARKER = re.compile(
    r"GVFS-GUEST-READY uptime=(?P<uptime>[0-9]+(?:\.[0-9]+)?)"
    r" io_start=(?P<io_start>[0-9]+(?:\.[0-9]+)?)"
    r" digest=(?P<digest>[0-9a-f]{64}) wrote=(?P<wrote>[0-9a-f]{64})")
#: The line the guest prints instead when it cannot do its job.
FAILED = re.compile(r"GVFS-GUEST-FAILED (?P<reason>[^\r\n]*)")


class GuestFailed(Exception):
    """The guest said it could not read or write its disk."""


def choose(candidates, count, seed=20):
    """The boot set: ``count`` blocks drawn from ``candidates``.

    In the order a seeded PRNG draws them -- scattered, not sorted, so
    neither the guest's nor a proxy's read-ahead turns them into a
    sequential scan.  The same arguments always give the same set.
    """
    candidates = sorted(set(candidates))
    if not isinstance(count, int) or count < 1:
        raise ValueError("count must be a positive integer, not %r"
                         % (count,))
    if count > len(candidates):
        raise ValueError("cannot choose %d of %d blocks"
                         % (count, len(candidates)))
    return tuple(random.Random(seed).sample(candidates, count))


def data_blocks(f, region_blocks):
    """Blocks of ``[0, region_blocks)`` of raw image ``f`` that hold data.

    A booting guest reads files, not free space: the boot set is drawn
    from blocks with a non-zero byte.  Holes are skipped with SEEK_DATA.
    """
    end = region_blocks * BLOCK
    found = set()
    offset = 0
    while offset < end:
        try:
            start = os.lseek(f.fileno(), offset, os.SEEK_DATA)
        except OSError as e:
            if e.errno == errno.ENXIO:  # Only a hole is left.
                break
            raise
        stop = min(end, os.lseek(f.fileno(), start, os.SEEK_HOLE))
        for block in range(start // BLOCK, -(-stop // BLOCK)):
            if block not in found:
                f.seek(block * BLOCK)
                if f.read(BLOCK).count(0) != BLOCK:
                    found.add(block)
        offset = stop
    return sorted(found)


def digest(read_block, blocks):
    """sha256 (hex) of the blocks' bytes, concatenated in ``blocks`` order.

    ``read_block(n)`` returns the ``BLOCK`` bytes of block ``n``; what the
    guest computes with ``dd ... | sha256sum``.
    """
    hasher = hashlib.sha256()
    for block in blocks:
        data = read_block(block)
        if len(data) != BLOCK:
            raise ValueError("block %d: read %d bytes, not %d"
                             % (block, len(data), BLOCK))
        hasher.update(data)
    return hasher.hexdigest()


def file_reader(f):
    """``read_block`` for an open raw image ``f`` (binary, seekable)."""
    def read_block(block):
        f.seek(block * BLOCK)
        return f.read(BLOCK)
    return read_block


class Marker:
    """The guest's marker line, parsed."""

    __slots__ = ("uptime", "io_start", "digest", "wrote")

    def __init__(self, uptime, io_start, digest, wrote):
        self.uptime = uptime
        self.io_start = io_start
        self.digest = digest
        self.wrote = wrote

    def __repr__(self):
        return "Marker(uptime=%r, io_start=%r, digest=%r, wrote=%r)" % (
            self.uptime, self.io_start, self.digest, self.wrote)


def find_marker(console):
    """The :class:`Marker` in serial console text, or None if not yet.

    Raises :class:`GuestFailed` if the guest printed a failure line.
    """
    markers = find_markers(console)
    return markers[0] if markers else None


def find_markers(console):
    """Every boot's :class:`Marker` in serial console text, in order.

    A guest booted again (stop and start, reboot, rescue) prints one
    more; each boot writes random data, so ``wrote`` tells boots apart.
    Raises :class:`GuestFailed` if the guest printed a failure line.
    """
    failed = FAILED.search(console)
    if failed:
        raise GuestFailed(failed.group("reason").strip())
    return [Marker(float(found.group("uptime")),
                   float(found.group("io_start")), found.group("digest"),
                   found.group("wrote"))
            for found in MARKER.finditer(console)]


def cache_key(inputs):
    """A short hex key naming what was built from ``inputs`` (a dict).

    Any change of a value (kernel, builder version, a size, the init
    script) gives another key; key order does not matter.  Values must
    be JSON types.
    """
    if not isinstance(inputs, dict) or not inputs:
        raise ValueError("cache inputs must be a non-empty dict")
    try:
        text = json.dumps(inputs, sort_keys=True, separators=(",", ":"))
    except TypeError as e:
        raise ValueError("cache inputs must be JSON values: %s" % e) from e
    return hashlib.sha256(text.encode()).hexdigest()[:24]
