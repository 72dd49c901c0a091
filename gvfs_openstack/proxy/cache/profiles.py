# SPDX-License-Identifier: Apache-2.0
"""Boot profiles in the client proxy: recorded from readers, replayed ahead.

A guest booting from a golden image reads a few hundred scattered blocks
one at a time; across a WAN each is a round trip, and nothing in their
offsets predicts the next (read-ahead needs a sequence).  What predicts
them is the last boot of the same image.

* **Recording.**  The proxy notes, per file, the blocks its readers
  touch in first-touch order (hits and misses alike: it sees the reads
  before its cache does), from the first READ until the file has been
  quiet for ``quiet_seconds`` or ``max_seconds`` have passed.  If that
  adds blocks to the image's profile on the DTN it writes the union
  back beside the image (a temporary name, then RENAME, so that readers
  see a whole profile or the old one).  What reads more than half of a
  large file, or more than :data:`profile.MAX_BLOCKS` blocks, is copying
  it (a snapshot's ``qemu-img convert``, a download), and is not kept.
* **Prefetch.**  At the first READ of a file whose profile matches it,
  one task per file and proxy fetches the profile's blocks in profile
  order, ``window`` bytes in flight: concurrent clones share it, and the
  guest's own misses join a fetch in flight (collapsed forwarding in
  :class:`fetch.Fetcher`) or go out at once beside it, behind at
  most ``window`` bytes on the link.  It stops when the file changes,
  a fetch fails, or it has fetched ``max_bytes`` (a share of the cache:
  a profile can never flush the cache it fills).
* **The stream.**  With a :class:`stream.ImageStreams`, the same task
  goes on to stream the rest of the image once the profile's blocks
  are in (or at once when there is no profile), within what is left of
  that share.

The recording is done here rather than on the DTN's server proxy: only
the first proxy sees what the guest reads (a server proxy sees each
cache's misses, shifted by read-ahead and hidden entirely behind a warm
LAN proxy), and it knows each file's name from its own LOOKUPs.  The
profile still lives on the DTN, written through the server proxy with
the reader's mapped identity like any other file, so every host that
boots the image later finds it.
"""

import asyncio
import time
import uuid

from oslo_log import log as logging

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.proxy.cache.fetch import FetchError
from gvfs_openstack.proxy.cache.freshness import version_key
from gvfs_openstack.proxy.cache.window import FetchWindow
from gvfs_openstack.proxy.upstream_calls import ReplyError
from gvfs_openstack.sidecar import profile as profile_format
from gvfs_openstack.sidecar import profile_plan

LOG = logging.getLogger(__name__)

#: Files whose profile (or its absence) is remembered.
MAX_FILES = 4096
#: Mode of a profile written on the DTN: that of the images beside it.
PROFILE_MODE = 0o640


