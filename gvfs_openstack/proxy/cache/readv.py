# SPDX-License-Identifier: Apache-2.0
"""Scattered blocks in one call: the bulk channel's READV, both ends.

A boot reads blocks scattered over its image, so a profile prefetch
that asks for them one READ each costs a call at every hop for every
64 KiB: in a boot storm the proxies' CPU per call, not the links, sets
the pace.  One READV carries many of them (:mod:`gvfs_openstack.nfs.bulk`
has the wire format and what a proxy answers of one); :func:`read_extents`
sends one upstream.
"""

import zstandard

from gvfs_openstack.client import zstd_chunks
from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs.bulk import BulkProc
from gvfs_openstack.nfs.bulk import Codec
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.upstream_calls import CallRefused
from gvfs_openstack.proxy.upstream_calls import ReplyError

#: Seconds before asking again a next hop that does not serve READV (an
#: NFS server, a proxy of an older release).
UNAVAILABLE_RETRY = 600.0


class ReadvFailed(Exception):
    """A READV upstream brought nothing to keep."""


class ReadvUnavailable(ReadvFailed):
    """The next hop does not serve READV: fetch block by block."""


async def read_extents(upstream, call, fh, extents):
    """``(fattr, pieces)`` of one READV of ``(offset, count)`` extents.

    ``pieces`` are the bytes of the extents answered, in order: as many
    as the next hop answered, at least one.  Raises
    :class:`ReadvUnavailable` if the next hop does not serve READV,
    :class:`ReadvFailed` for any other failure.
    """
    try:
        res = await upstream.bulk(BulkProc.READV, bulk.ReadvArgs(
            fh, tuple(bulk.Extent(offset, count)
                      for offset, count in extents), Codec.ZSTD),
            call.cred, call.verf)
    except CallRefused as e:
        if rpc.not_served(e.reply):
            raise ReadvUnavailable(str(e)) from e
        raise ReadvFailed(str(e)) from e
    except ReplyError as e:
        raise ReadvFailed(str(e)) from e
    if not res.ok:
        raise ReadvFailed("READV refused upstream: %s"
                          % const.status_name(res.status))
    body = res.body
    try:
        raw = await zstd_chunks.reply_bytes(body)
    except zstandard.ZstdError as e:
        raise ReadvFailed("a READV reply does not decompress: %s" % e) from e
    try:
        pieces = bulk.split([count for _, count in extents], body.counts,
                            raw)
    except ValueError as e:
        raise ReadvFailed(str(e)) from e
    return body.file_attributes, pieces
