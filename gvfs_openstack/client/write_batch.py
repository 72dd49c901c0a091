# SPDX-License-Identifier: Apache-2.0
"""UNSTABLE WRITEs in a window, then one COMMIT (RFC 1813 section 3.3.7).

A server may keep UNSTABLE data in memory until a COMMIT; if it restarts
in between, the data is lost and its write verifier changes.  So every
byte since the last good COMMIT is kept (or kept where it can be read
again) and sent again when the COMMIT's verifier is not the one every
WRITE of the batch returned.

One implementation for every writer: the NFS client (``write_file``, the
FUSE mount, image migration) and the client proxy's write-back flush.
They differ only in how one WRITE and one COMMIT go to the server, which
the batch asks of its ``client``:

* ``client.window``: how many WRITEs to keep in flight;
* ``send(fh, offset, data)`` (``client.write_all`` unless given): UNSTABLE
  WRITE of ``data``, returning an ``nfs3.WriteOk``; if its count is
  short, the batch sends the rest;
* ``client.commit(fh)``: one COMMIT, returning its verifier.
"""

import asyncio

from oslo_log import log as logging

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import NfsError

LOG = logging.getLogger(__name__)


class WriteNotTaken(NfsError):
    """The server answered a WRITE with a count of 0: it will not progress."""

    def __init__(self):
        super().__init__(const.NfsStat.NFS3ERR_IO, "WRITE",
                         "server accepted 0 bytes")


class VerifierKeptChanging(NfsError):
    """COMMIT after COMMIT found another verifier: nothing is committed."""

    def __init__(self):
        super().__init__(const.NfsStat.NFS3ERR_IO, "COMMIT",
                         "write verifier kept changing; data not committed")


class WriteBatch:
    """UNSTABLE writes since the last COMMIT, kept until it succeeds.

    A server gives no order between calls in flight, so a WRITE waits
    for the ones in flight over its bytes (else the older bytes could
    land last) and a READ of them should wait too (see :meth:`settle`).
    WRITEs to other bytes go in parallel, up to the client's window --
    also when everything is sent again at once (:meth:`resend`).
    """

    MAX_COMMIT_RETRIES = 3

    def __init__(self, client, fh, send=None):
        self.client = client
        self.fh = fh
        #: ``send(fh, offset, data)`` -> ``WriteOk``: ``client.write_all``,
        #: ``client.bulk_write`` for compressed chunks, or one WRITE.
        self.send = send or client.write_all
        #: ``(offset, data, length)`` of every write since the last COMMIT.
        self.sent = []
        self.size = 0
        #: The WRITE tasks not yet seen finished: task -> (start, end).
        self.inflight = {}
        self.verifiers = set()
        self.resent_bytes = 0
        self._window = asyncio.Semaphore(client.window)

    def _overlapping(self, start, end):
        return [task for task, (first, last) in self.inflight.items()
                if first < end and start < last and not task.done()]

    async def _one(self, offset, data, after):
        if after:
            # Their failure is theirs to report; these bytes go anyway
            # (and go again with them if the batch is re-sent).
            await asyncio.wait(after)
        async with self._window:
            rest = data() if callable(data) else data
            while True:
                ok = await self.send(self.fh, offset, rest)
                self.verifiers.add(ok.verf)
                if ok.count >= len(rest):
                    return
                if ok.count == 0:
                    raise WriteNotTaken()
                offset, rest = offset + ok.count, memoryview(rest)[ok.count:]

    def _launch(self, offset, data, length):
        end = offset + length
        task = asyncio.ensure_future(
            self._one(offset, data, self._overlapping(offset, end)))
        self.inflight[task] = (offset, end)

    async def add(self, offset, data, length=None):
        """Send ``data`` at ``offset``; wait while the window is full.

        ``data`` is the bytes, or a function returning them called each
        time they are sent (then ``length`` says how many there are):
        bytes that can be read again, from a journal, need not stay in
        memory until the COMMIT.  Raises what a finished WRITE raised.
        """
        if length is None:
            length = len(data)
        self.sent.append((offset, data, length))
        self.size += length
        self._launch(offset, data, length)
        if len(self.inflight) >= self.client.window:
            done, _ = await asyncio.wait(
                self.inflight, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                del self.inflight[task]
            _raise_first(done)

    async def settle(self, start, end):
        """Wait for the WRITEs in flight over [start, end).

        A READ of those bytes sent before their replies came could be
        answered with what was there before them.  Raises what they
        raised.
        """
        overlapping = self._overlapping(start, end)
        if overlapping:
            await asyncio.wait(overlapping)
            for task in overlapping:
                task.result()

    def resend(self):
        """Send again everything since the last good COMMIT.

        The server may have lost it, or the connection went away under it.
        In the order first sent, so later bytes still land last.
        """
        self.abandon()
        self.resent_bytes += self.size
        self.verifiers = set()
        for offset, data, length in self.sent:
            self._launch(offset, data, length)

    def abandon(self):
        """Stop the WRITEs in flight; what was sent stays in the batch."""
        for task in self.inflight:
            if task.done() and not task.cancelled():
                task.exception()    # seen: it is being replaced
            task.cancel()
        self.inflight = {}

    async def _drain(self):
        # gather: a COMMIT cancelled here cancels its WRITEs too, which
        # go again with the next :meth:`resend`.
        inflight, self.inflight = self.inflight, {}
        results = await asyncio.gather(*inflight, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result

    async def commit(self):
        """Wait for every WRITE, then COMMIT; re-send on a new verifier.

        Raises :class:`VerifierKeptChanging` after
        ``MAX_COMMIT_RETRIES`` COMMITs that each found a new verifier,
        and what a WRITE or the COMMIT raised.
        """
        for _ in range(self.MAX_COMMIT_RETRIES):
            await self._drain()
            if not self.sent:
                return
            verf = await self.client.commit(self.fh)
            if self.verifiers == {verf}:
                self.sent, self.size, self.verifiers = [], 0, set()
                return
            # The server restarted between WRITE and COMMIT: re-send.
            LOG.warning("write verifier changed before COMMIT (server "
                        "restart?): re-sending %d bytes", self.size)
            self.resend()
        raise VerifierKeptChanging()


def _raise_first(tasks):
    """Raise the first failure of finished ``tasks``, having seen all."""
    errors = [task.exception() for task in tasks if not task.cancelled()]
    for error in errors:
        if error is not None:
            raise error
