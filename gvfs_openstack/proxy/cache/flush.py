# SPDX-License-Identifier: Apache-2.0
"""Writing one file's dirty bytes upstream, as an NFS client would.

The bytes come from the journal, in runs contiguous in the file of up to
``wsize`` bytes, as UNSTABLE WRITEs with ``window`` of them in flight,
then one COMMIT; if the server's verifier changed in between (it
restarted and may have lost unstable data) everything is sent again:
the NFS client's :class:`~gvfs_openstack.client.write_batch.WriteBatch`,
with the file's last writer's credential.  A run is read from the
journal each time it is sent, so memory stays at ``window`` runs
whatever the file's size.
"""

import functools

from gvfs_openstack.client.write_batch import WriteBatch
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.const import NfsStat
from gvfs_openstack.nfs.const import StableHow
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.upstream_calls import ReplyError

#: Upstream answers meaning the file is gone: its dirty bytes have
#: nowhere to go (the client removed it).
GONE = frozenset({NfsStat.NFS3ERR_STALE, NfsStat.NFS3ERR_BADHANDLE})


class FlushError(Exception):
    """Dirty bytes could not be written upstream; they stay journalled."""


class Gone(Exception):
    """The server no longer knows the file."""


def _runs(extents, limit):
    """Group extents into runs contiguous in the file.

    A run holds ``limit`` bytes at most (an extent larger than the limit
    is a run of its own).
    """
    run, size = [], 0
    for extent in extents:
        if run and (extent.offset != run[-1].end or
                    size + extent.length > limit):
            yield run
            run, size = [], 0
        run.append(extent)
        size += extent.length
    if run:
        yield run


class _AsWriter:
    """WRITE and COMMIT upstream as the file's last writer.

    The :class:`WriteBatch`'s client; keeps the last COMMIT's result,
    whose attributes write-back learns the file's new size from.
    """

    def __init__(self, upstream, cred, window):
        self.upstream = upstream
        self.cred = cred
        self.window = window
        #: ``nfs3.CommitOk`` of the last COMMIT.
        self.committed = None

    async def write(self, fh, offset, data):
        return await self._call(Nfs3Proc.WRITE, nfs3.WriteArgs(
            fh, offset, len(data), StableHow.UNSTABLE, data))

    async def commit(self, fh):
        self.committed = await self._call(Nfs3Proc.COMMIT,
                                          nfs3.CommitArgs(fh, 0, 0))
        return self.committed.verf

    async def _call(self, proc, args):
        try:
            res = await self.upstream.nfs(proc, args, self.cred)
        except ReplyError as e:
            raise FlushError(str(e)) from e
        if res.status in GONE:
            raise Gone()
        if not res.ok:
            raise FlushError("%s: %s" % (proc.name,
                                         const.status_name(res.status)))
        return res.body


class FileWriter:
    """Writes one file's dirty extents upstream from the journal."""

    def __init__(self, journal, upstream, wsize, window):
        self.journal = journal
        #: The :class:`UpstreamCalls` of the next hop.
        self.upstream = upstream
        self.wsize = wsize
        self.window = window

    async def send(self, dirty, extents):
        """UNSTABLE WRITEs of ``extents`` in a window, then COMMIT.

        Returns the COMMIT's ``nfs3.CommitOk``.  Raises :class:`Gone`, or
        :class:`FlushError` for anything else that kept the bytes from
        being committed.
        """
        writer = _AsWriter(self.upstream, rpc.OpaqueAuth(*dirty.cred),
                           self.window)
        batch = WriteBatch(writer, dirty.fh, writer.write)
        try:
            for run in _runs(extents, self.wsize):
                await batch.add(run[0].offset,
                                functools.partial(self._load, run),
                                sum(e.length for e in run))
            await batch.commit()
        except NfsError as e:
            raise FlushError(str(e)) from e
        finally:
            batch.abandon()  # Nothing in flight once committed.
        return writer.committed

    def _load(self, run):
        """The bytes of a run, read from the journal when sent."""
        return b"".join(self.journal.read(e.segment, e.position, e.length)
                        for e in run)
