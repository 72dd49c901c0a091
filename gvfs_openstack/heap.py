# SPDX-License-Identifier: Apache-2.0
"""Keeping freed record buffers in the process for the next record.

Every 1 MiB READ reply and WRITE call a proxy relays, and every READ the
FUSE mount answers, lands in a buffer of its own that is freed once the
record has gone on.  With glibc's defaults those buffers never come back
warm: past 128 KiB an allocation is its own ``mmap``, or, once glibc has
raised that threshold, its pages return to the kernel as soon as the
top of the heap holds 128 KiB free.  The next record then takes fresh
pages, which the kernel faults in and zeroes one by one: measured in a
cold 1 GiB read through the mount and both proxies, a quarter to a third
of the server proxy's and the mount's CPU (0.23-0.44 CPU seconds per GiB
a hop), spent before a byte was copied.

:func:`retain_freed` asks glibc (``mallopt``) to serve allocations up to
``M_MMAP_THRESHOLD`` from the heap and to keep up to
``M_TRIM_THRESHOLD`` bytes of freed memory instead of returning it, so
records reuse pages already mapped.  What it costs is memory held after
a burst: freed buffers in the middle of the heap are never returned by
``free`` itself, whatever the threshold, so :func:`trim_when_idle` hands
them back (``malloc_trim``) once traffic has stopped for a while.
Elsewhere than glibc both do nothing.
"""

import asyncio
import ctypes
import ctypes.util

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: ``mallopt`` parameters (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: The largest ``M_MMAP_THRESHOLD`` glibc accepts on 64-bit systems
#: (half its HEAP_MAX_SIZE); allocations above it are always mapped.
MAX_MMAP_THRESHOLD = 32 * 1024 * 1024
#: Seconds without traffic after which freed memory goes back.
IDLE_TRIM_SECONDS = 30.0


def _glibc(name, argtypes):
    """The C library's ``name``, or None where the library is not glibc.

    The ``mallopt`` parameters and ``malloc_trim`` used here are glibc's.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.gnu_get_libc_version
        function = getattr(libc, name)
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes = argtypes
    function.restype = ctypes.c_int
    return function


def _mallopt():
    return _glibc("mallopt", (ctypes.c_int, ctypes.c_int))


def _malloc_trim():
    return _glibc("malloc_trim", (ctypes.c_size_t,))


def retain_freed(retain_bytes, mallopt=None):
    """Keep up to ``retain_bytes`` of freed memory for reuse.

    Allocations up to ``retain_bytes`` (at most
    :data:`MAX_MMAP_THRESHOLD`) come from the heap.  Returns whether the
    C library took both settings; 0 leaves its own policy.
    """
    if retain_bytes <= 0:
        return False
    mallopt = mallopt or _mallopt()
    if mallopt is None:
        LOG.debug("no glibc mallopt here: freed buffers go back to the "
                  "kernel as the C library decides")
        return False
    threshold = min(retain_bytes, MAX_MMAP_THRESHOLD)
    taken = bool(mallopt(M_MMAP_THRESHOLD, threshold)) and \
        bool(mallopt(M_TRIM_THRESHOLD, retain_bytes))
    if not taken:
        LOG.warning("the C library refused to keep %d bytes of freed "
                    "memory for reuse", retain_bytes)
    return taken


async def trim_when_idle(activity, interval=IDLE_TRIM_SECONDS, trim=None):
    """Hand freed memory back once ``activity()`` stops changing.

    ``activity`` returns a figure that moves with traffic (bytes or
    calls so far).  After each quiet ``interval`` that follows traffic,
    ``malloc_trim`` returns the free pages of the whole heap, those a
    burst's buffers left between live allocations too; while traffic
    goes on, nothing is trimmed and the kept buffers serve it.  Runs
    until cancelled.
    """
    trim = trim or _malloc_trim()
    if trim is None:
        return
    last, trimmed = activity(), True
    while True:
        await asyncio.sleep(interval)
        now = activity()
        if now != last:
            trimmed = False
        elif not trimmed:
            trim(0)
            trimmed = True
        last = now
