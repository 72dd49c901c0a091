# SPDX-License-Identifier: Apache-2.0
"""Writing a delta on the sending DTN, where the new version is.

The new file's own signature comes from its cache when fresh (made when
it was uploaded or scanned), else from one read of it; after that only
the blocks the base lacks are read again, to be sent.
"""

import contextlib
import dataclasses
import os

from gvfs_openstack.delta import blocks
from gvfs_openstack.delta import codec
from gvfs_openstack.files import safe_files


@dataclasses.dataclass
class DeltaStats:
    """What a delta holds, in bytes of the new file (and of itself)."""
    size: int = 0
    data_bytes: int = 0
    copied_bytes: int = 0
    zero_bytes: int = 0
    delta_bytes: int = 0
    #: False when the delta would have been larger than allowed.
    written: bool = True
    #: The identity (hex) of the base's signature it was made against.
    base_identity: str = ""

    def as_dict(self):
        return dataclasses.asdict(self)


def make(path, base, output, max_bytes=None):
    """Write the delta making ``path`` from a base of signature ``base``.

    Written to a temporary name and renamed when whole; returns its
    :class:`DeltaStats`.  A delta that would be larger than ``max_bytes``
    is not written (``written`` False): its size is known from the plan,
    before a byte of the file is read again.
    """
    new = blocks.ensure(path)
    runs = codec.plan(new, base)
    stats = DeltaStats(size=new.size, delta_bytes=codec.delta_size(runs),
                       base_identity=base.identity().hex())
    for op, _, length, _ in runs:
        if op == codec.DATA:
            stats.data_bytes += length
        elif op == codec.COPY:
            stats.copied_bytes += length
        else:
            stats.zero_bytes += length
    if max_bytes is not None and stats.delta_bytes > max_bytes:
        stats.written = False
        return stats
    trailer = codec.Trailer()
    tmp = None
    fd = os.open(path, os.O_RDONLY)
    try:
        # Readable as before by the DTN's GridFTP server, which sends it.
        out_fd, tmp = safe_files.create_temporary(output, 0o644)
        with open(out_fd, "wb") as out:
            out.write(trailer(codec.header(new.size, base.size,
                                           base.identity(),
                                           new.identity())))
            for op, offset, length, base_offset in runs:
                out.write(trailer(codec.record(op, offset, length,
                                               base_offset)))
                if op == codec.DATA:
                    data = os.pread(fd, length, offset)
                    if len(data) != length:
                        raise blocks.SignatureError(
                            "%s shrank while its delta was made" % path)
                    out.write(trailer(data))
            out.write(trailer.end())
        st = os.fstat(fd)
        if not new.matches(st.st_size, st.st_mtime_ns):
            raise blocks.SignatureError("%s changed while its delta was "
                                        "made" % path)
        os.replace(tmp, output)
    except BaseException:
        # Light on purpose (no oslo_utils): gvfs-meta starts per step.
        if tmp is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        raise
    finally:
        os.close(fd)
    return stats
