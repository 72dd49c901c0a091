# SPDX-License-Identifier: Apache-2.0
"""``gvfs-proxy mount``: a FUSE file system that is an NFSv3 client.

Every FUSE request becomes NFS calls to the client proxy, so a mounted
path gets the proxy's block cache, zero maps, whole-file channel, write
policy and tunnel without a kernel NFS client (and without root beyond
FUSE itself).  Built on pyfuse3: it is the maintained binding of libfuse
3 (by libfuse's own maintainers), its low-level API is inode-based like
NFS is handle-based, and its asyncio mode runs on the same event loop as
the project's NFS client.  pyfuse3 has no ``lseek`` handler, so
SEEK_DATA/SEEK_HOLE on the mount see one data extent (the kernel's
default); holes are still made by writing sparse files and kept by
``truncate``.
"""

import asyncio
import collections
import dataclasses
import errno
import functools
import itertools
import math
import os
import secrets
import signal
import socket
import stat
import time

from oslo_log import log as logging
import pyfuse3
import pyfuse3.asyncio

from gvfs_openstack.client import nfs as nfs_client
from gvfs_openstack.deadline import within
from gvfs_openstack.fuse import callers
from gvfs_openstack.fuse import counters
from gvfs_openstack.fuse import inodes
from gvfs_openstack.fuse import nfsattr
from gvfs_openstack.fuse import prefill
from gvfs_openstack.fuse import presentation
from gvfs_openstack.fuse import readcache
from gvfs_openstack.fuse import session as nfs_session
from gvfs_openstack.fuse import unlinked
from gvfs_openstack import heap
from gvfs_openstack.mount import fusectl
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import LocalProtocolError
from gvfs_openstack.nfs.errors import RpcError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc

LOG = logging.getLogger(__name__)
MIB = 1024 * 1024


@dataclasses.dataclass(frozen=True)
class MountOptions:
    """How a mount serves its files: ``[mount]``, read once at start.

    Timeouts are the kernel's caching of attributes and names (seconds;
    ``dir_entry_timeout``, for both of a directory, None:
    ``entry_timeout``); ``write_buffer_bytes``
    what a file's writes may hold before they go out;
    ``read_cache_bytes`` the RAM kept of what was read (0: none), and
    ``prefill_from_profiles`` whether an image's boot profile fills it
    at the image's open (:mod:`prefill`).
    ``allow_other``, ``max_background`` and ``read_ahead_kb`` tune the
    FUSE connection (0: the kernel's own); ``identity`` "caller" sends
    requests as the users who make them; ``trim_when_idle`` gives the
    memory of READs back to the kernel once calls stop; ``shown_as``
    says whose the files look like.
    """

    attr_timeout: float = 1.0
    entry_timeout: float = 1.0
    dir_entry_timeout: float | None = None
    write_buffer_bytes: int = 64 * MIB
    read_cache_bytes: int = 0
    prefill_from_profiles: bool = False
    allow_other: bool = False
    max_background: int = 0
    read_ahead_kb: int = 0
    identity: str = "daemon"
    trim_when_idle: bool = False
    shown_as: presentation.Presentation = presentation.Presentation()

    @classmethod
    def from_conf(cls, mount, **more):
        """The options of oslo.config group ``mount`` (``[mount]``).

        ``more`` are those that group does not hold.
        """
        return cls(attr_timeout=mount.attr_timeout,
                   entry_timeout=mount.entry_timeout,
                   dir_entry_timeout=mount.dir_entry_timeout,
                   write_buffer_bytes=mount.write_buffer_mb * MIB,
                   read_cache_bytes=mount.read_cache_mb * MIB,
                   prefill_from_profiles=mount.prefill_from_profiles,
                   allow_other=mount.allow_other,
                   max_background=mount.max_background,
                   read_ahead_kb=mount.read_ahead_kb,
                   identity=mount.identity, **more)


pyfuse3.asyncio.enable()

_DOTS = (".", "..")


#: NAME_MAX: longer names are refused here rather than sent to the server.
_NAME_MAX = 255

#: What a write by anyone but root clears (chmod(2), "Privileges").
_PRIVILEGE_BITS = stat.S_ISUID | stat.S_ISGID


def _name(raw):
    """A FUSE name (bytes) as the str the NFS codec carries."""
    if len(raw) > _NAME_MAX:
        raise pyfuse3.FUSEError(errno.ENAMETOOLONG)
    return os.fsdecode(raw)


