# SPDX-License-Identifier: Apache-2.0
"""Writing one file's dirty bytes upstream, as an NFS client would.

The bytes come from the journal, in runs contiguous in the file of up to
``wsize`` bytes, as UNSTABLE WRITEs with ``window`` of them in flight,
then one COMMIT; if the server's verifier changed in between (it
restarted and may have lost unstable data) everything is sent again.
Memory stays at ``window`` runs whatever the file's size.
"""

import asyncio

from oslo_log import log as logging

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.const import NfsStat
from gvfs_openstack.nfs.const import StableHow
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.cache.reads import Fallback

LOG = logging.getLogger(__name__)

#: Upstream answers meaning the file is gone: its dirty bytes have
#: nowhere to go (the client removed it).
_GONE = frozenset({NfsStat.NFS3ERR_STALE, NfsStat.NFS3ERR_BADHANDLE})
MAX_COMMIT_RETRIES = 3


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


class Sender:
    def __init__(self, journal, reads, wsize, window):
        self.journal = journal
        self.reads = reads
        self.wsize = wsize
        self.window = window

    async def send(self, dirty, extents):
        """UNSTABLE WRITEs of ``extents`` in a window, then COMMIT.

        Everything is sent again if the server's verifier changed in
        between (it restarted and may have lost unstable data).
        """
        call = rpc.Call(0, const.NFS_PROGRAM, const.NFS_V3, Nfs3Proc.WRITE,
                        rpc.OpaqueAuth(*dirty.cred))
        runs = list(_runs(extents, self.wsize))
        for _ in range(MAX_COMMIT_RETRIES):
            verifiers = set()
            window = asyncio.Semaphore(self.window)
            results = await asyncio.gather(
                *(self._write_run(call, dirty.fh, run, window, verifiers)
                  for run in runs), return_exceptions=True)
            for result in results:
                if isinstance(result, BaseException):
                    raise result
            res = await self._upstream(call, Nfs3Proc.COMMIT,
                                       nfs3.CommitArgs(dirty.fh, 0, 0))
            if verifiers == {res.verf}:
                return res
            LOG.warning("server write verifier changed before COMMIT "
                        "(restart?): writing the file back again")
        raise FlushError("the server's write verifier kept changing")

    async def _write_run(self, call, fh, run, window, verifiers):
        async with window:
            offset = run[0].offset
            data = memoryview(b"".join(
                self.journal.read(e.segment, e.position, e.length)
                for e in run))
            while data:
                res = await self._upstream(call, Nfs3Proc.WRITE,
                                           nfs3.WriteArgs(
                                               fh, offset, len(data),
                                               StableHow.UNSTABLE, data))
                if res.count == 0:
                    raise FlushError("the server accepted 0 bytes")
                verifiers.add(res.verf)
                offset, data = offset + res.count, data[res.count:]

    async def _upstream(self, call, proc, args):
        try:
            res = await self.reads.upstream(call, proc, args)
        except Fallback:
            raise FlushError("%s refused upstream" % proc.name) from None
        if res.status in _GONE:
            raise Gone()
        if not res.ok:
            raise FlushError("%s: %s" % (proc.name,
                                         const.status_name(res.status)))
        return res.body
