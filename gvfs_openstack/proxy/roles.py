# SPDX-License-Identifier: Apache-2.0
"""What a proxy does with each call: the server role and the client role.

Both roles answer what they can locally (wrong RPC version, unknown
program) and forward the rest through an :class:`UpstreamPool`, keeping a
duplicate request cache so that a non-idempotent call re-sent by the hop
below after a tunnel failure is executed once.

* The **server role** sits on the DTN in front of its NFS server.  It
  replaces every AUTH_SYS credential with the mapped file account, refuses
  MOUNT of paths outside the allowlist and hides them from EXPORT lists,
  and refuses file handles that are not of an allowed export (see
  :mod:`exportguard`); it clears set-user-ID and set-group-ID from every
  mode a client sets (see :mod:`set_id`).  It also serves the bulk
  channel (compressed whole-file chunks) from its NFS server.
* The **client role** sits on a controller or compute node and forwards
  calls unchanged to the next proxy (a server proxy or a LAN proxy).
"""

import asyncio

from oslo_log import log as logging

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import connection
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import AcceptStat
from gvfs_openstack.nfs.const import MountProc
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.nfs.xdr import Unpacker
from gvfs_openstack.proxy import drc as drc_mod
from gvfs_openstack.proxy import handles
from gvfs_openstack.proxy import limits as hop_limits
from gvfs_openstack.proxy import read_only as read_only_mod
from gvfs_openstack.proxy import set_id
from gvfs_openstack.proxy import streams
from gvfs_openstack.proxy.upstream import UpstreamError
from gvfs_openstack.proxy import write_behind

LOG = logging.getLogger(__name__)

_VERSIONS = {const.NFS_PROGRAM: (3, 3), const.MOUNT_PROGRAM: (3, 3),
             bulk.BULK_PROGRAM: (bulk.BULK_VERSION, bulk.BULK_VERSION)}
_PROGRAMS = {const.NFS_PROGRAM: ("nfs", const.Nfs3Proc),
             const.MOUNT_PROGRAM: ("mount", const.MountProc),
             bulk.BULK_PROGRAM: ("bulk", bulk.BulkProc)}


def denied(xid, reject_stat, auth_stat=None, mismatch=None):
    return rpc.encode_message(rpc.Denied(xid, reject_stat, auth_stat,
                                         mismatch))


def proc_name(prog, proc):
    prefix, enum_type = _PROGRAMS[prog]
    try:
        return "%s_%s" % (prefix, enum_type(proc).name.lower())
    except ValueError:
        return "unknown"