def _errno_for(error):
    """The errno a request that failed with ``error`` answers.

    The kernel waits for an answer to every request: a handler that
    raised anything but FUSEError would leave its caller blocked in the
    kernel forever, so every failure gets one.
    """
    if isinstance(error, nfs_session.OperationFailed):
        return error.errno
    if isinstance(error, inodes.StaleInode):
        return errno.ESTALE
    if isinstance(error, nfsattr.NotRepresentable):
        return errno.EOVERFLOW
    if isinstance(error, LocalProtocolError):
        return errno.EINVAL     # Arguments NFSv3 cannot encode.
    if isinstance(error, TimeoutError):
        return errno.ETIMEDOUT
    if isinstance(error, OSError) and error.errno:
        return error.errno
    return errno.EIO


#: pyfuse3's request handlers that answer the kernel (``forget`` has no
#: answer).
_REQUESTS = ("lookup", "getattr", "setattr", "readlink", "mknod", "mkdir",
             "symlink", "link", "unlink", "rmdir", "rename", "opendir",
             "readdir", "releasedir", "open", "create", "read", "write",
             "flush", "fsync", "release", "statfs", "access", "setxattr",
             "getxattr", "listxattr", "removexattr", "fsyncdir")


def _answering(handler):
    """``handler``, answering every failure and acting as its caller."""
    name = handler.__name__

    @functools.wraps(handler)
    async def answer(self, *args):
        acting = None
        self.counters.request(name)
        try:
            acting = nfs_client.ACTING_AS.set(self._credential(args))
            return await handler(self, *args)
        except pyfuse3.FUSEError as e:
            self.counters.failed(e.errno)
            raise
        except Exception as e:
            err = _errno_for(e)
            self.counters.failed(err)
            if err == errno.EIO and not isinstance(e, OSError):
                LOG.exception("%s failed in the mount", handler.__name__)
            else:
                LOG.debug("%s: %s (%s)", handler.__name__,
                          errno.errorcode.get(err, err), e)
            raise pyfuse3.FUSEError(err) from e
        finally:
            if acting is not None:
                nfs_client.ACTING_AS.reset(acting)
    return answer


def _answers_every_request(cls):
    """Wrap each request handler ``cls`` defines in :func:`_answering`."""
    for name in _REQUESTS:
        if name in vars(cls):
            setattr(cls, name, _answering(vars(cls)[name]))
    return cls


