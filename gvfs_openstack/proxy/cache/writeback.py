# SPDX-License-Identifier: Apache-2.0
"""Write-back: WRITEs answered from a local journal, sent upstream later.

Over a WAN every WRITE costs a round trip and the link's bandwidth; on an
export whose policy is write-back the client proxy answers it as soon as
the bytes are in the :class:`Journal` on local disk (GVFS paper, section
3.2.1).  The rules that keep this from losing or hiding data:

* COMMIT (and a WRITE asking for DATA_SYNC/FILE_SYNC) is answered only
  once the journal is on stable storage.
* The write verifier is new in every proxy process.  A client holding
  UNSTABLE writes that a crash could have lost sees it change at its next
  COMMIT and sends them again, as it would to a rebooted server.
* READ and GETATTR of a file with dirty bytes are answered here, with the
  dirty bytes laid over the server's and the size they imply; a SETATTR
  first flushes the file (a truncate must not be undone by a later flush).
  Every other reply that carries the file's attributes (LOOKUP, ACCESS,
  LINK, CREATE, READDIRPLUS, ...) is rewritten to show the same.
* The rest of those attributes (nlink, mode, owner) are the server's, as
  it last reported them.  A REMOVE, RENAME or LINK may change them (or
  remove the file) without saying which file it touched, so after one the
  server is asked again before a dirty file is shown; a file it no longer
  knows (STALE) was removed: its dirty bytes are dropped and its handle
  is answered by the server, as it would be without write-back.
* Dirty bytes go upstream (UNSTABLE WRITEs in a window, then COMMIT, sent
  again if the server's verifier changed) on request, when the proxy has
  been idle, when the journal grows past a threshold, and at a clean
  shutdown; after a crash the journal is replayed and flushed.  The
  :class:`~gvfs_openstack.proxy.cache.flusher.Flusher` does that.
* When the journal's disk is full or the journal reaches its limit, WRITEs
  fall back to write-through (FILE_SYNC upstream), replacing whatever
  older dirty bytes they cover: the client's data is never refused for
  want of local disk.
"""

import asyncio
import contextlib
import dataclasses
import os
import time

from oslo_log import log as logging

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.const import NfsStat
from gvfs_openstack.nfs.const import StableHow
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.cache.dirty import DirtyMap
from gvfs_openstack.proxy.cache.dirty import Extent
from gvfs_openstack.proxy.cache import flush as flush_mod
from gvfs_openstack.proxy.cache.flush import FlushError
from gvfs_openstack.proxy.cache.flusher import Flusher
from gvfs_openstack.proxy.cache import postop
from gvfs_openstack.proxy.cache.reads import read_reply
from gvfs_openstack.proxy.upstream import UpstreamError
from gvfs_openstack.proxy.upstream_calls import CallRefused
from gvfs_openstack.proxy.upstream_calls import ReplyError

LOG = logging.getLogger(__name__)

_HANDLED = frozenset({Nfs3Proc.WRITE, Nfs3Proc.COMMIT, Nfs3Proc.READ,
                      Nfs3Proc.GETATTR, Nfs3Proc.SETATTR, Nfs3Proc.CREATE})

#: Calls that may change a file's nlink (to 0: removed) and ctime, with
#: no reply saying which file (LINK's does, but the cache's record of
#: other files must be doubted all the same).  RMDIR removes directories
#: only, which are never dirty.
_NAMESPACE = frozenset({Nfs3Proc.REMOVE, Nfs3Proc.RENAME, Nfs3Proc.LINK})


def _reply(xid, proc, result):
    return rpc.accepted(xid, results=nfs3.encode_res(proc, result))


def _result(proc, reply):
    """The decoded result of a reply message, None if it has none."""
    try:
        results = rpc.results_of(reply)
        if results is None:
            return None
        return nfs3.decode_res(proc, results)
    except ProtocolError:
        return None


def _ok_result(proc, reply):
    """The decoded result of a successful reply message, else None."""
    res = _result(proc, reply)
    return res if res is not None and res.ok else None


