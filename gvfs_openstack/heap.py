# SPDX-License-Identifier: Apache-2.0
"""Keeping freed record buffers in the process for the next record.

Every 1 MiB READ reply and WRITE call a proxy relays, and every READ the
FUSE mount answers, lands in a buffer of its own that is freed once the
record has gone on.  With glibc's defaults those buffers never come back
warm: past 128 KiB an allocation is its own ``mmap``, or, once glibc has
raised that threshold, its pages return to the kernel as soon as the
top of the heap holds 128 KiB free.  The next record then takes fresh
pages, which the kernel faults in and zeroes one by one: measured in a
cold 1 GiB read through the mount and both proxies, about a fifth of the
server proxy's and the mount's CPU (0.25-0.45 CPU seconds per GiB a
hop), spent before a byte was copied.

:func:`retain_freed` asks glibc (``mallopt``) to serve allocations up to
``M_MMAP_THRESHOLD`` from the heap and to keep up to
``M_TRIM_THRESHOLD`` bytes of freed memory instead of returning it, so
records reuse pages already mapped.  What it costs is that much memory
held after a burst.  Elsewhere than glibc it does nothing.
"""

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


def _mallopt():
    """glibc's ``mallopt``, or None where the C library has none."""
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # Only glibc's takes these parameters.
    except (OSError, AttributeError, TypeError):
        return None
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return mallopt


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