class Role:
    """Shared call handling; subclasses choose the pool and the message."""

    name = None

    def __init__(self, counters, drc=None, limits=None):
        #: :class:`counters.RoleCounters`
        self.counters = counters
        self.drc = drc or drc_mod.DuplicateRequestCache()
        #: :class:`limits.HopLimits`: the sizes this hop lets through.
        self.limits = limits or hop_limits.HopLimits(
            connection.DEFAULT_MAX_RECORD)

    async def handle(self, call, record, writer=None, relay=None):
        """The reply message (unframed) for ``call``, or None for none.

        The message is bytes, or a tuple of buffers to write in order.

        ``writer`` is the caller's :class:`streams.RecordWriter`: a large
        reply may be relayed into it as it arrives, and then None is
        returned.  ``relay`` is the :class:`CallRelay` that already sent
        the call upstream while it arrived (see :meth:`relay_call`).
        """
        if call.rpcvers != const.RPC_VERSION:
            return denied(call.xid, const.RejectStat.RPC_MISMATCH,
                          mismatch=(const.RPC_VERSION, const.RPC_VERSION))
        versions = _VERSIONS.get(call.prog)
        if versions is None:
            return rpc.accepted(call.xid, AcceptStat.PROG_UNAVAIL)
        if not versions[0] <= call.vers <= versions[1]:
            return rpc.accepted(call.xid, AcceptStat.PROG_MISMATCH,
                                mismatch=versions)
        name = proc_name(call.prog, call.proc)
        if name == "unknown":
            return rpc.accepted(call.xid, AcceptStat.PROC_UNAVAIL)
        calls = self.counters.calls
        calls[name] = calls.get(name, 0) + 1
        try:
            if relay is not None:
                return await self.relayed(call, relay)
            try:
                self.limits.clamp_call(call)
            except ProtocolError:
                pass    # Garbled: refused where its arguments are read.
            reply = await self.dispatch(call, record, writer)
            if call.prog == const.NFS_PROGRAM and reply is not None and \
                    call.proc == const.Nfs3Proc.FSINFO and \
                    not isinstance(reply, tuple):
                reply = self.limits.fsinfo_reply(call.xid, reply)
            return reply
        except UpstreamError as e:
            LOG.warning("%s call xid %#x failed upstream: %s", name,
                        call.xid, e)
            return rpc.accepted(call.xid, AcceptStat.SYSTEM_ERR)
        except Exception:
            # A bug must cost one call an error reply, not leave the
            # client waiting for a reply that never comes.
            LOG.exception("%s call xid %#x failed in the proxy", name,
                          call.xid)
            return rpc.accepted(call.xid, AcceptStat.SYSTEM_ERR)

    async def dispatch(self, call, record, writer):
        raise NotImplementedError

    async def relayed(self, call, relay):
        """The reply to ``call``, already sent upstream by ``relay``."""
        reply = self._reply(await relay.wait(), call)
        self.after(call, reply)
        return reply

    def after(self, call, reply):
        """See every forwarded reply (None if it was relayed)."""

    def relay_call(self, buffer, filled, writer):
        """Start forwarding a large call whose record is still arriving.

        Only idempotent NFSv3 calls qualify (in practice WRITE); returns a
        :class:`CallRelay` or None, in which case the call takes the
        normal path once complete.
        """
        try:
            call, args_at = rpc.decode_call_header(
                memoryview(buffer)[:filled])
        except ProtocolError:
            return None  # The normal path reports it.
        if call.rpcvers != const.RPC_VERSION or \
                call.prog != const.NFS_PROGRAM or call.vers != 3 or \
                call.proc in const.NON_IDEMPOTENT or \
                call.proc not in const.Nfs3Proc.__members__.values():
            return None
        return self._relay(call, buffer, args_at, filled,
                           streams.RelayTarget(writer, call.xid))

    def _relay(self, call, buffer, args_at, filled, relay_to):
        raise NotImplementedError

    async def forward(self, pool, call, build_message, replayable,
                      writer=None):
        """Forward through ``pool``; non-idempotent calls go via the DRC.

        Replies of other calls may be relayed straight into ``writer``.
        """
        if call.prog == const.NFS_PROGRAM and \
                call.proc in const.NON_IDEMPOTENT:
            key = drc_mod.request_key(call.xid, call.prog, call.proc,
                                      call.cred.body, call.args)
            future, is_new = self.drc.lookup_or_reserve(key)
            if not is_new:
                self.counters.drc_hits = self.counters.drc_hits + 1
                LOG.info("answering repeated xid %#x from the duplicate "
                         "request cache", call.xid)
                return await future
            try:
                reply = await self._forward(pool, call, build_message,
                                            replayable, None)
            except BaseException:
                future.cancel()
                raise
            future.set_result(reply)
            return reply
        relay_to = streams.RelayTarget(writer, call.xid) \
            if writer is not None else None
        return await self._forward(pool, call, build_message, replayable,
                                   relay_to)

    @staticmethod
    async def _forward(pool, call, build_message, replayable, relay_to):
        reply = await pool.call(build_message, replayable, relay_to)
        return Role._reply(reply, call)

    @staticmethod
    def _reply(reply, call):
        if reply is streams.RELAYED:
            return None
        return rpc.set_xid(reply, call.xid)


