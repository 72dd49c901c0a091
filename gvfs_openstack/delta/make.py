# SPDX-License-Identifier: Apache-2.0
"""Writing a delta on the sending DTN, where the new version is.

The new file's own signature comes from its cache when fresh (made when
it was uploaded or scanned), else from one read of it; after that only
the blocks the base lacks are read again, to be sent.
"""

import dataclasses
import os

from gvfs_openstack.delta import blocks
from gvfs_openstack.delta import codec


@dataclasses.dataclass
class DeltaStats:
    """What a delta holds, in bytes of the new file (and of itself)."""
    size: int = 0
    data_bytes: int = 0
    copied_bytes: int = 0
    zero_bytes: int = 0
    delta_bytes: int = 0

    def as_dict(self):
        return dataclasses.asdict(self)


def make(path, base, output):
    """Write the delta making ``path`` from a base of signature ``base``.

    Written to a temporary name and renamed when whole; returns its
    :class:`DeltaStats`.
    """
    new = blocks.ensure(path)
    runs = codec.plan(new, base)
    stats = DeltaStats(size=new.size)
    trailer = codec.Trailer()
    tmp = "%s.tmp-%d" % (output, os.getpid())
    fd = os.open(path, os.O_RDONLY)
    try:
        with open(tmp, "wb") as out:
            out.write(trailer(codec.header(new.size, base.size)))
            for op, offset, length, base_offset in runs:
                out.write(trailer(codec.record(op, offset, length,
                                               base_offset)))
                if op == codec.DATA:
                    data = os.pread(fd, length, offset)
                    if len(data) != length:
                        raise blocks.SignatureError(
                            "%s shrank while its delta was made" % path)
                    out.write(trailer(data))
                    stats.data_bytes += length
                elif op == codec.COPY:
                    stats.copied_bytes += length
                else:
                    stats.zero_bytes += length
            out.write(trailer.end())
            stats.delta_bytes = out.tell()
        st = os.fstat(fd)
        if not new.matches(st.st_size, st.st_mtime_ns):
            raise blocks.SignatureError("%s changed while its delta was "
                                        "made" % path)
        os.replace(tmp, output)
    except BaseException:
        _remove(tmp)
        raise
    finally:
        os.close(fd)
    return stats


def _remove(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
