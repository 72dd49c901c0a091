# SPDX-License-Identifier: Apache-2.0
"""Sending write-back's dirty bytes upstream: when, and one file at a time.

:class:`~gvfs_openstack.proxy.cache.writeback.WriteBack` answers WRITEs
once their bytes are in the journal, and READs and attributes with them
laid over the server's.  This is the other half: it decides when those
bytes go upstream (on request, when the proxy has been idle, when the
journal passes its flush threshold, at a clean shutdown) and sends them.
The two are apart so that what clients are shown of a dirty file and
how its bytes reach the server can each be read whole; they meet in the
dirty map, the journal and the four calls :class:`Flusher` makes back
(see its docstring).

A flush is one or more passes over every dirty file, one pass at a
time: a flush asked for while a pass runs waits for that pass, then
starts another only if bytes written before it was asked for are still
dirty, so requests that overlap share the work instead of sending the
same bytes twice.  Each file is sent under its lock by a
:class:`~gvfs_openstack.proxy.cache.flush.FileWriter`.  Bytes that could
not be sent stay dirty and journalled, for the next pass or, after a
stop, the next process.
"""

import asyncio
import time

from oslo_log import log as logging

from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.cache import flush as flush_mod
from gvfs_openstack.proxy.cache.flush import FlushError
from gvfs_openstack.proxy.upstream import UpstreamError

LOG = logging.getLogger(__name__)


class Flusher:
    """Writes the dirty bytes of a :class:`WriteBack` upstream.

    ``journal`` holds the bytes and ``dirty`` (the write-back's
    :class:`DirtyMap`) says which are not upstream yet; ``upstream`` is
    the :class:`UpstreamCalls` of the next hop, ``counters`` the
    :class:`WritebackCounters`, ``limits`` the :class:`WriteBackLimits`
    (``idle_seconds``, ``wsize``, ``window``).

    ``files`` is the write-back itself, which keeps what clients are
    shown of each file; the flusher only ever calls:

    * ``exclusive(fh)``: an async context manager holding the file's
      lock, so no write-through WRITE or partly dirty READ of it runs
      while its bytes leave the dirty map;
    * ``still_known(fh, cred)``: whether the server still has the file
      (if not, its dirty bytes were dropped);
    * ``drop_removed(fh)``: the server said the file is gone;
    * ``flushed(fh, extents, fattr)``: ``extents`` are committed and the
      server now reports ``fattr``.
    """

    def __init__(self, journal, dirty, files, upstream, counters, limits,
                 clock=time.monotonic):
        self.journal = journal
        self.dirty = dirty
        self.files = files
        #: :class:`counters.WritebackCounters`
        self.counters = counters
        self.idle_seconds = limits.idle_seconds
        self.writer = flush_mod.FileWriter(journal, upstream, limits.wsize,
                                           limits.window)
        self.clock = clock
        #: The pass over every dirty file running now; every flush
        #: waiting for it shares it.
        self._running_pass = None
        #: The flush :meth:`start_flush` last started: one at a time.
        self._background_flush = None
        #: The task flushing an idle proxy, None while stopped.
        self._idle_task = None
        #: When (by ``clock``) the last WRITE arrived.
        self.last_write = clock()

    # --- start and stop ----------------------------------------------------

    def start(self):
        if self.idle_seconds > 0:
            self._idle_task = asyncio.ensure_future(self._idle_timer())

    async def stop(self, timeout):
        """Stop the idle timer, then flush for at most ``timeout`` seconds.

        Whatever is still dirty stays in the journal for the next start.
        """
        if self._idle_task is not None:
            self._idle_task.cancel()
        if self.dirty:
            try:
                await asyncio.wait_for(self.flush(), timeout)
            except (FlushError, asyncio.TimeoutError) as e:
                LOG.warning("stopping with %d dirty bytes not written back "
                            "(%s); they stay in the journal and are written "
                            "back when the proxy starts again",
                            self.dirty.dirty_bytes,
                            e or "timed out after %ss" % timeout)

    def wrote(self):
        """A WRITE arrived: the proxy is not idle."""
        self.last_write = self.clock()

    async def _idle_timer(self):
        while True:
            await asyncio.sleep(min(1.0, self.idle_seconds / 4))
            if self.dirty and self._running_pass is None and \
                    self.clock() - self.last_write >= self.idle_seconds:
                self.start_flush("idle")

    # --- flushing ----------------------------------------------------------

    def start_flush(self, reason):
        """Flush in the background (errors are logged, data stays)."""
        if self._background_flush is not None and \
                not self._background_flush.done() or not self.dirty:
            return
        LOG.info("writing back %d dirty bytes: %s", self.dirty.dirty_bytes,
                 reason)
        self._background_flush = asyncio.ensure_future(self.flush())
        self._background_flush.add_done_callback(_log_failure)

    async def flush(self):
        """Write every byte dirty now upstream; returns what was done.

        Raises FlushError if some could not be (they stay journalled).
        """
        newest = self.journal.last_record
        started = self.clock()
        flushed = self.counters.writeback_flushed_bytes
        while any(e.record <= newest for f in self.dirty.files()
                  for e in f.extents()):
            if self._running_pass is None:
                self._running_pass = asyncio.ensure_future(
                    self._flush_pass())
            try:
                await asyncio.shield(self._running_pass)
            finally:
                if self._running_pass is not None and \
                        self._running_pass.done():
                    self._running_pass = None
        return {"flushed_bytes": self.counters.writeback_flushed_bytes -
                flushed,
                "seconds": round(self.clock() - started, 3),
                "dirty_bytes": self.dirty.dirty_bytes}

    async def _flush_pass(self):
        self.counters.writeback_flushes += 1
        failures = []
        for dirty in self.dirty.files():
            try:
                await self.flush_file(dirty.fh)
            except (FlushError, UpstreamError) as e:
                failures.append(str(e))
        self.journal.release(self.dirty.segments())
        if failures:
            self.counters.writeback_flush_errors += len(failures)
            raise FlushError("%d file(s) not written back: %s" % (
                len(failures), "; ".join(failures[:3])))

    async def flush_file(self, fh):
        """Write and commit the bytes of ``fh`` dirty now, under its lock.

        Raises FlushError or UpstreamError if they could not be; they
        stay dirty.  A file the server no longer knows is dropped.
        """
        async with self.files.exclusive(fh):
            dirty = self.dirty.get(fh)
            extents = dirty.extents() if dirty else []
            if not extents:
                return
            if not await self.files.still_known(
                    fh, rpc.OpaqueAuth(*dirty.cred)):
                return
            try:
                commit = await self.writer.send(dirty, extents)
            except flush_mod.Gone:
                self.files.drop_removed(fh)
                return
            dirty.remove_records({e.record for e in extents})
            self.counters.writeback_flushed_bytes += sum(
                e.length for e in extents)
            self.files.flushed(fh, extents, commit.file_wcc.after)


def _log_failure(task):
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        LOG.warning("write-back flush failed; the data stays in the "
                    "journal and is tried again later: %s", error)