class ClientRole(Role):
    """Forwards calls to the next proxy, through its cache if it has one.

    With a cache, READs (and GETATTRs of files in ``immutable``
    exports) are served from it; with write-back, WRITE and
    COMMIT of written-back files (and READ, GETATTR, SETATTR of files
    with dirty bytes) are answered by it.  Everything else goes upstream
    unchanged.
    """

    name = "client"

    def __init__(self, pool, counters, drc=None, cache=None,
                 writeback=None, observer=None, limits=None,
                 write_behind=None):
        super().__init__(counters, drc, limits)
        self.pool = pool
        #: :class:`CachedReads`, with the :class:`ReplyObserver` that
        #: tells it what forwarded replies mean, and :class:`WriteBack`.
        self.cache = cache
        self.observer = observer
        self.writeback = writeback
        #: :class:`write_behind.WriteBehind`, None to leave every WRITE
        #: to the server.
        self.write_behind = write_behind
        self._behind_tasks = set()

    async def dispatch(self, call, record, writer):
        behind = self.write_behind
        if behind is None or call.prog == const.MOUNT_PROGRAM:
            return await self._dispatch(call, record, writer)
        reply = await self._ahead_of_server(call, record)
        if reply is not None:
            return reply
        reply = await self._dispatch(call, record, writer)
        patch = self._verifier_to_patch(call)
        if patch is not None and reply is not None and \
                not isinstance(reply, tuple):
            reply = behind.patch_reply(call.proc, patch[0], reply, patch[1])
        return reply

    def _verifier_to_patch(self, call):
        """``(fh, codecs)`` of a reply that must carry our verifier.

        WRITE and COMMIT replies, and the bulk channel's WRITE replies
        (a WRITE3 result too); not those write-back made itself, which
        carry its own verifier.
        """
        if call.prog == bulk.BULK_PROGRAM:
            if call.proc != bulk.BulkProc.WRITE:
                return None
            fhs, codecs = _bulk_handles(call), bulk
        elif call.proc in (const.Nfs3Proc.WRITE, const.Nfs3Proc.COMMIT):
            fhs, codecs = _handles(call), nfs3
        else:
            return None
        if not fhs or self.writeback is not None and \
                not self.writeback.relays(fhs[0]):
            return None
        return fhs[0], codecs

    async def _dispatch(self, call, record, writer):
        if self.cache is not None and call.prog == const.NFS_PROGRAM:
            # Write-back's, else the cache's answer; None from both when
            # not theirs (a directory, an error, too old): forwarded.
            reply = None
            if self.writeback is not None:
                reply = await self.writeback.handle(call)
            if reply is None and call.proc == const.Nfs3Proc.READ:
                reply = await self.cache.read(call)
            elif reply is None and call.proc == const.Nfs3Proc.GETATTR:
                reply = self.cache.attributes(call)
            if reply is not None:
                return reply
        elif self.cache is not None and call.prog == bulk.BULK_PROGRAM \
                and call.proc in (bulk.BulkProc.READ, bulk.BulkProc.READV):
            if self.writeback is not None and \
                    any(fh in self.writeback.dirty
                        for fh in _bulk_handles(call)):
                # Its newest bytes are here, not in the cache or upstream;
                # a bulk READ has no overlay: the caller reads them by NFS.
                return rpc.accepted(call.xid, results=bulk.encode_res(
                    call.proc, nfs3.Result(const.NfsStat.NFS3ERR_JUKEBOX,
                                           nfs3.AttrBody(None))))
            reply = await (self.cache.bulk_read(call)
                           if call.proc == bulk.BulkProc.READ
                           else self.cache.bulk_readv(call))
            if reply is not None:
                return reply
        # The next hop is a proxy with its own duplicate request cache, so
        # every call may be re-sent with its XID after a tunnel failure.
        reply = await self.forward(self.pool, call,
                                   lambda xid: (rpc.set_xid(record, xid),),
                                   True, writer)
        self.after(call, reply)
        if self.writeback is not None and reply is not None and \
                call.prog == const.NFS_PROGRAM:
            return self.writeback.patch_reply(call, reply)
        return reply

    async def _ahead_of_server(self, call, record):
        """An UNSTABLE WRITE's early reply, else None to go on.

        Before any other call naming a file goes on (the bulk channel's
        too), the file's WRITEs answered early are answered upstream.
        """
        behind = self.write_behind
        is_write = call.prog == const.NFS_PROGRAM and \
            call.proc == const.Nfs3Proc.WRITE
        if not is_write and behind.idle:
            return None
        fhs = _bulk_handles(call) if call.prog == bulk.BULK_PROGRAM \
            else _handles(call)
        args = self._behind_args(call, fhs[0]) if is_write and fhs \
            else None
        if args is None:
            await behind.settle(fhs)
            return None
        while not behind.takes(args):
            if not behind.eligible(args):
                await behind.settle(fhs)
                return None
            if behind.overlaps(args.file, args.offset, args.count):
                await behind.settle_overlapping(args.file, args.offset,
                                                args.count)
            else:
                await behind.room(args.count)
        return self._answer_ahead(call, args, self.forward(
            self.pool, call, lambda xid: (rpc.set_xid(record, xid),), True))

    def _behind_args(self, call, fh):
        """The WRITE's head if write-behind may answer it, else None."""
        if self.writeback is not None and not self.writeback.relays(fh):
            return None     # Written back: journalled here instead.
        try:
            head = write_behind.write_head(call.args)
        except ProtocolError:
            return None     # The server answers GARBAGE_ARGS.
        return head if self.write_behind.eligible(head) else None

    def _answer_ahead(self, call, args, sending):
        """Count ``sending`` (the WRITE on its way) in flight; the reply."""
        write, result = self.write_behind.start(args)
        # At once: whatever happens next, the task ends it (finished()).
        task = asyncio.get_running_loop().create_task(
            self._behind(call, args, write, sending))
        self._behind_tasks.add(task)
        task.add_done_callback(self._behind_tasks.discard)
        if self.observer is not None:
            self.observer.wrote(args.file, args.offset, args.count, None)
        return rpc.accepted(call.xid, AcceptStat.SUCCESS, result)

    async def _behind(self, call, args, write, sending):
        reply = None
        try:
            reply = await sending
            if isinstance(reply, tuple):
                reply = b"".join(reply)
            self.after(call, reply)
        except Exception as e:  # Lost: the file's COMMIT says so.
            LOG.warning("WRITE xid %#x answered early failed upstream: %s",
                        call.xid, e)
        finally:
            self.write_behind.finished(args, write, reply)

    async def relayed(self, call, relay):
        behind = self.write_behind
        if behind is not None and call.proc == const.Nfs3Proc.WRITE:
            fhs = _handles(call)
            args = self._behind_args(call, fhs[0]) if fhs else None
            if args is not None and behind.takes(args):
                return self._answer_ahead(call, args, relay.wait())
        reply = await super().relayed(call, relay)
        patch = self._verifier_to_patch(call) if behind is not None \
            else None
        if patch is not None and reply is not None:
            reply = behind.patch_reply(call.proc, patch[0], reply, patch[1])
        return reply

    def after(self, call, reply):
        if self.observer is None or reply is None or \
                isinstance(reply, tuple):
            return
        if call.prog == const.NFS_PROGRAM:
            self.observer.reply(
                call, reply,
                self.writeback.dirty if self.writeback is not None else ())
        else:
            self.observer.mount(call, reply)

    def _relay(self, call, buffer, args_at, filled, relay_to):
        if call.proc == const.Nfs3Proc.WRITE and (
                self.writeback is not None or
                self.write_behind is not None):
            try:
                args = Unpacker(memoryview(buffer)[args_at:filled])
                fh = args.unpack_opaque(const.NFS3_FHSIZE)
                offset, count = args.unpack_uhyper(), args.unpack_uint()
            except ProtocolError:
                return None
            if self.writeback is not None and not self.writeback.relays(fh):
                return None  # Written back: it must arrive whole.
            if self.write_behind is not None and \
                    self.write_behind.overlaps(fh, offset, count):
                return None  # After the WRITE in flight, in order.

        def prefix(xid):
            rpc.set_xid(buffer, xid)
            return b""

        return self.pool.start_relay(prefix, buffer, 0, filled, relay_to)


