# SPDX-License-Identifier: Apache-2.0
"""UNSTABLE WRITEs answered once they are on their way upstream.

An NFSv3 server may answer an UNSTABLE WRITE before its data is on stable
storage: the client keeps its copy until a COMMIT answers with the write
verifier its WRITEs got, and sends them again when the verifier changed
(RFC 1813, sections 3.3.7 and 3.3.21).  A client with one call in flight
(``nfs-cp``, one writer in a guest) otherwise waits for every WRITE to
cross every hop and the server, one at a time; answered here, its WRITEs
stream upstream back to back, up to ``window`` bytes in flight.

The contract holds one hop further:

* A COMMIT, and every other call that names the file, waits until the
  file's WRITEs in flight are answered upstream: nobody reads around them.
  A WRITE overlapping one still in flight waits for it as well, so that
  the server applies the two in order.
* A WRITE that fails upstream is not lost silently.  The file's next
  COMMIT answers NFS3ERR_IO (a client reports it at ``fsync``/``close``),
  the proxy's write verifier changes (a client that checks it sends its
  uncommitted WRITEs again), and until a COMMIT of the file succeeds its
  WRITEs go through one by one, so that their own errors reach the client.
* Every WRITE and COMMIT reply carries the proxy's verifier, made from the
  server's, a random number drawn when the proxy starts and the count of
  failures: a restarted server, a restarted proxy (whose WRITEs in flight
  died with it) and a failed WRITE each change it.
"""

import asyncio
import collections
import dataclasses
import hashlib
import os

from oslo_log import log as logging

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.nfs.xdr import Unpacker
from gvfs_openstack.proxy import counters as proxy_counters

LOG = logging.getLogger(__name__)

_WRITE = const.Nfs3Proc.WRITE
_COMMIT = const.Nfs3Proc.COMMIT


class WriteHead(collections.namedtuple(
        "WriteHead", "file offset count stable data_length")):
    """What a WRITE's arguments say before its data."""


def write_head(args):
    """The :class:`WriteHead` of WRITE3args bytes (ProtocolError).

    Reads only the first few dozen bytes: the data is not copied.  The
    head of a record shorter than its data says has a ``data_length`` of
    -1: the server must answer that one (GARBAGE_ARGS).
    """
    u = Unpacker(args)
    head = WriteHead(u.unpack_opaque(const.NFS3_FHSIZE), u.unpack_uhyper(),
                     u.unpack_uint(), u.unpack_uint(), u.unpack_uint())
    if u.remaining() < head.data_length:
        return head._replace(data_length=-1)
    return head


class _InFlight:
    """One answered WRITE on its way upstream."""

    __slots__ = ("offset", "end", "done")

    def __init__(self, offset, end):
        self.offset = offset
        self.end = end
        self.done = asyncio.Event()


