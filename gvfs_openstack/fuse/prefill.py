# SPDX-License-Identifier: Apache-2.0
"""The mount's RAM cache filled from an image's boot profile at its open.

A guest's boot reads its golden image one small request at a time, each
a FUSE request, an NFS READ to the node's client proxy and an answer:
on a host new to the image that is some 800 round trips to the proxy,
0.5 to 1 s of a boot, even when the proxy already holds every block
(a LAN proxy streamed them, or its own profile prefetch did).  A later
boot on the same host reads them from the mount's RAM cache instead
(:mod:`readcache`).  The boot profile the proxies record beside the
image (:mod:`gvfs_openstack.sidecar.profile`) says which blocks those
are and in what order: read at the image's first open in runs of up to
a READ's size, a few in flight, they are in RAM before the guest asks.

It pays only where the proxy answers from its cache (or a near LAN
proxy): a READ slower than :data:`FAR_SECONDS` stops it, and the proxy's
own profile prefetch brings the rest across the WAN.

A profile only decides what is read early.  The bytes come from the
proxy like any read's, kept under the attributes they were read with,
so a profile made up by someone else costs at most its bound in reads
and half the cache, never a wrong byte.

:func:`runs` is the plan, without I/O; :class:`Prefill` runs it.
"""

import asyncio

from oslo_log import log as logging

from gvfs_openstack.sidecar import profile as profile_format

LOG = logging.getLogger(__name__)

#: READs of a prefill in flight at once.
WINDOW = 4
#: A prefill READ slower than this came across a slow link: the proxy
#: did not hold the blocks.  The prefill stops there and leaves them to
#: the proxy's own profile prefetch, which fetches them across that link
#: in its order; the mount's READs would be misses beside it, competing
#: for the link (a 1 MiB READ from the proxy's cache takes some ms, one
#: across a 50 ms, 200 Mbit/s WAN over 90 ms).
FAR_SECONDS = 0.05


def runs(profile, cache_block, max_read, budget):
    """``(offset, length)`` READs that bring the profile's blocks in.

    In first-touch order of each run's first block; a run is consecutive
    cache blocks, at most ``max_read`` bytes, within the file.  At most
    ``budget`` bytes in all: the cache keeps its other files too.
    """
    wanted = []
    seen = set()
    for block, _ in profile.blocks:
        start = block * profile.block_size
        end = min(start + profile.block_size, profile.size)
        for index in range(start // cache_block, -(-end // cache_block)):
            if index not in seen:
                seen.add(index)
                wanted.append(index)
    per_read = max(1, max_read // cache_block)
    planned, done, spent = [], set(), 0
    for index in wanted:
        if index in done:
            continue
        first = index
        while first - 1 in seen and first - 1 not in done and \
                index - first + 1 < per_read:
            first -= 1
        last = index
        while last + 1 in seen and last + 1 not in done and \
                last - first + 1 < per_read:
            last += 1
        offset = first * cache_block
        length = min((last + 1) * cache_block, profile.size) - offset
        if spent + length > budget:
            break
        planned.append((offset, length))
        done.update(range(first, last + 1))
        spent += length
    return planned


class Prefill:
    """One prefill per image version a mount opens.

    ``read_file`` reads a small file by NFS handle (the profile),
    ``lookup`` looks a name up in a directory handle, ``fetch(inode,
    offset, length)`` reads into the RAM cache, ``cached(inode, offset,
    length)`` says whether those bytes are there already.
    """

    def __init__(self, lookup, read_file, fetch, cached, cache_block,
                 max_read, budget, far_seconds=FAR_SECONDS):
        self.lookup = lookup
        self.read_file = read_file
        self.fetch = fetch
        self.cached = cached
        self.cache_block = cache_block
        self.max_read = max_read
        self.budget = budget
        self.far_seconds = far_seconds
        #: inode -> the version of it prefilled (or begun).
        self._done = {}
        self._tasks = set()
        #: Bytes prefilled, for the mount's log.
        self.bytes_read = 0

    def opened(self, inode, version, dir_fh, name):
        """``inode`` (``name`` in ``dir_fh``) was opened at ``version``.

        ``version`` is the file's ``(size, mtime_ns)``.  Starts its
        prefill, once per version, in the background.
        """
        if self._done.get(inode) == version or \
                name.startswith(profile_format.meta_format.PREFIX):
            return
        self._done[inode] = version
        task = asyncio.ensure_future(self._run(inode, version, dir_fh, name))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, inode, version, dir_fh, name):
        try:
            fh = await self.lookup(dir_fh, profile_format.profile_name(name))
            if fh is None:
                return
            profile = profile_format.parse(
                await self.read_file(fh, profile_format.MAX_BYTES))
            if not profile.matches(*version):
                return
            plan = [span for span in runs(profile, self.cache_block,
                                          self.max_read, self.budget)
                    if not self.cached(inode, *span)]
            window = asyncio.Semaphore(WINDOW)
            far = []
            loop = asyncio.get_running_loop()

            async def one(offset, length):
                async with window:
                    if far:
                        return
                    started = loop.time()
                    await self.fetch(inode, offset, length)
                    self.bytes_read += length
                    if loop.time() - started > self.far_seconds:
                        far.append(offset)

            await asyncio.gather(*(one(*span) for span in plan))
            LOG.debug("prefilled %s of %r from its boot profile",
                      "part (the proxy fetches the rest across a slow "
                      "link)" if far else "all", name)
        except asyncio.CancelledError:
            raise
        except profile_format.ProfileError as e:
            LOG.debug("not prefilling %r: its boot profile: %s", name, e)
        except Exception as e:  # A prefill is only ever an optimisation.
            LOG.debug("prefill of %r stopped: %s", name, e)

    def forget(self, inode):
        """The kernel let go of ``inode``: its number will not come back."""
        self._done.pop(inode, None)

    async def stop(self):
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
