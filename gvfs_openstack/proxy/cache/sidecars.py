# SPDX-License-Identifier: Apache-2.0
"""Finding and loading the metadata sidecar of each file a proxy reads.

NFS reads name a file by its handle, but a sidecar is found by name
(``.gvfs-meta.<name>`` in the same directory), so the proxy remembers
the directory and name of the handles that LOOKUP replies give it.  At
the first READ of a file it looks the sidecar up and reads it, with the
reader's own credential, once: concurrent first READs share the load,
and the result (a sidecar, or none) is kept per handle for as long as
the file's size and mtime stay the same.  Where there was none, the
proxy looks again after ``recheck_after`` seconds.

A sidecar made for another size or mtime is stale and ignored; a
malformed or hostile one is ignored with one warning.  Either way the
file is read block by block as if there were none: a sidecar can save
traffic, never change the bytes a client gets.
"""

import asyncio
import collections
import time

from oslo_log import log as logging

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.proxy.cache.freshness import version_key
from gvfs_openstack.proxy.upstream_calls import ReplyError
from gvfs_openstack.sidecar import format as meta_format
from gvfs_openstack.sidecar import trust

LOG = logging.getLogger(__name__)

MAX_FILES = 65536


class Sidecars:
    """Where each file's sidecar is, and the sidecars loaded.

    ``upstream`` is the :class:`UpstreamCalls` they are read through,
    ``max_read`` the largest READ to send.
    """

    def __init__(self, upstream, counters, max_read=1024 * 1024,
                 recheck_after=60.0, clock=time.monotonic):
        self.upstream = upstream
        #: :class:`counters.SidecarCounters`
        self.counters = counters
        self.max_read = max_read
        self.recheck_after = recheck_after
        self.clock = clock
        self._names = collections.OrderedDict()
        #: fh -> (Sidecar or None, (size, mtime_ns), when loaded)
        self._loaded = collections.OrderedDict()
        self._loading = {}

    @staticmethod
    def _remember(table, key, value):
        table[key] = value
        table.move_to_end(key)
        if len(table) > MAX_FILES:
            table.popitem(last=False)

    def learn(self, dir_fh, name, fh):
        """A LOOKUP said ``name`` in ``dir_fh`` is ``fh``."""
        if fh and not meta_format.is_sidecar(name):
            self._remember(self._names, bytes(fh), (bytes(dir_fh), name))

    def forget(self, fh):
        """``fh`` is gone: forget where its sidecar was, and the sidecar."""
        fh = bytes(fh)
        self._names.pop(fh, None)
        self._loaded.pop(fh, None)

    def where(self, fh):
        """``(dir_fh, name)`` a LOOKUP gave for ``fh``, or None."""
        return self._names.get(bytes(fh))

    async def load_zeros(self, call, state):
        """Give ``state`` its file's sidecar and zero map, once a version.

        What :func:`freshness.zeros_of` then answers with.
        """
        key = version_key(state.fattr)
        if state.zeros_for != key:
            state.sidecar = await self.sidecar_of(call, state)
            state.zeros = state.sidecar.zeros if state.sidecar else None
            state.zeros_for = key

    async def sidecar_of(self, call, state):
        """The sidecar that describes the file of ``state`` now, or None."""
        fh = state.fh
        key = version_key(state.fattr)
        found = self._loaded.get(fh)
        if found is not None and found[1] == key and (
                found[0] is not None or
                self.clock() - found[2] < self.recheck_after):
            return found[0]
        where = self._names.get(fh)
        if where is None:
            return None
        loading = self._loading.get(fh)
        if loading is None:
            loading = self._loading[fh] = asyncio.ensure_future(
                self._load(call, where, key, state.fattr))
            loading.add_done_callback(
                lambda _: self._loading.pop(fh, None))
        sidecar = await asyncio.shield(loading)
        if fh in self._names:  # Not forgotten (removed) meanwhile.
            self._remember(self._loaded, fh, (sidecar, key, self.clock()))
        return sidecar

    async def _load(self, call, where, key, fattr):
        dir_fh, name = where
        try:
            data = await self.read_beside(call, dir_fh,
                                          meta_format.sidecar_name(name),
                                          meta_format.MAX_BYTES, fattr)
            if data is None:
                return None
            # Up to MAX_BYTES of JSON, about 2 s of CPU: on the loop it
            # would stall every client of the proxy meanwhile.
            sidecar = await asyncio.to_thread(meta_format.parse, data)
        except meta_format.SidecarError as e:
            self.counters.sidecars_invalid += 1
            LOG.warning("ignoring the metadata sidecar of %r: %s", name, e)
            return None
        except ReplyError:
            return None  # Unreadable now: block reads, look again later.
        if not sidecar.matches(*key):
            self.counters.sidecars_stale += 1
            LOG.info("ignoring the stale metadata sidecar of %r (made for "
                     "another size or mtime)", name)
            return None
        self.counters.sidecars_loaded += 1
        return sidecar

    async def read_beside(self, call, dir_fh, sidecar_name, max_bytes,
                          described):
        """A sidecar's bytes, or None if there is none to read now.

        With the reader's credential: a sidecar is read only by those
        who may read its directory.  ``described`` is the attributes of
        the file it describes.  A file that is not regular, is larger
        than ``max_bytes``, others may write or is not
        :meth:`_written_by_an_owner` raises SidecarError, before a byte
        of it is read.
        """
        res = await self.upstream.nfs(
            Nfs3Proc.LOOKUP, nfs3.LookupArgs(nfs3.DirOpArgs(
                dir_fh, sidecar_name)), call.cred, call.verf)
        if not res.ok:
            return None  # None there (NOENT), or not for this reader.
        fh = res.body.object
        attrs = res.body.obj_attributes or await self._getattr(call, fh)
        trust.check_file(attrs, max_bytes)
        await self._written_by_an_owner(call, dir_fh, res.body, attrs,
                                        described)
        data = bytearray()
        while len(data) <= max_bytes:
            read = await self.upstream.nfs(
                Nfs3Proc.READ, nfs3.ReadArgs(fh, len(data), self.max_read),
                call.cred, call.verf)
            if not read.ok:
                return None
            data += read.body.data
            if read.body.eof or not read.body.data:
                return bytes(data)
        raise meta_format.SidecarError("larger than %d bytes" % max_bytes)

    async def _written_by_an_owner(self, call, dir_fh, lookup, attrs,
                                   described):
        """SidecarError unless only the file's owners can write the sidecar.

        :mod:`gvfs_openstack.sidecar.trust` says why; the directory's
        attributes are asked for only when they decide.
        """
        if trust.needs_directory(attrs, described.uid):
            directory = lookup.dir_attributes or \
                await self._getattr(call, dir_fh)
            trust.check_owner(attrs, described.uid, directory.uid)

    async def _getattr(self, call, fh):
        res = await self.upstream.nfs(
            Nfs3Proc.GETATTR, nfs3.GetattrArgs(fh), call.cred, call.verf)
        if not res.ok:
            raise ReplyError("GETATTR beside a sidecar: %s"
                             % const.NfsStat(res.status).name)
        return res.body.obj_attributes
