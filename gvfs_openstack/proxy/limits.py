# SPDX-License-Identifier: Apache-2.0
"""What one hop carries, and so what its clients may ask of it.

A proxy reads whole records of up to ``[proxy] max_record_size`` bytes,
while the NFS server behind it may advertise far more in FSINFO
(NFS-Ganesha: 64 MiB) and a client may ask a READ of any count.  Passed
on unchanged, both end in a record too large for some hop.  So each hop,
as a server would:

* lowers the transfer sizes FSINFO advertises (``rtmax``, ``rtpref``,
  ``wtmax``, ``wtpref``, ``dtpref``) to what it carries, so that well
  behaved clients never send more;
* lowers the reply-size counts of the READ, READDIR and READDIRPLUS calls
  it forwards (in place, in the record): the client gets a short READ or
  a shorter listing, which RFC 1813 allows, never an error.

Replies going down pass every hop, so the smallest limit on the path is
what the client sees.
"""

import dataclasses
import struct

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc

_U32 = struct.Struct(">I")

#: Room for the RPC and NFS headers around a READ's data or a WRITE's: two
#: 400-byte auth bodies, a 64-byte handle, attributes and fixed fields.
HEADROOM = 4096


def io_size(max_record_size):
    """The largest power of two a READ or WRITE can move in one record."""
    size = 4096
    while size * 2 <= max_record_size - HEADROOM:
        size *= 2
    return size


class HopLimits:
    """The sizes one hop lets through, from its record limit."""

    def __init__(self, max_record_size):
        #: Largest READ or WRITE payload, READDIR reply, FSINFO size.
        self.io_size = io_size(max_record_size)

    def clamp_call(self, call):
        """Lower ``call``'s reply-size counts in place; whether any was.

        ``call.args`` must be a writable view of the call's record.
        Raises ProtocolError for arguments too short to hold the counts.
        """
        if call.prog != const.NFS_PROGRAM or call.vers != 3:
            return False
        lowered = False
        for offset in nfs3.count_offsets(call.proc, call.args):
            if _U32.unpack_from(call.args, offset)[0] > self.io_size:
                _U32.pack_into(call.args, offset, self.io_size)
                lowered = True
        return lowered

    def fsinfo_reply(self, xid, record):
        """``record``, an FSINFO reply, advertising no more than fits.

        A reply that is not a successful FSINFO, or does not decode, is
        passed on as it is: the client sees what the server said.
        """
        try:
            reply = rpc.decode_message(record)
            if not isinstance(reply, rpc.Reply) or \
                    reply.accept_stat != const.AcceptStat.SUCCESS:
                return record
            result = nfs3.decode_res(const.Nfs3Proc.FSINFO, reply.results)
        except ProtocolError:
            return record
        if not result.ok:
            return record
        info = result.body
        limit = self.io_size
        lowered = dataclasses.replace(
            info, rtmax=min(info.rtmax, limit),
            rtpref=min(info.rtpref, limit), wtmax=min(info.wtmax, limit),
            wtpref=min(info.wtpref, limit), dtpref=min(info.dtpref, limit))
        if lowered == info:
            return record
        return rpc.accepted(xid, const.AcceptStat.SUCCESS, nfs3.encode_res(
            const.Nfs3Proc.FSINFO, nfs3.Result(0, lowered)))
