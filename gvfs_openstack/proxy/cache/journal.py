# SPDX-License-Identifier: Apache-2.0
"""The write-back journal: acknowledged WRITEs, appended to local disk.

Write-back answers a WRITE once its bytes are in this journal, and a
COMMIT once the journal is durable (``fdatasync``), so the journal is what
stands between an acknowledged byte and its loss.  It is a directory of
append-only segment files ``journal-NNNNNNNN.log``; each record is

    header  magic, header CRC, file offset, data length, data CRC,
            handle length, credential flavor, credential length
    body    file handle, credential body, data

The header CRC covers the header fields and the handle and credential;
the data CRC the data.  Replay after a crash reads every segment in
order: a record whose data fails its CRC is skipped and counted (its bytes
are not written upstream, so corruption is never flushed as data); a
header that fails its CRC ends the segment (a torn tail, or corruption
that makes the rest unreadable), and the bytes after it are counted as
lost.  A restarted proxy never appends to old segments: it starts a new
one, and old segments are deleted once nothing dirty lives in them.
"""

import asyncio
import dataclasses
import errno
import os
import re
import struct
import zlib

from oslo_log import log as logging

from gvfs_openstack.files import durable

LOG = logging.getLogger(__name__)

MAGIC = 0x4A524543  # "JREC"
_HEADER = struct.Struct("<IIQIIHIH")
_CRCS = struct.Struct("<II")
HEADER_SIZE = _HEADER.size
MAX_FH = 64
MAX_CRED = 400
MAX_DATA = 64 * 1024 * 1024
_NAME = re.compile(r"^journal-(\d{8})\.log$")


@dataclasses.dataclass(frozen=True)
class Record:
    """One replayed WRITE: where its data lies in the journal."""

    fh: bytes
    cred: tuple
    offset: int
    length: int
    segment: int
    position: int
    record: int


@dataclasses.dataclass
class ReplayReport:
    records: int = 0
    bytes: int = 0
    corrupt_records: int = 0
    lost_bytes: int = 0


def _segment_path(directory, number):
    return os.path.join(directory, "journal-%08d.log" % number)


