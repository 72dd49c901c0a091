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
are and in what order: read at the image's first open, a few calls in
flight, they are in RAM before the guest asks.

The blocks are read in READVs (:mod:`gvfs_openstack.nfs.bulk`): a boot's
blocks are scattered, and a READ per run would cost the mount and the
proxy a call for nearly every block, the CPU a boot storm runs out of.
A guest READ of a block on its way waits for it instead of asking again.
Where the proxy lacks blocks it fetches them for the READV, in the
profile's order as its own prefetch does, and neither fetches a block
the other has on its way.

A profile only decides what is read early.  The bytes come from the
proxy like any read's, kept under the attributes they were read with,
so a profile made up by someone else could never cost a wrong byte; but
it would choose what fills half the cache and what the proxies fetch.
So it is believed only as the caching proxy believes one
(:mod:`gvfs_openstack.sidecar.trust`: root's, the image's owner's or
its directory's owner's, others not allowed to write it), and only if
it is at most :data:`profile_format.MAX_BYTES`, both known from its
attributes before a byte of it is read; it is parsed off the event
loop, which every guest's reads wait on.

:func:`batches` is the plan (:mod:`gvfs_openstack.sidecar.profile_plan`,
as the proxy's prefetch plans), without I/O; :class:`Prefill` runs it.
"""

import asyncio

from oslo_log import log as logging

from gvfs_openstack.sidecar import profile as profile_format
from gvfs_openstack.sidecar import profile_plan
from gvfs_openstack.sidecar import trust

LOG = logging.getLogger(__name__)

#: READVs of a prefill in flight at once: the proxy fetches what it lacks
#: for them, so this many READVs' bytes may be on the node's WAN link.
WINDOW = 2


def batches(profile, cache_block, max_read, budget):
    """The READVs of a prefill: lists of ``(offset, length)`` reads.

    The reads of :func:`profile_plan.read_spans`, in their order, each
    READV at most ``max_read`` bytes (the proxy answers no more) and
    :data:`bulk.MAX_EXTENTS` reads.
    """
    return [batch for batch, _ in profile_plan.batches(
        profile_plan.read_spans(profile, cache_block, max_read, budget),
        lambda span: span[1], max_read, spill=False)]


class Prefill:
    """One prefill per image version a mount opens.

    ``read_file`` reads a small file by NFS handle (the profile),
    ``lookup`` looks a name up in a directory handle (its LOOKUP reply,
    None if not there), ``attributes_of`` asks for a handle's
    attributes,
    ``fetch_extents(inode, extents)`` reads ``(offset, length)`` extents
    into the RAM cache and returns the bytes it read, ``cached(inode,
    offset, length)`` says whether those bytes are there already.
    """

    def __init__(self, lookup, attributes_of, read_file, fetch_extents,
                 cached, cache_block, max_read, budget):
        self.lookup = lookup
        self.attributes_of = attributes_of
        self.read_file = read_file
        self.fetch_extents = fetch_extents
        self.cached = cached
        self.cache_block = cache_block
        self.max_read = max_read
        self.budget = budget
        #: inode -> the version of it prefilled (or begun).
        self._done = {}
        self._tasks = set()
        #: (inode, cache block) -> a future done when its READV is over.
        self._arriving = {}
        #: Bytes prefilled, for the mount's log.
        self.bytes_read = 0

    def opened(self, inode, version, dir_fh, name, owner):
        """``inode`` (``name`` in ``dir_fh``) was opened at ``version``.

        ``version`` is the file's ``(size, mtime_ns)``, ``owner`` its
        uid.  Starts its prefill, once per version, in the background.
        """
        if self._done.get(inode) == version or \
                name.startswith(profile_format.meta_format.PREFIX):
            return
        self._done[inode] = version
        task = asyncio.ensure_future(
            self._run(inode, version, dir_fh, name, owner))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def arrived(self, inode, start, end):
        """Wait for the blocks of [start, end) a READV has on their way.

        A guest READ of them then finds them in the RAM cache instead
        of asking the proxy for them a second time.
        """
        block = self.cache_block
        waits = [self._arriving[(inode, index)]
                 for index in range(start // block, -(-end // block))
                 if (inode, index) in self._arriving]
        if waits:
            await asyncio.wait(waits)

    async def _profile(self, dir_fh, name, owner):
        """The profile beside ``name`` if it is believed; None if none.

        SidecarError if there is one not to believe.
        """
        found = await self.lookup(dir_fh, profile_format.profile_name(name))
        if found is None:
            return None
        attrs = found.obj_attributes or \
            await self.attributes_of(found.object)
        trust.check_file(attrs, profile_format.MAX_BYTES)
        if trust.needs_directory(attrs, owner):
            directory = found.dir_attributes or \
                await self.attributes_of(dir_fh)
            trust.check_owner(attrs, owner, directory.uid)
        data = await self.read_file(found.object, profile_format.MAX_BYTES)
        return await asyncio.to_thread(profile_format.parse, data)

    async def _run(self, inode, version, dir_fh, name, owner):
        try:
            profile = await self._profile(dir_fh, name, owner)
            if profile is None or not profile.matches(*version):
                return
            plan = [[span for span in batch
                     if not self.cached(inode, *span)]
                    for batch in batches(profile, self.cache_block,
                                         self.max_read, self.budget)]
            window = asyncio.Semaphore(WINDOW)
            failed = []

            async def one(batch):
                async with window:
                    if failed or not batch:
                        return
                    arriving = self._expect(inode, batch)
                    try:
                        got = await self.fetch_extents(inode, batch)
                        self.bytes_read += got
                    except Exception as e:
                        failed.append(e)
                    finally:
                        self._over(arriving)

            await asyncio.gather(*(one(batch) for batch in plan))
            if failed:
                raise failed[0]
            LOG.debug("prefilled %r from its boot profile", name)
        except asyncio.CancelledError:
            raise
        except profile_format.meta_format.SidecarError as e:
            LOG.warning("ignoring the boot profile of %r: %s", name, e)
        except Exception as e:  # A prefill is only ever an optimisation.
            LOG.debug("prefill of %r stopped: %s", name, e)

    def _expect(self, inode, batch):
        """Note the blocks of ``batch`` as on their way; their keys."""
        loop = asyncio.get_running_loop()
        block = self.cache_block
        keys = [(inode, index) for offset, length in batch
                for index in range(offset // block,
                                   -(-(offset + length) // block))]
        for key in keys:
            self._arriving[key] = loop.create_future()
        return keys

    def _over(self, keys):
        for key in keys:
            future = self._arriving.pop(key, None)
            if future is not None:
                future.set_result(None)

    def forget(self, inode):
        """The kernel let go of ``inode``: its number will not come back."""
        self._done.pop(inode, None)

    async def stop(self):
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