class BootProfiles:
    """Records and replays the boot profiles of the files read.

    :meth:`on_read` is told of every READ (a hook of
    :class:`reads.CachedReads`); ``fetcher`` (:class:`fetch.Fetcher`)
    fetches a profile's blocks.  ``sidecars`` (:class:`sidecars.Sidecars`)
    knows where each file is and reads files beside it; ``upstream`` is the
    :class:`~gvfs_openstack.proxy.upstream_calls.UpstreamCalls` a
    profile is written through.
    """

    def __init__(self, fetcher, sidecars, upstream, counters, record=True,
                 prefetch=True, quiet_seconds=30.0, max_seconds=600.0,
                 window=4 * 1024 * 1024, max_bytes=None,
                 max_write=1024 * 1024, clock=time.monotonic, stream=None):
        self.fetcher = fetcher
        self.sidecars = sidecars
        self.upstream = upstream
        #: :class:`counters.ProfileCounters`
        self.counters = counters
        self.record = record
        self.prefetch = prefetch
        self.quiet_seconds = quiet_seconds
        self.max_seconds = max_seconds
        self.window = max(window, fetcher.block_size)
        self.max_bytes = max_bytes
        self.max_write = max_write
        self.clock = clock
        #: :class:`stream.ImageStreams` that go on after the profile, or
        #: None.
        self.stream = stream
        #: fh -> (version key, Recording)
        self._recordings = {}
        #: fh -> version key the prefetch ran (or runs) for.
        self._prefetched = {}
        #: fh -> (version key, Profile or None)
        self._loaded = {}
        self._tasks = set()

    # --- the READ hook -------------------------------------------------------

    def on_read(self, call, state, start, end):
        """A reader read [start, end) of the regular file of ``state``."""
        fh = state.fh
        key = version_key(state.fattr)
        if self.stream is not None:
            self.stream.note_read(fh)
        if self.record:
            self._touch(call, state, key, start, end)
        if (self.prefetch or self.stream is not None) and \
                self._prefetched.get(fh) != key and \
                self.sidecars.where(fh) is not None:
            self._remember(self._prefetched, fh, key)
            self._spawn(self._ahead(call, state, key))

    def _spawn(self, coro):
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    @staticmethod
    def _remember(table, key, value):
        table.pop(key, None)
        table[key] = value
        while len(table) > MAX_FILES:
            table.pop(next(iter(table)))

    async def stop(self):
        """Cancel the prefetches and recordings under way."""
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- loading -------------------------------------------------------------

    async def profile_of(self, call, state):
        """The file's profile if one matches the file as it is, else None."""
        fh = state.fh
        key = version_key(state.fattr)
        found = self._loaded.get(fh)
        if found is not None and found[0] == key:
            return found[1]
        where = self.sidecars.where(fh)
        if where is None:
            return None
        dir_fh, name = where
        loaded = None
        try:
            data = await self.sidecars.read_beside(
                call, dir_fh, profile_format.profile_name(name),
                profile_format.MAX_BYTES, state.fattr)
            if data is not None:
                # Off the loop: every client of the proxy waits on it.
                loaded = await asyncio.to_thread(profile_format.parse, data)
        except profile_format.meta_format.SidecarError as e:
            self.counters.profiles_invalid += 1
            LOG.warning("ignoring the boot profile of %r: %s", name, e)
        except ReplyError:
            return None     # Unreadable now: look again at the next boot.
        if loaded is not None and not loaded.matches(*key):
            self.counters.profiles_stale += 1
            LOG.warning("ignoring the stale boot profile of %r (made for "
                        "another size or mtime)", name)
            loaded = None
        elif loaded is not None:
            self.counters.profiles_loaded += 1
        self._remember(self._loaded, fh, (key, loaded))
        return loaded

    # --- prefetch ------------------------------------------------------------

    async def _ahead(self, call, state, key):
        """The profile's blocks first, then (if on) the image stream."""
        spent = 0
        if self.prefetch:
            spent = await self._prefetch(call, state, key)
        if spent is None or self.stream is None:
            return
        loaded = self._loaded.get(state.fh)
        profiled = loaded is not None and loaded[0] == key and \
            loaded[1] is not None and bool(loaded[1].blocks)
        try:
            await self.stream.run(call, state, key, spent, profiled)
        except asyncio.CancelledError:
            raise
        except Exception:
            LOG.exception("image stream failed")

    async def _prefetch(self, call, state, key):
        """Fetch the profile's blocks; the bytes fetched, None if it
        stopped early (the cache's share is spent, a fetch failed)."""
        try:
            found = await self.profile_of(call, state)
            if found is None or not found.blocks:
                return 0
            self.counters.prefetches += 1
            started = time.monotonic()
            stopped = self.counters.prefetch_stopped
            fetched = await self._fetch_in_order(call, state, key, found)
            # When it ended against when the guest began tells whether
            # the guest had to wait for it.
            LOG.info("boot prefetch: %d of the profile's %d blocks "
                     "fetched in %.2f s", fetched, len(found.blocks),
                     time.monotonic() - started)
            if self.counters.prefetch_stopped != stopped:
                return None
            return fetched * self.fetcher.block_size
        except asyncio.CancelledError:
            raise
        except FetchError as e:
            self.counters.prefetch_stopped += 1
            LOG.info("boot prefetch stopped: %s", e)
        except Exception:
            self.counters.prefetch_stopped += 1
            LOG.exception("boot prefetch failed")
        return None

    async def _fetch_in_order(self, call, state, key, found):
        """Fetch the profile's blocks in its order, a window in flight.

        Up to a fetch's size of its runs in one READV (:meth:`Fetcher.
        batches`): a boot's blocks are scattered, and one call per run
        would cost every hop a call per 64 KiB.
        """
        fetcher = self.fetcher
        window = FetchWindow(self.window, fits=True)
        fetched = 0
        try:
            for batch, batch_bytes in fetcher.batches(
                    state, self._runs(state, key, found)):
                if not fetcher.is_version(state, key):
                    break       # What is left was chosen for another one.
                fetched += await self._send(call, state, window, batch,
                                            batch_bytes)
            await window.drain()
        finally:
            self.counters.prefetch_bytes += window.arrived
            window.cancel()
        return fetched

    def _runs(self, state, key, found):
        """The profile's runs still to fetch, in its order.

        A run is blocks next in the profile that are also next on disk,
        none of them cached or on their way already
        (:func:`profile_plan.runs`).  Ends when the file changes, or at
        the prefetch's share of the cache.
        """
        fetcher = self.fetcher
        budget = self.max_bytes

        def going_on():
            if fetcher.is_version(state, key):
                return True
            self.counters.prefetch_stopped += 1
            return False

        def present(block):
            self.counters.prefetch_blocks_present += 1

        for first, count in profile_plan.runs(
                profile_plan.blocks(found, fetcher.block_size),
                fetcher.max_fetch_blocks,
                wanted=lambda block: fetcher.wanted(state, block),
                on_present=present, going_on=going_on):
            run_bytes = fetcher.run_bytes(state, first, count)
            if budget is not None:
                if budget < run_bytes:
                    self.counters.prefetch_stopped += 1
                    LOG.info("boot prefetch stopped at its share of the "
                             "cache")
                    return
                budget -= run_bytes
            yield first, count

    async def _send(self, call, state, window, batch, batch_bytes):
        """Fetch the runs of ``batch`` still wanted once there is room.

        The blocks fetched.  A reader's miss may have fetched some of
        them while this waited: those are not fetched twice.
        """
        try:
            await window.make_room(batch_bytes)
        finally:
            self.counters.prefetch_bytes += window.arrived
            window.arrived = 0
        futures, fetch_bytes, still = self.fetcher.fetch_wanted(
            call, state, batch)
        if futures is not None:
            window.add(futures, fetch_bytes)
        self.counters.prefetch_blocks_present += \
            sum(count for _, count in batch) - still
        self.counters.prefetch_blocks += still
        return still

    # --- recording -----------------------------------------------------------

    def _touch(self, call, state, key, start, end):
        fh = state.fh
        now = self.clock()
        found = self._recordings.get(fh)
        if found is not None and found[0] != key:
            # The file changed under the recording: it is of no version.
            self._recordings.pop(fh)
            found = None
        if found is None:
            if self.sidecars.where(fh) is None:
                return      # No name to write a profile beside.
            recording = profile_format.Recording(self.fetcher.block_size,
                                                 now)
            self._remember(self._recordings, fh, (key, recording))
            self._spawn(self._record(call, state, key, recording))
        else:
            recording = found[1]
        recording.touch(start, end, now)

    async def _record(self, call, state, key, recording):
        """Wait for the end of the recording, then keep what it adds."""
        fh = state.fh
        try:
            while True:
                now = self.clock()
                ends = min(recording.last + self.quiet_seconds,
                           recording.started + self.max_seconds)
                if now >= ends:
                    break
                await asyncio.sleep(ends - now)
        finally:
            if self._recordings.get(fh, (None, None))[1] is recording:
                self._recordings.pop(fh)
        if not len(recording) or not self.fetcher.is_version(state, key):
            return
        if recording.is_copy(key[0]):
            LOG.info("not keeping a boot profile of a file read through "
                     "(%d blocks of %d bytes): a copy, not a boot",
                     len(recording), key[0])
            return
        try:
            await self._keep(call, state, key, recording)
        except (ReplyError, OSError) as e:
            self.counters.profiles_write_failed += 1
            LOG.warning("could not write a boot profile: %s", e)

    async def _keep(self, call, state, key, recording):
        new = recording.profile(*key)
        old = await self.profile_of(call, state)
        if not profile_format.adds_to(old, new):
            return
        merged = profile_format.merge(old, new)
        where = self.sidecars.where(state.fh)
        if where is None:
            return
        dir_fh, name = where
        if await self._write(call, dir_fh, profile_format.profile_name(name),
                             merged.to_bytes()):
            self.counters.profiles_recorded += 1
            self._remember(self._loaded, state.fh, (key, merged))
            LOG.info("boot profile of %r: %d blocks from %d boots",
                     name, len(merged.blocks), merged.boots)

    async def _nfs(self, call, proc, args):
        return await self.upstream.nfs(proc, args, call.cred, call.verf)

    async def _write(self, call, dir_fh, final, data):
        """Write ``data`` as ``final`` in ``dir_fh``: temp name, RENAME.

        False (and logged) when the next hop refused a step; the
        temporary file is removed then.
        """
        temp = "%s.%s.tmp" % (final, uuid.uuid4().hex[:12])
        res = await self._nfs(call, Nfs3Proc.CREATE, nfs3.CreateArgs(
            nfs3.DirOpArgs(dir_fh, temp), nfs3.CreateHow(
                const.CreateMode.GUARDED,
                nfs3.Sattr(mode=PROFILE_MODE, size=0))))
        if not res.ok or not res.body.obj:
            return self._refused("CREATE", res.status)
        fh = res.body.obj
        try:
            for offset in range(0, len(data), self.max_write):
                piece = data[offset:offset + self.max_write]
                res = await self._nfs(call, Nfs3Proc.WRITE, nfs3.WriteArgs(
                    fh, offset, len(piece), const.StableHow.FILE_SYNC,
                    piece))
                if not res.ok or res.body.count != len(piece):
                    return self._refused("WRITE", res.status)
            res = await self._nfs(call, Nfs3Proc.RENAME, nfs3.RenameArgs(
                nfs3.DirOpArgs(dir_fh, temp), nfs3.DirOpArgs(dir_fh, final)))
            if not res.ok:
                return self._refused("RENAME", res.status)
            temp = None
            return True
        finally:
            if temp is not None:
                await self._nfs(call, Nfs3Proc.REMOVE, nfs3.RemoveArgs(
                    nfs3.DirOpArgs(dir_fh, temp)))

    def _refused(self, what, status):
        self.counters.profiles_write_failed += 1
        LOG.warning("could not write a boot profile: %s answered %s", what,
                    const.status_name(status))
        return False