class Journal:
    """Append-only segments of WRITE records, with group commit."""

    def __init__(self, directory, segment_size=64 * 1024 * 1024):
        self.directory = directory
        self.segment_size = segment_size
        os.makedirs(directory, mode=0o700, exist_ok=True)
        #: Segment number -> open fd (read-write).
        self._fds = {}
        #: Segment number -> bytes in it.
        self._sizes = {}
        self.active = None
        self._unsynced = set()
        self._appended = 0
        self._synced = 0
        self._syncing = None
        self._next_record = 0

    # --- segments -----------------------------------------------------------

    def _existing(self):
        numbers = []
        for name in os.listdir(self.directory):
            match = _NAME.match(name)
            if match:
                numbers.append(int(match.group(1)))
        return sorted(numbers)

    def _open(self, number, create=False):
        flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
        fd = os.open(_segment_path(self.directory, number), flags, 0o600)
        self._fds[number] = fd
        self._sizes[number] = os.fstat(fd).st_size
        return fd

    def _start_segment(self):
        number = max(self._fds, default=0) + 1
        self._open(number, create=True)
        # The new name must survive a crash as well as its contents.
        durable.fsync_path(self.directory)
        self.active = number

    @property
    def last_record(self):
        """The id of the newest record (ids only grow)."""
        return self._next_record

    @property
    def size(self):
        """Bytes in all segments (what the journal costs on disk)."""
        return sum(self._sizes.values())

    def segments(self):
        return sorted(self._fds)

    # --- replay -------------------------------------------------------------

    def replay(self):
        """Yield every intact record of the existing segments, in order.

        Fills :attr:`report`.  Must run before the first :meth:`append`.
        """
        self.report = ReplayReport()
        for number in self._existing():
            fd = self._open(number)
            yield from self._replay_segment(number, fd)

    def _replay_segment(self, number, fd):
        size = self._sizes[number]
        position = 0
        while position + HEADER_SIZE <= size:
            header = os.pread(fd, HEADER_SIZE, position)
            (magic, header_crc, offset, length, data_crc, fh_len, flavor,
             cred_len) = _HEADER.unpack(header)
            body_at = position + HEADER_SIZE
            if magic != MAGIC or fh_len > MAX_FH or cred_len > MAX_CRED \
                    or length > MAX_DATA:
                break
            ids = os.pread(fd, fh_len + cred_len, body_at)
            if len(ids) != fh_len + cred_len or zlib.crc32(
                    ids, zlib.crc32(header[8:])) != header_crc:
                break
            data_at = body_at + fh_len + cred_len
            if data_at + length > size:
                break
            if self._crc_of(fd, data_at, length) != data_crc:
                self.report.corrupt_records += 1
                LOG.error("write-back journal segment %d: the record at "
                          "%d (%d bytes at offset %d of a file) fails its "
                          "checksum; it is discarded, not flushed", number,
                          position, length, offset)
            else:
                self.report.records += 1
                self.report.bytes += length
                self._next_record += 1
                yield Record(ids[:fh_len], (flavor, ids[fh_len:]), offset,
                             length, number, data_at, self._next_record)
            position = data_at + length
        if position < size:
            self.report.lost_bytes += size - position
            LOG.error("write-back journal segment %d: %d bytes at %d are "
                      "unreadable (torn or corrupt); they are discarded",
                      number, size - position, position)

    @staticmethod
    def _crc_of(fd, position, length):
        crc = 0
        while length:
            chunk = os.pread(fd, min(length, 4 * 1024 * 1024), position)
            if not chunk:
                return None
            crc = zlib.crc32(chunk, crc)
            position += len(chunk)
            length -= len(chunk)
        return crc

    # --- writing ------------------------------------------------------------

    def append(self, fh, cred, offset, data):
        """Append one WRITE; returns ``(segment, data position, record)``.

        Raises OSError (ENOSPC, EIO) if the disk refused it; then the
        journal is as before (a partial record is cut off again).
        """
        fh, (flavor, cred_body) = bytes(fh), cred
        if self.active is None or \
                self._sizes[self.active] >= self.segment_size:
            self._start_segment()
        ids = fh + bytes(cred_body)
        fields = _HEADER.pack(MAGIC, 0, offset, len(data),
                              zlib.crc32(data), len(fh), flavor,
                              len(cred_body))[8:]
        header = _CRCS.pack(MAGIC, zlib.crc32(ids, zlib.crc32(fields))) + \
            fields + ids
        segment = self.active
        position = self._sizes[segment]
        try:
            written = os.pwritev(self._fds[segment], [header, data],
                                 position)
            if written != len(header) + len(data):
                raise OSError(errno.ENOSPC, "short write to the write-back "
                                            "journal")
        except OSError:
            try:
                os.ftruncate(self._fds[segment], position)
            except OSError:
                pass  # The header CRC still rejects the partial record.
            raise
        self._sizes[segment] = position + len(header) + len(data)
        self._unsynced.add(segment)
        self._appended += 1
        self._next_record += 1
        return segment, position + len(header), self._next_record

    def read(self, segment, position, length):
        data = os.pread(self._fds[segment], length, position)
        if len(data) != length:
            raise OSError(errno.EIO, "write-back journal segment %d is "
                                     "shorter than its index says" % segment)
        return data

    async def sync(self):
        """Return once everything appended so far is on stable storage.

        Concurrent callers share one ``fdatasync`` per segment (group
        commit), run in a thread so the proxy keeps serving.
        """
        target = self._appended
        while self._synced < target:
            if self._syncing is None:
                self._syncing = asyncio.ensure_future(self._sync_now())
            await asyncio.shield(self._syncing)

    async def _sync_now(self):
        upto = self._appended
        segments, self._unsynced = self._unsynced, set()
        # Duplicates: a segment deleted meanwhile cannot close the fd
        # under the sync.
        fds = [os.dup(self._fds[s]) for s in segments if s in self._fds]
        try:
            await asyncio.get_running_loop().run_in_executor(
                None, _fdatasync_all, fds)
        except OSError:
            self._unsynced |= segments
            raise
        finally:
            self._syncing = None
        self._synced = max(self._synced, upto)

    def release(self, keep):
        """Delete segments not in ``keep`` (nothing dirty lives there).

        The active segment is kept unless it is empty of live data too, in
        which case it is deleted and the next append starts a new one.
        """
        for number in list(self._fds):
            if number in keep:
                continue
            os.close(self._fds.pop(number))
            del self._sizes[number]
            self._unsynced.discard(number)
            try:
                os.unlink(_segment_path(self.directory, number))
            except FileNotFoundError:
                pass  # Already gone: nothing to free.
            if number == self.active:
                self.active = None

    def close(self):
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        self._sizes.clear()
        self.active = None


def _fdatasync_all(fds):
    try:
        for fd in fds:
            os.fdatasync(fd)
    finally:
        for fd in fds:
            os.close(fd)