def _time_key(when):
    return when.seconds, when.nseconds


def _ctime(fattr):
    return _time_key(fattr.ctime)


def _wcc_attr(fattr):
    return nfs3.WccAttr(fattr.size, fattr.mtime, fattr.ctime)


@dataclasses.dataclass(frozen=True)
class WriteBackLimits:
    """How much the write-back holds, and how it writes upstream.

    ``max_bytes``: the journal's most (a WRITE that would pass it waits
    for a flush); ``flush_bytes``: a flush starts at this much;
    ``idle_seconds``: and after this long without WRITEs (0: never);
    ``wsize`` and ``window``: each WRITE upstream, and how many are in
    flight; ``max_read``: the most one READ of a dirty file is answered
    with.
    """

    max_bytes: int
    flush_bytes: int
    idle_seconds: float
    wsize: int = 1024 * 1024
    window: int = 16
    max_read: int = 1024 * 1024


class WriteBack:
    """Answers WRITE and COMMIT of written-back files from the journal.

    ``fetcher`` is the :class:`Fetcher` the server's bytes and
    attributes come from, ``files`` the :class:`FileStates` it shares,
    ``upstream`` the :class:`UpstreamCalls` of the
    next hop, ``policies`` the :class:`ExportPolicies` that say which
    files are written back, ``observer`` the :class:`ReplyObserver` told
    of the WRITEs written through; ``limits`` its
    :class:`WriteBackLimits`.  Its :attr:`flusher` sends the dirty bytes
    upstream, and calls back the methods under "what the flusher asks
    and tells".
    """

    def __init__(self, journal, fetcher, files, upstream, policies,
                 observer, counters, limits, clock=time.monotonic):
        self.journal = journal
        self.fetcher = fetcher
        self.files = files
        self.upstream = upstream
        self.policies = policies
        self.observer = observer
        #: :class:`counters.WritebackCounters`
        self.counters = counters
        self.max_bytes = limits.max_bytes
        self.flush_bytes = limits.flush_bytes
        self.max_read = limits.max_read
        self.dirty = DirtyMap()
        #: New in every process: see the module docstring.
        self.verifier = os.urandom(const.NFS3_WRITEVERFSIZE)
        #: fh -> [lock, users]: a flush of a file excludes write-through
        #: WRITEs, SETATTRs and partly dirty READs of it.
        self._locks = {}
        #: The server's attributes of dirty files, as it last reported
        #: them since the last REMOVE, RENAME or LINK.
        self._bases = {}
        #: When (by the file states' clock) the last REMOVE, RENAME or
        #: LINK was answered: attributes the cache had before are doubted.
        self._changed_at = float("-inf")
        self._falling_back = False
        self.flusher = Flusher(journal, self.dirty, self, upstream, counters,
                               limits, clock)

    # --- start and stop ------------------------------------------------------

    def replay(self):
        """Rebuild the dirty map from the journal left by the last run."""
        for record in self.journal.replay():
            self.dirty.add(record.fh, record.cred, Extent(
                record.offset, record.length, record.segment,
                record.position, record.record), time.time_ns())
        report = self.journal.report
        self.counters.journal_replayed_records += report.records
        self.counters.journal_replayed_bytes += report.bytes
        self.counters.journal_corrupt_records += report.corrupt_records
        self.counters.journal_lost_bytes += report.lost_bytes
        if report.records:
            LOG.info("write-back journal replayed: %d writes, %d dirty "
                     "bytes in %d files to write back", report.records,
                     self.dirty.dirty_bytes, len(self.dirty))
        self.journal.release(self.dirty.segments())

    def start(self):
        self.flusher.start()

    async def close(self, timeout):
        """Flush for at most ``timeout`` seconds, then close the journal.

        Whatever is still dirty stays in the journal for the next start.
        """
        await self.flusher.stop(timeout)
        self.journal.close()

    # --- flushing, which the flusher does ---------------------------------

    def start_flush(self, reason):
        """Flush in the background (errors are logged, data stays)."""
        self.flusher.start_flush(reason)

    async def flush(self):
        """Write every byte dirty now upstream; returns what was done.

        Raises FlushError if some could not be (they stay journalled).
        """
        return await self.flusher.flush()

    # --- which calls are ours ----------------------------------------------

    def takes(self, fh):
        """Whether WRITE and COMMIT of ``fh`` are answered here."""
        return fh in self.dirty or self.policies.writes_back(fh)

    def relays(self, fh):
        """Whether a WRITE to ``fh`` may go upstream while it arrives.

        Only when it is not written back.
        """
        return not self.takes(fh)

    async def handle(self, call):
        """The reply to ``call`` if write-back answers it, else None."""
        if call.proc not in _HANDLED or (
                not self.dirty and call.proc not in (Nfs3Proc.WRITE,
                                                     Nfs3Proc.COMMIT)):
            return None
        try:
            args = nfs3.decode_args(call.proc, call.args)
        except ProtocolError:
            return None  # Forwarded: the server answers GARBAGE_ARGS.
        if call.proc == Nfs3Proc.WRITE:
            return await self._write(call, args)
        if call.proc == Nfs3Proc.COMMIT:
            return await self._commit(call, args)
        if call.proc == Nfs3Proc.CREATE:
            return await self._before_create(call, args)
        fh = bytes(args.file if call.proc == Nfs3Proc.READ else
                   args.object)
        if fh not in self.dirty:
            return None
        if call.proc == Nfs3Proc.READ:
            return await self._read(call, args, fh)
        if call.proc == Nfs3Proc.GETATTR:
            shown = await self.shown_attrs(call, fh)
            if shown is None:
                return None
            return _reply(call.xid, call.proc,
                          nfs3.Result(0, nfs3.GetattrOk(shown)))
        # SETATTR: the server must see the dirty bytes before it.
        try:
            await self.flusher.flush_file(fh)
        except (FlushError, UpstreamError) as e:
            LOG.warning("SETATTR of a dirty file refused: %s", e)
            return _reply(call.xid, call.proc, nfs3.Result(
                NfsStat.NFS3ERR_IO, nfs3.WccData()))
        return None

    # --- attributes ----------------------------------------------------------

    async def _base(self, call, fh):
        """The server's attributes of ``fh`` (None if it cannot say).

        None too if the server no longer knows the file: then its dirty
        bytes are dropped, and the call is forwarded for the server to
        say so.
        """
        base = self._bases.get(fh)
        if base is not None:
            return base
        state = self.fetcher.trusted(fh)
        if state is not None and state.checked > self._changed_at:
            base = state.fattr
        else:
            status, base = await self._ask(fh, call.cred, call.verf)
            if status in flush_mod.GONE:
                self.drop_removed(fh)
            if base is None:
                return None
        if fh in self.dirty:
            self._bases[fh] = base
        return base

    async def _ask(self, fh, cred, verf=rpc.AUTH_NONE):
        """``(status, attributes)`` of ``fh`` from a GETATTR upstream.

        ``(None, None)`` if the next hop refused the call.
        """
        reports = self.files.reports_of(fh)
        try:
            res = await self.upstream.nfs(
                Nfs3Proc.GETATTR, nfs3.GetattrArgs(fh), cred, verf)
        except ReplyError as e:
            LOG.warning("cannot learn the attributes of a written-back "
                        "file: %s", e)
            return None, None
        if not res.ok:
            return res.status, None
        self.files.observe(fh, res.body.obj_attributes, reports)
        return res.status, res.body.obj_attributes

    def _learn(self, fh, fattr):
        """The server reported ``fattr`` for ``fh``; the newest known.

        Replies to calls in flight together arrive in any order: those
        older (by ctime) than what is known change nothing, and the size
        never goes back while the file is dirty here (a truncate writes
        the file back first, so it cannot be what shrank it).
        """
        if fattr is None or fh not in self.dirty:
            return fattr
        known = self._bases.get(fh)
        if known is not None:
            if _ctime(fattr) < _ctime(known):
                return known
            if known.size > fattr.size:
                fattr = dataclasses.replace(fattr, size=known.size)
        self._bases[fh] = fattr
        return fattr

    def _shown(self, fh, base):
        dirty = self.dirty.get(fh)
        if not dirty:
            return base
        size = max(base.size, dirty.end)
        when = nfs3.NfsTime(dirty.written_ns // 10 ** 9,
                            dirty.written_ns % 10 ** 9)
        # Never before what the server says (a LINK after the WRITE
        # moved its ctime on): times a client compares only go forward.
        return dataclasses.replace(
            base, size=size, used=max(base.used, size),
            mtime=max(when, base.mtime, key=_time_key),
            ctime=max(when, base.ctime, key=_time_key))

    async def shown_attrs(self, call, fh):
        """Attributes of ``fh`` as clients must see them: dirty bytes
        included."""
        base = await self._base(call, fh)
        return None if base is None else self._shown(fh, base)

    def _as_shown(self, fh, fattr):
        """The server's ``fattr`` of ``fh`` as clients must see it."""
        if fh not in self.dirty:
            return fattr
        return self._shown(fh, self._learn(fh, fattr))

    def patch_reply(self, call, reply):
        """``reply`` (forwarded) with dirty files' attributes as shown.

        Every reply that carries the server's attributes of a file with
        dirty bytes here shows them as GETATTR does: a client must not
        see such a file shrink back to its size upstream.  They are the
        server's newest word on the rest (nlink after a LINK ...).
        """
        if call.proc in _NAMESPACE:
            self._namespace_changed(call, reply)
        if not self.dirty or call.proc not in postop.CARRYING:
            return reply
        res = _ok_result(call.proc, reply)
        if res is None:
            return reply
        try:
            args = nfs3.decode_args(call.proc, call.args)
        except ProtocolError:
            return reply
        body = postop.rewrite(call.proc, args, res.body, self._as_shown)
        if body is res.body:
            return reply
        return _reply(call.xid, call.proc, nfs3.Result(0, body))

    def _namespace_changed(self, call, reply):
        """A REMOVE, RENAME or LINK was answered.

        It may have taken a link from any file (its last: the file is
        gone), and the reply does not say which: every file's attributes
        are asked for again before they are shown or trusted.
        """
        res = _result(call.proc, reply)
        if res is not None and not res.ok:
            return  # Nothing changed.
        self._bases.clear()
        self._changed_at = self.files.clock()

    async def _before_create(self, call, args):
        """A CREATE that truncates may hit a dirty file: write back first.

        The reply names the file only afterwards, so every dirty file is
        written back; such CREATEs (not open(O_TRUNC), which is a SETATTR)
        are rare.
        """
        how = args.how
        if how.mode != const.CreateMode.EXCLUSIVE and \
                how.attributes is not None and \
                how.attributes.size is not None:
            try:
                await self.flusher.flush()
            except FlushError as e:
                LOG.warning("refusing a truncating CREATE: dirty data "
                            "could not be written back first: %s", e)
                return _reply(call.xid, call.proc, nfs3.Result(
                    NfsStat.NFS3ERR_IO, nfs3.WccData()))
        return None

    # --- WRITE and COMMIT ----------------------------------------------------

    async def _write(self, call, args):
        fh = bytes(args.file)
        data = memoryview(args.data)[:args.count]
        if not self.takes(fh) or len(data) != args.count:
            return None
        base = await self._base(call, fh)
        if base is None or base.type != const.FileType.NF3REG:
            return None  # The server answers (STALE, ISDIR, ...).
        before = self._shown(fh, base)
        self.flusher.wrote()
        if data:
            reply = await self._journal(call, args, fh, data, base)
            if reply is not None:
                return reply
        # else: a WRITE of no bytes changes nothing; nothing to journal.
        committed = StableHow.UNSTABLE
        if args.stable != StableHow.UNSTABLE:
            if not await self._sync():
                return _reply(call.xid, call.proc, nfs3.Result(
                    NfsStat.NFS3ERR_IO, nfs3.WccData()))
            committed = StableHow.FILE_SYNC
        return _reply(call.xid, call.proc, nfs3.Result(0, nfs3.WriteOk(
            nfs3.WccData(_wcc_attr(before),
                         self._shown(fh, self._bases.get(fh, base))),
            len(data), committed, self.verifier)))

    async def _journal(self, call, args, fh, data, base):
        """Journal the WRITE's bytes; a reply only if written through."""
        if self.journal.size + len(data) > self.max_bytes:
            self._falls_back("the journal reached writeback_max_mb")
            return await self._write_through(call, args, fh)
        cred = (call.cred.flavor, call.cred.body)
        try:
            segment, position, record = self.journal.append(
                fh, cred, args.offset, data)
        except OSError as e:
            self._falls_back("the journal's disk refused a write: %s" % e)
            return await self._write_through(call, args, fh)
        if self._falling_back:
            self._falling_back = False
            LOG.info("journalling WRITEs again")
        self.dirty.add(fh, cred, Extent(args.offset, len(data), segment,
                                        position, record), time.time_ns())
        self._bases.setdefault(fh, base)
        self.counters.writeback_writes += 1
        self.counters.writeback_bytes += len(data)
        if self.journal.size >= self.flush_bytes:
            self.flusher.start_flush(
                "the journal passed its flush threshold")
        return None

    def _falls_back(self, reason):
        """Say once per episode that WRITEs are written through."""
        if not self._falling_back:
            self._falling_back = True
            LOG.warning("writing WRITEs through until the journal has "
                        "room: %s", reason)
        self.flusher.start_flush(reason)

    async def _sync(self):
        try:
            await self.journal.sync()
            return True
        except OSError as e:
            LOG.error("cannot make the write-back journal durable: %s", e)
            return False

    async def _commit(self, call, args):
        fh = bytes(args.file)
        if not self.takes(fh):
            return None
        shown = await self.shown_attrs(call, fh)
        if shown is None or shown.type != const.FileType.NF3REG:
            return None  # The server answers (STALE, ISDIR, INVAL ...).
        self.counters.writeback_commits += 1
        if not await self._sync():
            return _reply(call.xid, call.proc, nfs3.Result(
                NfsStat.NFS3ERR_IO, nfs3.WccData()))
        return _reply(call.xid, call.proc, nfs3.Result(0, nfs3.CommitOk(
            nfs3.WccData(None, shown), self.verifier)))

    async def _write_through(self, call, args, fh):
        """Send the WRITE upstream as FILE_SYNC; it replaces older dirty
        bytes of its range."""
        self.counters.writeback_fallbacks += 1
        async with self.exclusive(fh):
            newest = self.journal.last_record
            try:
                res = await self.upstream.nfs(
                    Nfs3Proc.WRITE, dataclasses.replace(
                        args, stable=StableHow.FILE_SYNC),
                    call.cred, call.verf)
            except ReplyError as e:
                # Whatever the outcome, those bytes may have changed.
                self.observer.wrote(fh, args.offset, args.count, None)
                if isinstance(e, CallRefused):
                    return rpc.encode_message(dataclasses.replace(
                        e.reply, xid=call.xid))
                raise
            self.observer.wrote(fh, args.offset, args.count, res)
            if not res.ok:
                return _reply(call.xid, Nfs3Proc.WRITE, res)
            dirty = self.dirty.get(fh)
            if dirty:
                dirty.forget_range(args.offset, args.offset + res.body.count,
                                   before_record=newest + 1)
                self._learn(fh, res.body.file_wcc.after)
                self._prune(fh)
            return _reply(call.xid, Nfs3Proc.WRITE, nfs3.Result(
                0, dataclasses.replace(res.body, verf=self.verifier)))

    # --- READ ----------------------------------------------------------------

    async def _read(self, call, args, fh):
        shown = await self.shown_attrs(call, fh)
        dirty = self.dirty.get(fh)
        if shown is None or not dirty:
            return None  # Flushed meanwhile: the normal path serves it.
        start = args.offset
        end = min(start + min(args.count, self.max_read), shown.size)
        data = bytearray(max(0, end - start))
        if data and not dirty.covers(start, end):
            # Hold off a flush of the file: its bytes must not leave the
            # dirty map between reading the server's copy and laying the
            # dirty bytes over it.
            async with self.exclusive(fh):
                if not self.dirty.get(fh) or not await self._read_upstream(
                        call, fh, start, end, data):
                    return None
                self._overlay(fh, start, end, data)
                shown = await self.shown_attrs(call, fh)
        else:
            self._overlay(fh, start, end, data)
        return read_reply(call.xid, shown, len(data), end >= shown.size,
                          (data,))

    async def _read_upstream(self, call, fh, start, end, data):
        """Fill ``data`` with the server's bytes of [start, end).

        False if they cannot be had from the cache (the READ is then
        forwarded, and the server says why).
        """
        state = await self.fetcher.state_of(call, fh)
        if state is None:
            return False
        upstream_end = min(end, state.fattr.size)
        if upstream_end <= start:
            return True
        pieces = await self.fetcher.blocks(call, state, start, upstream_end)
        if pieces is None:
            return False
        position = 0
        for piece in pieces:
            data[position:position + len(piece)] = piece
            position += len(piece)
        return True

    def _overlay(self, fh, start, end, data):
        dirty = self.dirty.get(fh)
        if not dirty:
            return
        for extent in dirty.overlapping(start, end):
            data[extent.offset - start:extent.end - start] = \
                self.journal.read(extent.segment, extent.position,
                                  extent.length)

    # --- what the flusher asks and tells ----------------------------------

    @contextlib.asynccontextmanager
    async def exclusive(self, fh):
        """Hold the file's lock; the lock is forgotten with its last user."""
        entry = self._locks.get(fh)
        if entry is None:
            entry = self._locks[fh] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            async with entry[0]:
                yield
        finally:
            entry[1] -= 1
            if not entry[1]:
                del self._locks[fh]

    def _prune(self, fh):
        self.dirty.prune(fh)
        if fh not in self.dirty:
            self._bases.pop(fh, None)

    async def still_known(self, fh, cred):
        """Whether the server still has ``fh``, before its bytes are sent.

        Unless the server reported its attributes since the last REMOVE,
        RENAME or LINK it is asked (with ``cred``): the file may have been
        removed since (by a REMOVE or a RENAME over it), or replayed from
        the journal, and bytes must not be sent that have nowhere to go.
        """
        if fh in self._bases:
            return True
        status, base = await self._ask(fh, cred)
        if status in flush_mod.GONE:
            self.drop_removed(fh)
            return False
        self._learn(fh, base)
        return True

    def drop_removed(self, fh):
        """The server no longer knows ``fh``: it was removed.

        Its dirty bytes have nowhere to go.  Their journal segments are
        released now unless the file is being read or flushed (which may
        still read them); else by the flush that follows.
        """
        lost = self.dirty.discard(fh)
        self._bases.pop(fh, None)
        # Its cached attributes must not answer for it either.
        self.fetcher.forget(fh)
        if not lost:
            return
        self.counters.writeback_discarded_bytes += lost
        LOG.info("%d dirty bytes of a removed file were dropped", lost)
        if fh not in self._locks:
            self.journal.release(self.dirty.segments())

    def flushed(self, fh, extents, fattr):
        """``extents`` of ``fh`` are committed; the server reports ``fattr``.

        What the cache held of the file is from before them: forgotten.
        ``fattr`` is the server's newest word on the file while some of
        it is still dirty here.
        """
        for extent in extents:
            self.fetcher.discard_range(fh, extent.offset, extent.length)
        # The server's attributes changed: ask again before trusting
        # blocks cached under the old ones.
        self.fetcher.forget(fh)
        self._learn(fh, fattr)
        self._prune(fh)

    # --- what stats shows -------------------------------------------------

    def dirty_by_export(self):
        totals = {}
        for dirty in self.dirty.files():
            export = self.policies.export_of(dirty.fh) or "?"
            totals[export] = totals.get(export, 0) + dirty.dirty_bytes
        return totals
