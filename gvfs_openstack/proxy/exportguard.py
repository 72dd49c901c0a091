# SPDX-License-Identifier: Apache-2.0
"""The server proxy's file-handle check: only handles of allowed exports.

:mod:`handles` keeps the handles this proxy has seen come down from an
allowed root.  That set lives in memory, so after a restart of the proxy
(or once a handle is dropped as least recently used) clients present
handles it does not hold -- legitimately: NFSv3 handles outlive server
and proxy restarts.  An unknown handle is therefore looked for by walking
the allowed exports from their roots (MNT, then READDIRPLUS down every
directory) as the file account, at most once per ``rescan_interval``;
only a handle still not found is refused.  A walk is shared by every
call waiting on it.
"""

import asyncio
import time

from oslo_log import log as logging

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import MountProc
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import handles as handles_mod
from gvfs_openstack.proxy import read_only as read_only_mod
from gvfs_openstack.proxy.upstream_calls import ReplyError

LOG = logging.getLogger(__name__)

#: READDIRPLUS sizes of the walk: a few hundred entries per call.
_DIRCOUNT = 16 * 1024
_MAXCOUNT = 64 * 1024


class ExportGuard:
    """Admits the handles of allowed exports, walking them when in doubt.

    ``nfs`` and ``mount`` are the :class:`UpstreamCalls` of the NFS
    server's NFS and MOUNT services.
    """

    def __init__(self, nfs, mount, exports, cred, counters,
                 limit=262144, rescan_interval=10.0, clock=time.monotonic,
                 read_only=None):
        self.nfs = nfs
        self.mount = mount
        self.exports = exports
        #: The credential the walk reads directories with (the file
        #: account), as an OpaqueAuth.
        self.cred = cred
        #: :class:`counters.GuardCounters`
        self.counters = counters
        self.handles = handles_mod.AdmittedHandles(limit)
        #: :class:`read_only.ReadOnlyDirs`, learned beside the handles.
        self.read_only = read_only or read_only_mod.ReadOnlyDirs(())
        self.rescan_interval = rescan_interval
        self.clock = clock
        self._walk = None
        self._walked_at = None
        self._warned_at = None

    # --- the check -----------------------------------------------------------

    def admits(self, fhs):
        """Whether every handle in ``fhs`` is known, without looking."""
        return all(self.handles.admits(fh) for fh in fhs)

    async def admit(self, what, fhs):
        """Whether the handles ``fhs`` of call ``what`` are of allowed exports.

        Walks the exports first if one is unknown and no walk ran within
        ``rescan_interval``.  Raises what the walk's upstream calls raise
        (the caller answers SYSTEM_ERR: the NFS server is not answering).
        """
        if self.admits(fhs):
            return True
        await self._walk_if_due()
        if self.admits(fhs):
            return True
        self.counters.handles_refused += 1
        now = self.clock()
        if self._warned_at is None or \
                now - self._warned_at >= self.rescan_interval:
            self._warned_at = now
            LOG.warning("refusing %s of a file handle not under an allowed "
                        "export (%s); %d refused so far", what,
                        next(fh for fh in fhs
                             if not self.handles.admits(fh)).hex(),
                        self.counters.handles_refused)
        return False

    # --- learning from replies -----------------------------------------------

    def learn(self, proc, args, reply):
        """Admit the handles that a forwarded reply hands out."""
        if proc not in handles_mod.HANDING_OUT or reply is None:
            return
        try:
            results = rpc.results_of(reply)
        except ProtocolError:
            return
        if results is None:
            return
        for entry in handles_mod.entries_handed_out(proc, args, results):
            if entry.name not in handles_mod.NOT_DOWN:
                self.handles.add(entry.fh)
            if self.read_only:
                self.read_only.learn_entry(entry)

    def learn_root(self, path, reply):
        """Admit the root handle of a MNT reply for allowed ``path``."""
        try:
            results = rpc.results_of(reply)
            if results is None:
                return
            res = mount3.decode_res(MountProc.MNT, results)
        except ProtocolError:
            return
        if res.ok:
            self.handles.add(res.body.fhandle, root=True)
            self.read_only.learn_root(path, res.body.fhandle)
            LOG.debug("root handle of %s admitted", path)

    async def walk_once(self):
        """Whether the exports were walked since the proxy started.

        Walks them now if not (and no walk failed within
        ``rescan_interval``): the read-only directories' files are known
        only after that.
        """
        if not self.read_only.walked:
            await self._walk_if_due()
        return self.read_only.walked

    # --- the walk ------------------------------------------------------------

    async def _walk_if_due(self):
        if self._walk is None:
            now = self.clock()
            if self._walked_at is not None and \
                    now - self._walked_at < self.rescan_interval:
                return
            self._walked_at = now
            self._walk = asyncio.ensure_future(self._run_walk())
            self._walk.add_done_callback(self._walk_done)
        # Shielded: a caller that goes away does not stop the walk the
        # others wait for.
        await asyncio.shield(self._walk)

    def _walk_done(self, walk):
        self._walk = None
        if walk.cancelled() or walk.exception() is not None:
            # Failed (the server is down): the next unknown handle may
            # try again at once.
            self._walked_at = None

    async def _run_walk(self):
        before = len(self.handles)
        started = self.clock()
        self.counters.handle_walks += 1
        whole = True
        for path in self.exports.exports:
            root = await self._mount(path)
            if root is None:
                continue
            self.handles.add(root, root=True)
            self.read_only.learn_root(path, root)
            whole = await self._walk_tree(root) and whole
        # Stopped short, it may have missed files of a read-only
        # directory: changes keep waiting (and failing) until one walk
        # goes through.
        self.read_only.walked = whole
        found = max(0, len(self.handles) - before)
        self.counters.handles_found_by_walk += found
        LOG.info("walked the allowed exports in %.1f s: %d handles "
                 "admitted, %d new", self.clock() - started,
                 len(self.handles), found)

    async def _walk_tree(self, root):
        """Admit every handle below ``root``; False if it stopped short."""
        directories = [root]
        while directories:
            if self.handles.full:
                LOG.warning("the allowed exports hold more than %d files: "
                            "the walk stopped there (raise [server] "
                            "max_admitted_handles)", self.handles.limit)
                return False
            directory = directories.pop()
            for entry in await self._list(directory):
                self.handles.add(entry.name_handle)
                self.read_only.learn_entry(handles_mod.Entry(
                    directory, entry.name, entry.name_handle,
                    entry.name_attributes))
                attrs = entry.name_attributes
                if attrs is not None and attrs.type == const.FileType.NF3DIR:
                    directories.append(entry.name_handle)
        return True

    async def _mount(self, path):
        """The root handle of ``path``, or None if the server refuses."""
        res = await self._call(self.mount.mount, MountProc.MNT,
                               mount3.MntArgs(path))
        if res is None or not res.ok:
            LOG.warning("walking the allowed exports: the NFS server "
                        "refused MNT of %s (%s)", path,
                        "garbled reply" if res is None else res.status)
            return None
        return res.body.fhandle

    async def _list(self, directory):
        """The entries of ``directory`` with handles, "." and ".." left out.

        An error (permissions, a directory removed meanwhile) lists
        nothing: its files stay unknown until a client looks them up.
        """
        entries, cookie, verifier = [], 0, b"\0" * const.NFS3_COOKIEVERFSIZE
        while True:
            res = await self._call(
                self.nfs.nfs, Nfs3Proc.READDIRPLUS, nfs3.ReaddirplusArgs(
                    directory, cookie, verifier, _DIRCOUNT, _MAXCOUNT))
            if res is None or not res.ok:
                LOG.debug("walk: READDIRPLUS failed: %s",
                          None if res is None else res.status)
                return entries
            entries.extend(
                e for e in res.body.entries
                if e.name_handle and e.name not in handles_mod.NOT_DOWN)
            if res.body.eof or not res.body.entries:
                return entries
            cookie = res.body.entries[-1].cookie
            verifier = res.body.cookieverf

    async def _call(self, send, proc, args):
        """``send(proc, args, cred)`` as the file account; its result.

        None if the server refused the call or garbled the reply.
        """
        try:
            return await send(proc, args, self.cred)
        except ReplyError as e:
            LOG.debug("walk: %s", e)
            return None