class WriteBehind:
    """The WRITEs answered ahead of the server, per file handle."""

    def __init__(self, window_bytes, counters=None, epoch=None):
        self.window = window_bytes
        self.counters = counters or proxy_counters.WriteBehindCounters()
        #: Drawn anew at every start: what was in flight in a proxy that
        #: died is gone, and the clients must send it again.
        self.epoch = epoch if epoch is not None else os.urandom(8)
        #: The server's write verifier, from its latest WRITE or COMMIT.
        self.server_verf = None
        #: WRITEs answered early that failed upstream, in this run.
        self.failures = 0
        self.bytes_in_flight = 0
        self._in_flight = {}
        #: fh -> the status of its first WRITE that failed upstream, until
        #: a COMMIT has said so.
        self._failed = {}
        #: Files whose failure a COMMIT reported; cleared by the next
        #: COMMIT that succeeds.
        self._reported = set()
        #: Set (and replaced) each time a WRITE in flight is answered.
        self._progress = asyncio.Event()

    # --- what may be answered early -------------------------------------

    def verifier(self, server_verf):
        """The proxy's verifier over ``server_verf``."""
        return hashlib.blake2b(
            self.epoch + bytes(server_verf) +
            self.failures.to_bytes(8, "big"), digest_size=8).digest()

    def eligible(self, head):
        """Whether the WRITE ``head`` may ever be answered early.

        Only whole UNSTABLE WRITEs, once the server's verifier is known
        (the first WRITE goes through), of files without a failure to
        report.
        """
        return head.stable == const.StableHow.UNSTABLE and \
            head.count == head.data_length and \
            self.server_verf is not None and \
            head.file not in self._failed and \
            head.file not in self._reported

    def fits(self, count):
        return not self.bytes_in_flight or \
            self.bytes_in_flight + count <= self.window

    def takes(self, head):
        """Whether the WRITE ``head`` may be answered now."""
        return self.eligible(head) and self.fits(head.count) and \
            not self.overlaps(head.file, head.offset, head.count)

    def overlaps(self, fh, offset, count):
        return bool(self._overlapping(fh, offset, count))

    def _overlapping(self, fh, offset, count):
        end = offset + max(count, 1)
        return [w for w in self._in_flight.get(fh, ())
                if w.offset < end and offset < w.end]

    # --- the life of an answered WRITE ----------------------------------

    def start(self, head):
        """Count ``head`` in flight; the early reply's result bytes.

        The caller sends the WRITE upstream and calls :meth:`finished`
        with its reply whatever happens.
        """
        write = _InFlight(head.offset, head.offset + head.count)
        self._in_flight.setdefault(head.file, []).append(write)
        self.bytes_in_flight += head.count
        self.counters.write_behind_answered += 1
        self.counters.write_behind_bytes += head.count
        result = nfs3.encode_res(_WRITE, nfs3.Result(0, nfs3.WriteOk(
            nfs3.WccData(), head.count, const.StableHow.UNSTABLE,
            self.verifier(self.server_verf))))
        return write, result

    def finished(self, head, write, reply):
        """The upstream ``reply`` (or None: none came) of an early WRITE."""
        status = self._status(reply, head.count)
        if status != 0:
            self.fail(head.file, status)
        writes = self._in_flight.get(head.file, [])
        if write in writes:
            writes.remove(write)
            if not writes:
                del self._in_flight[head.file]
        self.bytes_in_flight -= head.count
        write.done.set()
        progress, self._progress = self._progress, asyncio.Event()
        progress.set()

    def _status(self, reply, count):
        """NFS status of a WRITE reply; the server's verifier is noted.

        A server that took fewer than the ``count`` bytes the client was
        told it took failed it as much as one that took none.
        """
        if reply is None:
            return const.NfsStat.NFS3ERR_IO
        try:
            results = rpc.results_of(reply)
            if results is None:
                return const.NfsStat.NFS3ERR_IO
            res = nfs3.decode_res(_WRITE, results)
        except Exception:  # Garbled: as good as lost.
            return const.NfsStat.NFS3ERR_IO
        if not res.ok:
            return res.status
        self.server_verf = res.body.verf
        return 0 if res.body.count >= count else const.NfsStat.NFS3ERR_IO

    def fail(self, fh, status):
        """A WRITE answered early did not make it: tell the client."""
        if fh not in self._failed:
            self._failed[fh] = status
        self.failures += 1
        self.counters.write_behind_failed += 1
        LOG.warning("a WRITE answered before the server got it failed "
                    "there (%s): the file's next COMMIT reports it and the "
                    "write verifier changed", const.status_name(status))

    async def settle(self, fhs):
        """Wait until the WRITEs to ``fhs`` in flight now are answered.

        Not those answered meanwhile: a file written without a pause
        would keep a COMMIT (or a ``stat``) waiting for ever.
        """
        for write in [w for fh in fhs for w in self._in_flight.get(fh, ())]:
            await write.done.wait()

    async def settle_overlapping(self, fh, offset, count):
        """Wait until no WRITE in flight overlaps ``[offset, +count)``."""
        while True:
            overlapping = self._overlapping(fh, offset, count)
            if not overlapping:
                return
            await overlapping[0].done.wait()

    async def room(self, count):
        """Wait until ``count`` more bytes fit in the window."""
        while not self.fits(count):
            await self._progress.wait()

    async def drain(self, timeout):
        """Wait up to ``timeout`` s for every WRITE in flight; True if done.

        At a clean shutdown: what is still in flight after it dies with
        the proxy, and its clients send it again (a new epoch).
        """
        try:
            await asyncio.wait_for(self.settle(list(self._in_flight)),
                                   timeout)
            # Nothing new comes in once the listener is closed.
        except asyncio.TimeoutError:
            return False
        return True

    @property
    def idle(self):
        return not self._in_flight

    # --- replies that went through ----------------------------------------

    def patch_reply(self, proc, fh, reply, program=nfs3):
        """A forwarded WRITE or COMMIT reply as the client must see it.

        The verifier becomes the proxy's; a COMMIT of a file whose early
        WRITE failed answers NFS3ERR_IO.  ``program`` is the module of
        the call's codecs (:mod:`nfs3`, or :mod:`bulk` for its WRITE,
        whose result is a WRITE3 result).
        """
        try:
            results = rpc.results_of(reply)
            if results is None:
                return reply
            res = program.decode_res(proc, results)
        except Exception:
            return reply  # The client judges it as the server sent it.
        xid = rpc.read_xid(reply)
        if proc == _COMMIT:
            if fh in self._failed:
                del self._failed[fh]
                self._reported.add(fh)
                self.counters.write_behind_commits_failed += 1
                wcc = res.body.file_wcc if res.ok else res.body.obj_wcc
                return rpc.accepted(xid, const.AcceptStat.SUCCESS,
                                    nfs3.encode_res(_COMMIT, nfs3.Result(
                                        const.NfsStat.NFS3ERR_IO,
                                        nfs3.WccBody(wcc))))
            if res.ok:
                self._reported.discard(fh)
        if not res.ok:
            return reply
        self.server_verf = res.body.verf
        body = dataclasses.replace(res.body,
                                   verf=self.verifier(res.body.verf))
        return rpc.accepted(xid, const.AcceptStat.SUCCESS,
                            program.encode_res(proc, nfs3.Result(0, body)))