def _handles(call):
    """The handles an NFS call names; () if it cannot be read."""
    try:
        return handles.named_handles(call.proc, call.args)
    except ProtocolError:
        return ()


def _bulk_handles(call):
    """The handle a bulk channel call names; () if it cannot be read."""
    if call.proc == bulk.BulkProc.NULL:
        return ()
    try:
        return (Unpacker(call.args).unpack_opaque(const.NFS3_FHSIZE),)
    except ProtocolError:
        return ()


class ServerRole(Role):
    """Authenticates, maps identities and guards exports on the DTN."""

    name = "server"

    def __init__(self, nfs_pool, mount_pool, identity, exports, guard,
                 bulk, counters, drc=None, limits=None):
        super().__init__(counters, drc, limits)
        self.nfs_pool = nfs_pool
        self.mount_pool = mount_pool
        self.identity = identity
        self.exports = exports
        #: The :class:`exportguard.ExportGuard` every file handle passes.
        self.guard = guard
        #: The :class:`~gvfs_openstack.proxy.bulk_server.BulkServer`.
        self.bulk = bulk

    def _credential(self, call):
        """Mapped credential, or a denial message for the caller."""
        if call.proc == 0:
            return rpc.AUTH_NONE, None
        if call.cred.flavor != const.AuthFlavor.AUTH_SYS:
            return None, denied(call.xid, const.RejectStat.AUTH_ERROR,
                                const.AuthStat.AUTH_TOOWEAK)
        try:
            cred = rpc.AuthSys.from_opaque(call.cred)
        except ProtocolError:
            return None, denied(call.xid, const.RejectStat.AUTH_ERROR,
                                const.AuthStat.AUTH_BADCRED)
        return self.identity.map(cred).to_opaque(), None

    async def dispatch(self, call, record, writer):
        cred, refusal = self._credential(call)
        if refusal is not None:
            self.counters.auth_refused = self.counters.auth_refused + 1
            return refusal

        # Read when the call is sent: clearing set-ID bits (below) may
        # replace them.
        args = call.args

        def build(xid):
            header = rpc.encode_message(rpc.Call(
                xid, call.prog, call.vers, call.proc, cred, rpc.AUTH_NONE))
            return header, args

        if call.prog == const.MOUNT_PROGRAM:
            return await self._mount(call, build)
        refused = await self._check_handles(call)
        if refused is None and self.guard.read_only:
            refused = await self._check_read_only(call)
        if refused is not None:
            return refused
        if call.prog == bulk.BULK_PROGRAM:
            return await self.bulk.serve(call, cred)
        args = self._without_set_id(call)
        if args is None:
            return rpc.accepted(call.xid, AcceptStat.GARBAGE_ARGS)
        replayable = call.proc not in const.NON_IDEMPOTENT
        # A reply that hands out handles is read here, so not relayed.
        handing_out = call.proc in handles.HANDING_OUT
        reply = await self.forward(self.nfs_pool, call, build, replayable,
                                   None if handing_out else writer)
        if handing_out:
            self.guard.learn(call.proc, call.args, reply)
        return reply

    def _without_set_id(self, call):
        """The arguments to forward: set-ID bits cleared from any mode.

        ``call.args`` itself if no bit was set, None if they are
        garbled.  See :mod:`set_id` for why the bits are cleared and not
        refused.
        """
        try:
            result = set_id.cleared(call.proc, call.args)
        except ProtocolError:
            return None
        if result is None:
            return call.args
        args, asked = result
        LOG.info("%s asked for mode %#o: set-user-ID and set-group-ID "
                 "cleared", proc_name(call.prog, call.proc), asked)
        return args

    async def _check_handles(self, call):
        """None if the call's handles are of allowed exports, else a reply.

        An NFS call gets NFS3ERR_STALE (as from an NFS server for a handle
        of nothing it exports), a bulk READ or WRITE the same in its own
        result.
        """
        if call.proc == 0:
            return None
        try:
            if call.prog == bulk.BULK_PROGRAM:
                fhs = (bulk.decode_args(call.proc, call.args).file,)
            else:
                fhs = handles.named_handles(call.proc, call.args)
        except ProtocolError:
            return rpc.accepted(call.xid, AcceptStat.GARBAGE_ARGS)
        if await self.guard.admit(proc_name(call.prog, call.proc), fhs):
            return None
        if call.prog == bulk.BULK_PROGRAM:
            body = nfs3.WccBody(nfs3.WccData()) \
                if call.proc == bulk.BulkProc.WRITE else nfs3.AttrBody(None)
            result = bulk.encode_res(call.proc, nfs3.Result(
                const.NfsStat.NFS3ERR_STALE, body))
        else:
            result = handles.refusal(call.proc)
        return rpc.accepted(call.xid, AcceptStat.SUCCESS, result)

    async def _check_read_only(self, call):
        """None if the call changes no read-only image, else a reply.

        NFS3ERR_ROFS, as a read-only export answers; NFS3ERR_JUKEBOX (try
        again) while the proxy cannot tell yet, its exports not walked.
        """
        read_only = self.guard.read_only
        bulk_write = call.prog == bulk.BULK_PROGRAM and \
            call.proc == bulk.BulkProc.WRITE
        if not bulk_write and (call.prog != const.NFS_PROGRAM or
                               call.proc not in read_only_mod.CHECKED):
            return None
        status = None
        try:
            if (bulk_write or read_only.needs_walk(call.proc)) and \
                    not await self.guard.walk_once():
                status = const.NfsStat.NFS3ERR_JUKEBOX
                why = "the exports are not walked yet"
            else:
                why = read_only.refuses_bulk_write(call.args) \
                    if bulk_write else read_only.refuses(call.proc,
                                                         call.args)
                if why is not None:
                    status = const.NfsStat.NFS3ERR_ROFS
        except ProtocolError:
            return rpc.accepted(call.xid, AcceptStat.GARBAGE_ARGS)
        if status is None:
            return None
        self.guard.counters.read_only_refused += 1
        LOG.warning("refusing %s: %s", proc_name(call.prog, call.proc), why)
        if bulk_write:
            result = bulk.encode_res(call.proc, nfs3.Result(
                status, nfs3.WccBody(nfs3.WccData())))
        else:
            result = handles.refusal(call.proc, status)
        return rpc.accepted(call.xid, AcceptStat.SUCCESS, result)

    def _relay(self, call, buffer, args_at, filled, relay_to):
        cred, refusal = self._credential(call)
        if refusal is not None:
            return None
        try:
            fhs = handles.named_handles(
                call.proc, memoryview(buffer)[args_at:filled])
        except ProtocolError:
            return None  # Not all here yet, or garbled: the normal path.
        if not self.guard.admits(fhs):
            return None  # The normal path looks for it, or refuses it.
        if self.guard.read_only and call.proc in read_only_mod.CHECKED:
            return None  # The normal path checks the whole call.

        def prefix(xid):
            return rpc.encode_message(rpc.Call(
                xid, call.prog, call.vers, call.proc, cred, rpc.AUTH_NONE))

        return self.nfs_pool.start_relay(prefix, buffer, args_at, filled,
                                         relay_to)

    async def _mount(self, call, build):
        if call.proc == MountProc.DUMP:
            # Which hosts mounted what: the NFS server knows only the
            # proxy, and a client has no business learning the others'
            # paths.  An empty list is a valid answer (RFC 1813, appendix I).
            return rpc.accepted(call.xid, AcceptStat.SUCCESS,
                                mount3.encode_res(MountProc.DUMP,
                                                  mount3.MountList(())))
        if call.proc == MountProc.MNT:
            try:
                path = mount3.decode_args(MountProc.MNT, call.args).dirpath
            except ProtocolError:
                return rpc.accepted(call.xid, AcceptStat.GARBAGE_ARGS)
            if not self.exports.allows(path):
                self.counters.mount_refused = \
                    self.counters.mount_refused + 1
                LOG.warning("refusing MOUNT of %r: not an allowed export",
                            path)
                return rpc.accepted(call.xid, AcceptStat.SUCCESS,
                                    mount3.encode_res(
                                        MountProc.MNT, nfs3.Result(
                                            const.MountStat.MNT3ERR_ACCES)))
        reply = await self.forward(self.mount_pool, call, build, True)
        if call.proc == MountProc.MNT:
            self.guard.learn_root(path, reply)
        if call.proc == MountProc.EXPORT:
            return self._filter_exports(call.xid, reply)
        return reply

    def _filter_exports(self, xid, reply_record):
        try:
            reply = rpc.decode_message(reply_record)
            if not isinstance(reply, rpc.Reply) or \
                    reply.accept_stat != AcceptStat.SUCCESS:
                return reply_record
            exports = mount3.decode_res(MountProc.EXPORT, reply.results)
        except ProtocolError as e:
            LOG.warning("NFS server sent a garbled EXPORT reply: %s", e)
            return rpc.accepted(xid, AcceptStat.SYSTEM_ERR)
        visible = tuple(e for e in exports.exports
                        if self.exports.allows(e.directory))
        return rpc.accepted(xid, AcceptStat.SUCCESS, mount3.encode_res(
            MountProc.EXPORT, mount3.ExportList(visible)))
