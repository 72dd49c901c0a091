# SPDX-License-Identifier: Apache-2.0
"""Warming: fetch one file into the cache ahead of its readers.

Used before a burst of clones (and by Nova's image pre-caching later): the
proxy resolves the path through its next hop (EXPORT, MNT, LOOKUP), then
fetches the blocks it does not hold yet, no faster than a cap, so that
warming many compute nodes at once cannot flood the DTN.
"""

import asyncio
import posixpath
import time

from gvfs_openstack import exceptions
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import MountProc
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.cache.fetch import FetchError
from gvfs_openstack.proxy.cache.window import FetchWindow
from gvfs_openstack.proxy.upstream_calls import ReplyError
from gvfs_openstack.sidecar import profile_plan

MIB = 1024 * 1024


class WarmError(exceptions.GvfsError):
    message = "Cannot warm %(path)s: %(reason)s"


class Warmer:
    """Warms files into the cache through ``fetcher`` (a :class:`Fetcher`).

    What it resolves teaches ``policies`` (and ``sidecars``, if any)
    the files' export and name, as a client's MNT and LOOKUPs would.
    """

    def __init__(self, fetcher, upstream, policies, sidecars, block_size,
                 default_rate_mib, profiles=None, window=4 * MIB):
        self.fetcher = fetcher
        #: :class:`profiles.BootProfiles`: its blocks are fetched first.
        self.profiles = profiles
        #: Bytes of READs kept in flight.
        self.window = window
        self.upstream = upstream
        self.policies = policies
        self.sidecars = sidecars
        self.block_size = block_size
        self.default_rate_mib = default_rate_mib
        # Warming acts as root on this host; the server proxy maps that
        # to the export's file account like any other identity.
        self.cred = rpc.AuthSys(0, 0, (), "gvfs-proxy-warm").to_opaque()

    async def _resolve(self, path):
        exports = await self.upstream.mount(MountProc.EXPORT, None,
                                            self.cred)
        matches = [e.directory for e in exports.exports
                   if path == e.directory or path.startswith(
                       e.directory.rstrip("/") + "/")]
        if not matches:
            raise WarmError(path=path, reason="it is not under an export "
                                              "the next hop serves")
        export = max(matches, key=len)
        res = await self.upstream.mount(MountProc.MNT,
                                        mount3.MntArgs(export), self.cred)
        if not res.ok:
            raise WarmError(path=path, reason="MNT of %s refused (%s)" % (
                export, const.status_name(res.status)))
        fh = res.body.fhandle
        self.policies.learn_root(fh, export)
        for name in path[len(export):].split("/"):
            if not name:
                continue
            res = await self.upstream.nfs(
                Nfs3Proc.LOOKUP, nfs3.LookupArgs(nfs3.DirOpArgs(fh, name)),
                self.cred)
            if not res.ok:
                raise WarmError(path=path, reason="%s: %s" % (
                    name, const.status_name(res.status)))
            self.policies.learn_child(fh, res.body.object)
            if self.sidecars is not None:
                self.sidecars.learn(fh, name, res.body.object)
            fh = res.body.object
        return fh

    async def warm(self, path, rate_mib=None):
        """Fetch ``path`` into the cache; returns what was done."""
        if not path.startswith("/") or ".." in path.split("/"):
            raise WarmError(path=path, reason="give an absolute path "
                                              "without '..'")
        path = posixpath.normpath(path)
        rate = (rate_mib or self.default_rate_mib) * MIB
        try:
            fh = bytes(await self._resolve(path))
        except ReplyError as e:
            raise WarmError(path=path, reason=str(e)) from e
        fetcher = self.fetcher
        call = rpc.Call(0, const.NFS_PROGRAM, 3, Nfs3Proc.READ, self.cred)
        fetcher.forget(fh)
        state = await fetcher.state_of(call, fh)
        if state is None:
            raise WarmError(path=path, reason="GETATTR refused upstream")
        if state.fattr.type != const.FileType.NF3REG:
            raise WarmError(path=path, reason="not a regular file")
        # Zero blocks by the file's sidecar count as present.
        if self.sidecars is not None:
            await self.sidecars.load_zeros(call, state)
        bs = self.block_size
        size = state.fattr.size
        missing = [b for b in range(-(-size // bs))
                   if fetcher.wanted(state, b)]
        missing = await self._boot_set_first(call, state, missing)
        start = time.monotonic()
        window = FetchWindow(self.window)
        try:
            # The boot set's runs are scattered: many go in one READV.
            for batch, batch_bytes in fetcher.batches(
                    state, fetcher.runs(missing)):
                await window.make_room(batch_bytes)
                # Keep the average under the cap.
                ahead = (window.arrived + window.in_flight + batch_bytes) / \
                    rate - (time.monotonic() - start)
                if ahead > 0:
                    await asyncio.sleep(ahead)
                futures, fetch_bytes, _ = fetcher.fetch_wanted(call, state,
                                                               batch)
                if futures is not None:
                    window.add(futures, fetch_bytes)
            await window.drain()
        except FetchError as e:
            raise WarmError(path=path, reason=str(e)) from e
        finally:
            window.cancel()
        fetched = window.arrived
        return {"path": path, "size": size, "fetched": fetched,
                "already_cached": size - fetched,
                "seconds": round(time.monotonic() - start, 3)}

    async def _boot_set_first(self, call, state, missing):
        """``missing`` with the blocks of the file's boot profile first.

        In the profile's order: a warm that a boot overtakes has
        fetched what the boot reads first.
        """
        if self.profiles is None:
            return missing
        found = await self.profiles.profile_of(call, state)
        if found is None:
            return missing
        wanted = set(missing)
        first = [b for b in profile_plan.blocks(found, self.block_size)
                 if b in wanted]
        chosen = set(first)
        return first + [b for b in missing if b not in chosen]