@_answers_every_request
class GvfsFuse(pyfuse3.Operations):
    """The FUSE operations of one mounted export."""

    supports_dot_lookup = False
    enable_writeback_cache = False

    def __init__(self, session, options=MountOptions(), unlinked_files=None,
                 callers=None):
        super().__init__()
        self.session = session
        #: :class:`presentation.Presentation`: whose the files look like.
        self.shown_as = options.shown_as
        #: :class:`callers.Callers` when requests go as the users who
        #: make them; None: as this daemon.
        self.callers = callers
        #: Credential of who opened each file or directory handle: reads
        #: and writes through it go as that user (as the kernel NFS
        #: client does), since the kernel does not say who makes them.
        self._openers = {}
        #: :class:`unlinked.UnlinkedFiles`: where files unlinked while
        #: open wait for their last close.  :func:`serve` names it after
        #: the mount, so that the next run cleans up after a crash; by
        #: default it has a name of its own that no later run knows.
        self.unlinked = unlinked_files or unlinked.UnlinkedFiles(
            session, secrets.token_hex(8))
        self.attr_timeout = options.attr_timeout
        self.entry_timeout = options.entry_timeout
        self.dir_entry_timeout = options.entry_timeout \
            if options.dir_entry_timeout is None \
            else options.dir_entry_timeout
        self.write_buffer_bytes = options.write_buffer_bytes
        self.inodes = inodes.InodeTable(session.root)
        #: :class:`counters.KernelCounters`: reads and writes served.
        self.counters = counters.KernelCounters()
        self._handles = itertools.count(1)
        self._open = {}        # file handle -> (inode, FileWriter or None)
        self._open_count = collections.Counter()    # inode -> handles
        self._hidden = {}      # inode -> where unlink or rename hid it
        self._listings = {}    # directory handle -> entries
        self._fsstat = None    # (FSSTAT result, when it was asked)
        self.read_cache = readcache.ReadCache(options.read_cache_bytes) \
            if options.read_cache_bytes else None
        #: Where each regular file was looked up: inode -> (parent
        #: inode, name), for the profile beside it.
        self._names = {}
        self.prefill = prefill.Prefill(
            self._lookup_entry, self._getattr_of, self._read_small,
            self._fetch_extents,
            self.read_cache.holds, self.read_cache.block_size,
            session.client.rsize, self.read_cache.capacity // 2) \
            if self.read_cache is not None and \
            options.prefill_from_profiles else None
        #: Whether the proxy answers READV (one of an older release does
        #: not): the prefill reads run by run from it otherwise.
        self._proxy_readv = True
        #: Set once the kernel's INIT has been handled; its reply goes
        #: out when :meth:`init` returns, so a task woken by this event
        #: runs after the kernel has applied it.
        self.initialized = asyncio.Event()

    def init(self):
        self.initialized.set()

    # --- helpers -----------------------------------------------------------

    def _entry(self, fattr, ino):
        if self.read_cache is not None:
            self.read_cache.observe(ino, fattr)
        entry = pyfuse3.EntryAttributes()
        for field, value in self.shown_as.apply(nfsattr.stat_fields(
                fattr, ino, self.session.client.rsize)).items():
            setattr(entry, field, value)
        if ino in self._hidden:
            # Its hidden name is no link to the user: unlinked while open
            # is nlink 0, as on a local file system.
            entry.st_nlink = max(entry.st_nlink - 1, 0)
        if fattr.type == const.FileType.NF3DIR:
            entry.attr_timeout = entry.entry_timeout = self.dir_entry_timeout
        else:
            entry.attr_timeout = self.attr_timeout
            entry.entry_timeout = self.entry_timeout
        return entry

    async def _attrs_of(self, fh, fattr=None):
        if fattr is None:
            fattr = await self.session.call("getattr", fh)
        return fattr

    async def _new_entry(self, fh, fattr=None):
        """Attributes of a file the kernel now holds a reference to."""
        known = self.inodes.known(fh)
        if known is not None and await self._settle_writes(known):
            fattr = None    # Asked before the writes were answered.
        fattr = await self._attrs_of(fh, fattr)
        return self._entry(fattr, self.inodes.remember(fh))

    async def _settle_writes(self, inode):
        """Wait out the WRITEs of ``inode`` in flight; whether there were.

        Attributes asked meanwhile would show the size and mtime from
        before them, and the kernel would believe them: to it the writes
        were over when this daemon took them.
        """
        writers = [writer for writer in self._writers_of(inode)
                   if writer.in_flight]
        for writer in writers:
            await writer.settle(0, math.inf)
        return bool(writers)

    def _fh(self, ino):
        return self.inodes.handle(ino)

    def _credential(self, args):
        """Who a request with ``args`` acts as; None: this daemon."""
        if self.callers is None or not args:
            return None
        if isinstance(args[-1], pyfuse3.RequestContext):
            return self.callers.of(args[-1])
        return self._openers.get(args[0])   # A file or directory handle.

    # --- names ---------------------------------------------------------------

    async def lookup(self, parent_inode, name, ctx=None):
        name = _name(name)
        ok = await self.session.call("lookup", self._fh(parent_inode), name)
        entry = await self._new_entry(ok.object, ok.obj_attributes)
        if self.prefill is not None and stat.S_ISREG(entry.st_mode):
            self._names[entry.st_ino] = (parent_inode, name)
        return entry

    def forget(self, inode_list):
        for ino, count in inode_list:
            if self.inodes.forget(ino, count):
                self._names.pop(ino, None)
                if self.read_cache is not None:
                    self.read_cache.forget(ino)
                if self.prefill is not None:
                    self.prefill.forget(ino)

    async def getattr(self, inode, ctx=None):
        fh = self._fh(inode)
        await self._settle_writes(inode)
        return self._entry(await self.session.call("getattr", fh),
                           inode)

    async def setattr(self, inode, attr, fields, fh, ctx):
        nfs_fh = self._fh(inode)
        if fields.update_size:
            await self._commit_inode(inode)
            if self.read_cache is not None:
                self.read_cache.invalidate(inode)
        changes = {"mode": fields.update_mode, "uid": fields.update_uid,
                   "gid": fields.update_gid, "size": fields.update_size,
                   "atime": fields.update_atime,
                   "mtime": fields.update_mtime}
        values = {"st_mode": attr.st_mode, "st_uid": attr.st_uid,
                  "st_gid": attr.st_gid, "st_size": attr.st_size,
                  "st_atime_ns": attr.st_atime_ns,
                  "st_mtime_ns": attr.st_mtime_ns}
        dropped = await self._privileges_dropped(nfs_fh, changes, values)
        if dropped is None:
            after = (await self.session.call(
                "setattr", nfs_fh, nfsattr.sattr(changes, values))
            ).obj_wcc.after
        else:
            # The rest as the caller, then the drop as this daemon (whose
            # reply's attributes are the last word).
            changes["mode"] = False
            if any(changes.values()):
                await self.session.call("setattr", nfs_fh,
                                        nfsattr.sattr(changes, values))
            after = await self._drop_privileges(nfs_fh, dropped)
        return self._entry(await self._attrs_of(nfs_fh, after), inode)

    async def _privileges_dropped(self, nfs_fh, changes, values):
        """The mode a write's privilege drop asks for, if this is one.

        On a write, truncate or chown of a set-user-ID or set-group-ID
        file by anyone without ``CAP_FSETID``, the kernel asks FUSE to
        clear those bits, as the writer.  Acting as its callers, the
        mount would send that as a SETATTR of the writer, which the NFS
        server refuses to anyone but the owner: the bits would stay, and
        whoever may write a set-user-ID program could change it and keep
        it privileged.  A mode change that only clears those bits of a
        regular file, asked for by someone who does not own it, is that
        drop: a chmod of someone else's file never reaches the mount
        (``default_permissions``: the kernel refuses it first).  None
        for anything else.
        """
        if self.callers is None or not changes["mode"]:
            return None
        new = stat.S_IMODE(values["st_mode"])
        current = await self.session.call("getattr", nfs_fh)
        old = current.mode & 0o7777
        acting = nfs_client.ACTING_AS.get()
        caller = rpc.AuthSys.from_opaque(acting) if acting else None
        if current.type != const.FileType.NF3REG or caller is None or \
                caller.uid == current.uid or new & ~old or \
                not old & ~new or (old & ~new) & ~_PRIVILEGE_BITS:
            return None
        return new

    async def _drop_privileges(self, nfs_fh, mode):
        """Clear the bits as this daemon: a change that only takes away.

        The daemon's own credential must be allowed to (root with the
        server proxy's ``allow_root``, or the file account the files
        belong to); if it is not, the request fails as before, and the
        write with it.
        """
        acting = nfs_client.ACTING_AS.set(None)
        try:
            wcc = await self.session.call("setattr", nfs_fh,
                                          nfs3.Sattr(mode=mode))
        finally:
            nfs_client.ACTING_AS.reset(acting)
        return wcc.obj_wcc.after

    async def _truncate(self, inode, fh):
        """Empty a file opened with O_TRUNC.

        libfuse asks the kernel for atomic O_TRUNC: the flag comes with the
        open and no truncating setattr follows, so the open does it.  Its
        times change even if it was empty already (POSIX open(3p)).  Not
        for O_RDONLY|O_TRUNC (undefined in POSIX): the kernel refuses that
        one with ETXTBSY for a running program only after this open, and
        the program would be gone by then.
        """
        await self._commit_inode(inode)
        if self.read_cache is not None:
            self.read_cache.invalidate(inode)
        await self.session.call("setattr", fh, nfs3.Sattr(
            size=0, mtime=const.TimeHow.SET_TO_SERVER_TIME))

    async def readlink(self, inode, ctx):
        return os.fsencode(await self.session.call(
            "readlink", self._fh(inode)))

    async def mkdir(self, parent_inode, name, mode, ctx):
        fh, fattr = await self.session.call(
            "mkdir", self._fh(parent_inode), _name(name), mode & 0o7777,
            attributes=True, idempotent=False)
        return await self._new_entry(fh, fattr)

    async def mknod(self, parent_inode, name, mode, rdev, ctx):
        file_type = nfsattr.MKNOD_TYPES.get(stat.S_IFMT(mode))
        if file_type is None:
            # Regular files come through create; anything else mknod(2)
            # refuses itself.
            raise pyfuse3.FUSEError(errno.EINVAL)
        fh, fattr = await self.session.call(
            "mknod", self._fh(parent_inode), _name(name), file_type,
            mode & 0o7777, (os.major(rdev), os.minor(rdev)),
            attributes=True, idempotent=False)
        return await self._new_entry(fh, fattr)

    async def symlink(self, parent_inode, name, target, ctx):
        fh, fattr = await self.session.call(
            "symlink", self._fh(parent_inode), _name(name),
            os.fsdecode(target), attributes=True, idempotent=False)
        return await self._new_entry(fh, fattr)

    async def link(self, inode, new_parent_inode, new_name, ctx):
        fh = self._fh(inode)
        await self.session.call(
            "link", fh, self._fh(new_parent_inode), _name(new_name),
            idempotent=False)
        return await self._new_entry(fh)

    async def unlink(self, parent_inode, name, ctx):
        dir_fh, name = self._fh(parent_inode), _name(name)
        if not await self._hide_if_open(dir_fh, name):
            await self.session.call("remove", dir_fh, name,
                                    idempotent=False)

    async def _hide_if_open(self, dir_fh, name):
        """Hide ``name`` instead of losing it if it is open here.

        Only when some file is open is the name looked up: an unlink or
        rename costs no extra round trip otherwise.
        """
        if not self._open_count:
            return False
        try:
            fh = (await self.session.call("lookup", dir_fh, name)).object
        except nfs_session.OperationFailed:
            return False    # The REMOVE or RENAME itself says why.
        ino = self.inodes.known(fh)
        if ino is None or not self._open_count[ino] or ino in self._hidden:
            return False
        self._hidden[ino] = None    # Being hidden: one RENAME, not two.
        try:
            hidden = await self.unlinked.hide(dir_fh, name)
        except nfs_session.OperationFailed as e:
            del self._hidden[ino]
            # Removed at once after all; its open descriptors go stale.
            LOG.warning("cannot keep %s, open here, in %s: %s", name,
                        unlinked.DIRECTORY, e)
            return False
        if self._open_count[ino]:
            self._hidden[ino] = hidden
        else:
            # Its last close came while the RENAME was on its way (the
            # kernel sends RELEASE after close() returns): nobody will
            # close it again, so it goes now.
            del self._hidden[ino]
            await self.unlinked.drop(hidden)
        return True

    async def rmdir(self, parent_inode, name, ctx):
        await self.session.call("rmdir", self._fh(parent_inode),
                                _name(name), idempotent=False)

    async def rename(self, parent_inode_old, name_old, parent_inode_new,
                     name_new, flags, ctx):
        if flags & pyfuse3.RENAME_EXCHANGE:
            # NFSv3 has no atomic exchange.
            raise pyfuse3.FUSEError(errno.EINVAL)
        old_dir = self._fh(parent_inode_old)
        new_dir = self._fh(parent_inode_new)
        if flags & pyfuse3.RENAME_NOREPLACE:
            await self._refuse_existing(new_dir, _name(name_new))
        else:
            # A file replaced while open stays readable through it.
            await self._hide_if_open(new_dir, _name(name_new))
        await self.session.call("rename", old_dir, _name(name_old),
                                new_dir, _name(name_new),
                                idempotent=False)

    async def _refuse_existing(self, dir_fh, name):
        try:
            await self.session.call("lookup", dir_fh, name)
        except nfs_session.OperationFailed as e:
            if e.errno == errno.ENOENT:
                return
            raise
        raise pyfuse3.FUSEError(errno.EEXIST)

    # --- directories -------------------------------------------------------

    async def opendir(self, inode, ctx):
        entries = [e for e in await self.session.call(
            "readdirplus", self._fh(inode))
            if e.name not in _DOTS and not (
                inode == pyfuse3.ROOT_INODE and e.name == unlinked.DIRECTORY)]
        handle = next(self._handles)
        self._listings[handle] = (inode, entries)
        self._openers[handle] = nfs_client.ACTING_AS.get()
        return handle

    async def readdir(self, fh, start_id, token):
        dir_inode, entries = self._listings[fh]
        for index in range(start_id, len(entries)):
            entry = entries[index]
            nfs_fh = entry.name_handle
            if nfs_fh is None:
                nfs_fh = (await self.session.call(
                    "lookup", self._fh(dir_inode), entry.name)).object
            fattr = await self._attrs_of(nfs_fh, entry.name_attributes)
            attrs = self._entry(fattr, self.inodes.inode(nfs_fh))
            if not pyfuse3.readdir_reply(token, os.fsencode(entry.name),
                                         attrs, index + 1):
                return
            self.inodes.remember(nfs_fh)

    async def releasedir(self, fh):
        self._listings.pop(fh, None)
        self._openers.pop(fh, None)

    # --- files ---------------------------------------------------------------

    async def open(self, inode, flags, ctx):
        fh = self._fh(inode)
        if flags & os.O_TRUNC and flags & os.O_ACCMODE != os.O_RDONLY:
            await self._truncate(inode, fh)
        if self.read_cache is not None:
            # Close-to-open: what another host changed since shows
            # from this open on.
            await self._settle_writes(inode)
            fattr = await self.session.call("getattr", fh)
            self.read_cache.observe(inode, fattr)
            if self.prefill is not None and \
                    flags & os.O_ACCMODE == os.O_RDONLY:
                self._prefill(inode, fattr)
        return pyfuse3.FileInfo(fh=self._opened(inode))

    def _prefill(self, inode, fattr):
        """Fill the RAM cache from the boot profile of ``inode``, if any."""
        where = self._names.get(inode)
        if where is None:
            return
        try:
            directory = self._fh(where[0])
        except inodes.StaleInode:
            return
        self.prefill.opened(inode, (fattr.size, fattr.mtime.nanoseconds),
                            directory, where[1], fattr.uid)

    async def _lookup_entry(self, dir_fh, name):
        """The LOOKUP reply of ``name`` in ``dir_fh``, None if not there."""
        try:
            return await self.session.call("lookup", dir_fh, name)
        except nfs_session.OperationFailed as e:
            if e.errno == errno.ENOENT:
                return None
            raise

    async def _getattr_of(self, fh):
        return await self.session.call("getattr", fh)

    async def _read_small(self, fh, limit):
        """A file of at most ``limit`` bytes, whole; more: ValueError."""
        data = bytearray()
        while len(data) <= limit:
            ok = await self.session.call("read", fh, len(data),
                                         self.session.client.rsize)
            data += ok.data
            if ok.eof or not ok.data:
                return bytes(data)
        raise ValueError("larger than %d bytes" % limit)

    async def create(self, parent_inode, name, mode, flags, ctx):
        fh, fattr = await self.session.call(
            "create", self._fh(parent_inode), _name(name),
            mode & 0o7777, bool(flags & os.O_EXCL), attributes=True,
            idempotent=False)
        entry = await self._new_entry(fh, fattr)
        return pyfuse3.FileInfo(fh=self._opened(entry.st_ino)), entry

    def _opened(self, inode):
        handle = next(self._handles)
        self._open[handle] = [inode, None]
        self._open_count[inode] += 1
        self._openers[handle] = nfs_client.ACTING_AS.get()
        return handle

    async def read(self, fh, off, size):
        inode = self._open[fh][0]
        for writer in self._writers_of(inode):
            await writer.settle(off, off + size)
        if self.read_cache is None:
            data = await self._fetch(inode, off, size)
        else:
            if self.prefill is not None and \
                    not self.read_cache.holds(inode, off, size):
                await self.prefill.arrived(inode, off, off + size)
            data = self.read_cache.get(inode, off, size)
            if data is None:
                start, end = self.read_cache.span(off, size)
                data = await self._fetch(inode, start, end - start)
                data = data[off - start:off - start + size]
        self.counters.read_bytes += len(data)
        return data

    async def _fetch(self, inode, off, size):
        """READs of [off, +size) until all of it or the end of the file.

        What they bring back is offered to the RAM cache.
        """
        nfs_fh = self._fh(inode)
        chunks = []
        while size > 0:
            if self.read_cache is not None:
                token = self.read_cache.begin(inode)
            ok = await self.session.call(
                "read", nfs_fh, off, min(size, self.session.client.rsize))
            if self.read_cache is not None:
                self.read_cache.store(inode, token, ok.file_attributes, off,
                                      ok.data)
            chunks.append(ok.data)
            off += len(ok.data)
            size -= len(ok.data)
            if ok.eof or not ok.data:
                break
        return b"".join(chunks)

    async def _fetch_extents(self, inode, extents):
        """READVs of ``(offset, length)`` extents into the RAM cache.

        The bytes read.  A proxy that does not answer READV gets a READ
        per extent, from then on.  Not retried on a lost connection: a
        prefill is only an optimisation.
        """
        nfs_fh = self._fh(inode)
        got = 0
        while extents and self._proxy_readv:
            token = self.read_cache.begin(inode)
            try:
                fattr, pieces = await within(
                    self.session.io_timeout,
                    self.session.client.bulk_readv(nfs_fh, extents))
            except RpcError as e:
                if not rpc.not_served(e.reply):
                    raise
                LOG.info("the proxy %s does not answer READV (%s): "
                         "prefilling READ by READ", self.session.where, e)
                self._proxy_readv = False
                break
            for (offset, _), piece in zip(extents, pieces):
                self.read_cache.store(inode, token, fattr, offset, piece)
                got += len(piece)
            extents = extents[len(pieces):]
        for offset, length in extents:
            got += len(await self._fetch(inode, offset, length))
        return got

    async def write(self, fh, off, buf):
        state = self._open[fh]
        if self.read_cache is not None:
            self.read_cache.invalidate(state[0], off, off + len(buf))
        if state[1] is None:
            state[1] = nfs_session.FileWriter(
                self.session, self._fh(state[0]),
                self.write_buffer_bytes)
        await state[1].write(off, bytes(buf))
        self.counters.written_bytes += len(buf)
        return len(buf)

    @property
    def open_files(self):
        """File handles the kernel holds open."""
        return len(self._open)

    @property
    def buffered_bytes(self):
        """Bytes written and not yet COMMITted: lost if the node dies."""
        return sum(writer.pending for _, writer in self._open.values()
                   if writer is not None)

    async def _commit_handle(self, fh):
        writer = self._open[fh][1]
        if writer is not None and (writer.pending or writer.broken):
            await writer.commit()

    def _writers_of(self, inode):
        return [writer for ino, writer in list(self._open.values())
                if ino == inode and writer is not None]

    async def _commit_inode(self, inode):
        for handle, (ino, _) in list(self._open.items()):
            if ino == inode:
                await self._commit_handle(handle)

    async def flush(self, fh):
        await self._commit_handle(fh)

    async def fsync(self, fh, datasync):
        await self._commit_handle(fh)

    async def release(self, fh):
        try:
            await self._commit_handle(fh)
        finally:
            opened = self._open.pop(fh, None)
            self._openers.pop(fh, None)
            if opened is not None:
                await self._closed(opened[0])

    async def _closed(self, inode):
        self._open_count[inode] -= 1
        if self._open_count[inode] > 0:
            return
        del self._open_count[inode]
        if self._hidden.get(inode, 0) is None:
            return      # Being hidden: _hide_if_open drops it when done.
        hidden = self._hidden.pop(inode, None)
        if hidden is not None:
            await self.unlinked.drop(hidden)

    async def statfs(self, ctx):
        """The export's usage, asked at most once per ``attr_timeout``.

        The kernel does not cache statfs, and qemu and df ask for it at
        every open; each ask is a round trip to the DTN.
        """
        now = time.monotonic()
        if self._fsstat is not None and \
                now - self._fsstat[1] < self.attr_timeout:
            ok = self._fsstat[0]
        else:
            ok = await self.session.call("fsstat")
            self._fsstat = (ok, now)
        block = 4096
        stats = pyfuse3.StatvfsData()
        stats.f_bsize = self.session.client.wsize
        stats.f_frsize = block
        stats.f_blocks = ok.tbytes // block
        stats.f_bfree = ok.fbytes // block
        stats.f_bavail = ok.abytes // block
        stats.f_files = ok.tfiles
        stats.f_ffree = ok.ffiles
        stats.f_favail = ok.afiles
        stats.f_namemax = 255
        return stats


async def _tune_read_ahead(ops, mountpoint, kib):
    """Raise the mount's read-ahead once the kernel's INIT is answered.

    The INIT reply sets it (to at most the kernel's 128 KiB): set before,
    it would be lost.  This waits for :attr:`GvfsFuse.initialized`, not
    for a stat of the mount point: no thread of this daemon may wait on
    its own mount.  Killed while such a call was in user space, the
    daemon would never exit -- the kernel waits out a request already
    read, and the connection aborts only when the last thread is gone.
    """
    await ops.initialized.wait()
    try:
        fusectl.tune_read_ahead(mountpoint, kib)
        LOG.info("%d KiB read-ahead on %s", kib, mountpoint)
    except fusectl.FusectlError as e:
        LOG.warning("the kernel keeps its own read-ahead on %s, not "
                    "[mount] read_ahead_kb = %d: %s", mountpoint, kib, e)


def _terminate():
    try:
        pyfuse3.terminate()
    except asyncio.InvalidStateError:
        # pyfuse3's asyncio shim trips over a read that completed in the
        # same loop iteration; the next iteration is clean.
        asyncio.get_running_loop().call_soon(_terminate)


async def serve(session, mountpoint, options=MountOptions(),
                metrics_address=None, on_hangup=None, on_ready=None):
    """MNT through ``session``, mount at ``mountpoint``, serve until
    SIGTERM/SIGINT or an external unmount, then unmount.

    The MNT comes first so that a wrong export or an unreachable proxy is
    an error at start, not an empty directory.  With ``options.identity``
    "caller" requests go as the users who make them, and the kernel
    checks their permissions against the files' modes first
    (``default_permissions``) as it does for a local file system.  With
    ``options.trim_when_idle`` the memory kept for its READs
    (:func:`heap.retain_freed`) goes back to the kernel once its calls
    stop.  (:func:`presentation.for_group` refuses a group to show the
    files as with ``identity`` "caller".)  With ``metrics_address``
    (host, port, token) the mount's Prometheus endpoint is bound there
    before anything is mounted: a port in use is an error at start.
    SIGHUP calls ``on_hangup`` (re-read the configuration, re-open the
    log, as logrotate's ``postrotate`` asks); it never ends the mount,
    whose guests would lose their disks.  ``on_ready`` is called once
    mounted (systemd's readiness).
    """
    await session.start()
    unlinked_files = unlinked.UnlinkedFiles(
        session, unlinked.mount_id(mountpoint, session.export))
    try:
        await unlinked_files.clean_up()
    except nfs_session.OperationFailed as e:
        LOG.warning("cannot remove files a crash left unlinked in %s: %s",
                    unlinked.DIRECTORY, e)
    acting_as_callers = options.identity == "caller"
    ops = GvfsFuse(session, options, unlinked_files,
                   callers.Callers(socket.gethostname())
                   if acting_as_callers else None)
    endpoint = None
    if metrics_address is not None:
        # Imported here: prometheus-client is needed only to serve it.
        from gvfs_openstack.fuse import metrics
        host, port, token = metrics_address
        endpoint = metrics.endpoint(host, port, ops, token=token)
        await endpoint.start()
    fuse_options = set(pyfuse3.default_options)
    fuse_options |= {"fsname=gvfs:%s" % session.where, "subtype=gvfs"}
    if options.allow_other:
        fuse_options.add("allow_other")
    if acting_as_callers:
        fuse_options.add("default_permissions")
    try:
        pyfuse3.init(ops, mountpoint, fuse_options)
    except BaseException:
        if endpoint is not None:
            await endpoint.close()
        raise
    max_background = options.max_background
    if max_background:
        try:
            fusectl.tune(mountpoint, max_background)
            LOG.info("up to %d requests in flight to %s", max_background,
                     mountpoint)
        except fusectl.FusectlError as e:
            LOG.warning("the kernel keeps its own limit of requests in "
                        "flight to %s, not [mount] max_background = %d: "
                        "%s", mountpoint, max_background, e)
    tuning = asyncio.ensure_future(_tune_read_ahead(
        ops, mountpoint, options.read_ahead_kb)) \
        if options.read_ahead_kb else None
    trimming = asyncio.ensure_future(heap.trim_when_idle(
        lambda: session.calls)) if options.trim_when_idle else None
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _terminate)
    loop.add_signal_handler(signal.SIGHUP, on_hangup or (
        lambda: LOG.info("SIGHUP: nothing to reload")))
    LOG.info("mounted %s at %s", session.where, mountpoint)
    if on_ready is not None:
        on_ready()
    try:
        await pyfuse3.main()
    finally:
        for task in (tuning, trimming):
            if task is not None:
                task.cancel()
        if ops.prefill is not None:
            await ops.prefill.stop()
        if endpoint is not None:
            await endpoint.close()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            loop.remove_signal_handler(signum)
        pyfuse3.close(unmount=True)
        session.close()
        if ops.read_cache is not None:
            LOG.info("RAM cache of %s: %d reads answered, %d fetched, "
                     "%d bytes read ahead from boot profiles", mountpoint,
                     ops.read_cache.hits, ops.read_cache.misses,
                     ops.prefill.bytes_read if ops.prefill else 0)
        LOG.info("unmounted %s", mountpoint)
