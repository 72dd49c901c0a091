# SPDX-License-Identifier: Apache-2.0
"""The proxy's own calls to the next hop: typed arguments in, result out.

Besides forwarding its clients' calls, a proxy makes calls of its own: a
cache miss, a revalidation, a sidecar, a whole-file chunk, a write-back
flush, a warm, the export guard's walk, the bulk server's NFS calls.
Each goes through :class:`UpstreamCalls`, which builds the call with the
credential it is given (the client's, or the proxy's own), sends it
through an :class:`~gvfs_openstack.proxy.upstream.UpstreamPool` and
decodes the reply, so that a refused call or a garbled reply is an
exception of one kind everywhere.  Forwarded calls do not come here:
their records go through the pool undecoded.

Every call made here is safe to repeat (READ, WRITE, COMMIT, GETATTR,
LOOKUP, READDIRPLUS, MNT, EXPORT, bulk READ), so the pool may send it
again after a lost connection.
"""

import dataclasses

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.upstream import UpstreamError


@dataclasses.dataclass(frozen=True)
class Program:
    """An RPC program as this module calls it: numbers and codecs."""

    name: str
    number: int
    version: int
    procedures: type
    encode_args: object
    decode_res: object

    def describe(self, proc):
        """``NFS READ`` and the like, for messages."""
        return "%s %s" % (self.name, self.procedures(proc).name)


NFS3 = Program("NFS", const.NFS_PROGRAM, const.NFS_V3, const.Nfs3Proc,
               nfs3.encode_args, nfs3.decode_res)
MOUNT3 = Program("MOUNT", const.MOUNT_PROGRAM, const.MOUNT_V3,
                 const.MountProc, mount3.encode_args, mount3.decode_res)
BULK = Program("bulk", bulk.BULK_PROGRAM, bulk.BULK_VERSION, bulk.BulkProc,
               bulk.encode_args, bulk.decode_res)


class ReplyError(UpstreamError):
    """The next hop answered, but with no results to use."""


class CallRefused(ReplyError):
    """The call was denied, or accepted with another status than SUCCESS.

    ``reply`` is the decoded :class:`rpc.Reply` or :class:`rpc.Denied`.
    """

    def __init__(self, what, reply):
        if isinstance(reply, rpc.Denied):
            why = "denied (%s)" % const.RejectStat(reply.reject_stat).name
        else:
            why = const.AcceptStat(reply.accept_stat).name
        super().__init__("%s refused upstream: %s" % (what, why))
        self.reply = reply

    @property
    def program_unavailable(self):
        """Whether the next hop does not serve the program (or version)."""
        return isinstance(self.reply, rpc.Reply) and \
            self.reply.accept_stat in (const.AcceptStat.PROG_UNAVAIL,
                                       const.AcceptStat.PROG_MISMATCH)


class GarbledReply(ReplyError):
    """The reply does not decode as the call's result."""


class UpstreamCalls:
    """Typed calls through one :class:`UpstreamPool`."""

    def __init__(self, pool):
        self.pool = pool

    async def call(self, program, proc, args, cred, verf=rpc.AUTH_NONE):
        """Call ``proc`` of ``program`` with ``args``; its decoded result.

        ``cred`` and ``verf`` are ``rpc.OpaqueAuth``.  Raises
        :class:`CallRefused` or :class:`GarbledReply`, or what the pool
        raises (:class:`UpstreamError`: lost, timed out).
        """
        record = await self.pool.call(rpc.call_builder(
            program.number, program.version, proc, cred, verf,
            program.encode_args(proc, args)), True)
        try:
            reply = rpc.decode_message(record)
        except ProtocolError as e:
            raise GarbledReply("%s: garbled reply: %s" % (
                program.describe(proc), e)) from e
        if isinstance(reply, rpc.Call):
            raise GarbledReply("%s: a call came back as the reply"
                               % program.describe(proc))
        if isinstance(reply, rpc.Denied) or \
                reply.accept_stat != const.AcceptStat.SUCCESS:
            raise CallRefused(program.describe(proc), reply)
        try:
            return program.decode_res(proc, reply.results)
        except ProtocolError as e:
            raise GarbledReply("%s: garbled result: %s" % (
                program.describe(proc), e)) from e

    async def nfs(self, proc, args, cred, verf=rpc.AUTH_NONE):
        """An NFSv3 call; its ``nfs3.Result``."""
        return await self.call(NFS3, proc, args, cred, verf)

    async def mount(self, proc, args, cred):
        """A MOUNTv3 call; its result."""
        return await self.call(MOUNT3, proc, args, cred)

    async def bulk(self, proc, args, cred, verf=rpc.AUTH_NONE):
        """A call of the bulk channel; its ``nfs3.Result``."""
        return await self.call(BULK, proc, args, cred, verf)
