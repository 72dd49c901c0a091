# SPDX-License-Identifier: Apache-2.0
"""The bulk channel: a private ONC-RPC program between GVFS proxies.

For files whose sidecar says ``whole_file`` (GVFS paper, section 3.2.2:
compress, remote copy, uncompress, read locally) the client proxy asks
the server proxy for large compressed chunks instead of NFS READs; the
migration conductor's local copy writes images onto the DTN in large
compressed chunks the same way (the DTN paper's compressed copy).  It
travels in the same authenticated tunnel as NFS, with the same
credentials (the server proxy maps them as for NFS), and each chunk is
its own call, so a broken tunnel costs only the chunks in flight, which
the client proxy sends again.

Program ``BULK_PROGRAM`` version 1 (in the range RFC 5531 leaves to
users), procedures:

* 0 NULL.
* 1 READ: ``{nfs_fh3 file; uint64 offset; uint32 count; codec}`` ->
  ``nfsstat3`` and, if OK, ``{post_op_attr; bool eof; uint32 raw_count;
  codec; opaque data}``, else ``{post_op_attr}``.  ``data`` is the
  ``raw_count`` bytes at ``offset`` compressed with the codec the server
  chose (the client asks for one; the server may answer NONE).
* 2 WRITE: ``{nfs_fh3 file; uint64 offset; uint32 raw_count; codec;
  opaque data}`` -> ``nfsstat3`` and, if OK, the body of an NFS WRITE3
  reply ``{wcc_data; uint32 count; stable_how committed; writeverf3}``,
  else ``{wcc_data}``.  ``data`` decompresses to the ``raw_count`` bytes
  to write at ``offset``; the server proxy writes them UNSTABLE, so a
  COMMIT with the verifier is what makes them durable, as for WRITE3.
* 3 READV: ``{nfs_fh3 file; extent extents<MAX_EXTENTS>; codec}`` with
  ``extent {uint64 offset; uint32 count}`` -> ``nfsstat3`` and, if OK,
  ``{post_op_attr; uint32 counts<MAX_EXTENTS>; uint32 raw_count; codec;
  opaque data}``, else ``{post_op_attr}``.  ``data`` is the bytes of the
  extents, one after the other (``raw_count`` of them), compressed as in
  READ.  ``counts`` says how many bytes each extent got: fewer than it
  asked at the end of the file (and for a first extent larger than the
  server's largest reply), and fewer counts than extents when the server
  answered only the first ones (it stops at its largest reply, as a
  short READ does, or where the extents would cost it more than
  :data:`MAX_READV_READS` READs of its own); the caller asks again for
  the rest.

READV is what a boot needs: its blocks are scattered over the image, so
a profile prefetch or a mount's prefill of 16 of them costs one call at
every hop instead of 16 (the proxies' CPU per block, not the links,
bounds a boot storm).

A zstd chunk is one frame with its content checksum, so a corrupted
chunk fails to decompress instead of becoming file data
(:mod:`gvfs_openstack.client.zstd_chunks` makes and checks them).
"""

from collections.abc import Sequence
import enum
import math

from gvfs_openstack.nfs import codec as c
from gvfs_openstack.nfs import nfs3

BULK_PROGRAM = 0x20475653  # " GVS"
BULK_VERSION = 1
#: Largest chunk (uncompressed) a server proxy sends in one reply.
MAX_CHUNK = 16 * 1024 * 1024
#: Most extents one READV names.
MAX_EXTENTS = 256


class BulkProc(enum.IntEnum):
    NULL = 0
    READ = 1
    WRITE = 2
    READV = 3


class Codec(enum.IntEnum):
    NONE = 0
    ZSTD = 1


@c.xdr_struct(nfs3.FH, c.UINT64, c.UINT32, c.enum(Codec))
class ReadArgs(c.XdrStruct):
    file: bytes
    offset: int
    count: int
    codec: Codec = Codec.ZSTD


@c.xdr_struct(nfs3.POST_OP_ATTR, c.BOOL, c.UINT32, c.enum(Codec),
              c.opaque())
class ReadOk(c.XdrStruct):
    file_attributes: nfs3.Fattr | None
    eof: bool
    raw_count: int
    codec: Codec
    data: bytes


@c.xdr_struct(nfs3.FH, c.UINT64, c.UINT32, c.enum(Codec), c.opaque())
class WriteArgs(c.XdrStruct):
    file: bytes
    offset: int
    raw_count: int
    codec: Codec
    data: bytes


@c.xdr_struct(c.UINT64, c.UINT32)
class Extent(c.XdrStruct):
    offset: int
    count: int


@c.xdr_struct(nfs3.FH, c.Array(Extent.CODEC, MAX_EXTENTS), c.enum(Codec))
class ReadvArgs(c.XdrStruct):
    file: bytes
    extents: tuple[Extent, ...]
    codec: Codec = Codec.ZSTD


@c.xdr_struct(nfs3.POST_OP_ATTR, c.Array(c.UINT32, MAX_EXTENTS), c.UINT32,
              c.enum(Codec), c.opaque())
class ReadvOk(c.XdrStruct):
    file_attributes: nfs3.Fattr | None
    counts: tuple[int, ...]
    raw_count: int
    codec: Codec
    data: bytes


def plan(extents: Sequence[Extent], limit: int,
         size: float = math.inf) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans a server answers of a READV's extents.

    Each extent whole, clipped only at the file's ``size``, while they
    fit in ``limit`` bytes; the rest are left out (the caller asks again
    for them).  The first is always answered, if only in part.
    """
    spans: list[tuple[int, int]] = []
    budget = limit
    for extent in extents:
        if spans and extent.count > budget:
            break
        count = min(extent.count, budget)
        spans.append((int(min(extent.offset, size)),
                      int(min(extent.offset + count, size))))
        budget -= count
    return spans


#: Bytes between two extents a server still reads in one READ: a READ of
#: a few KiB more costs the NFS server about what one of a byte does,
#: and far less than a call of its own.
COALESCE_GAP = 64 * 1024


def coalesce(spans: Sequence[tuple[int, int]], max_read: int,
             gap: int = COALESCE_GAP
             ) -> tuple[list[tuple[int, int]], list[int | None]]:
    """The upstream READs that answer ``spans`` (:func:`plan`'s).

    ``(reads, where)``: ``reads`` are ``(start, end)`` in offset order,
    each joining spans that overlap, touch or lie within ``gap`` bytes
    of each other while it stays within ``max_read`` bytes (a span
    larger than that is one READ of its own); ``where[i]`` is the index
    of the READ holding span ``i``, None for an empty span.  Without
    it, a READV of 256 extents a byte each is 256 READs upstream for
    one call.
    """
    order = sorted((start, end, i) for i, (start, end) in enumerate(spans)
                   if end > start)
    reads: list[tuple[int, int]] = []
    where: list[int | None] = [None] * len(spans)
    for start, end, i in order:
        if reads:
            first, last = reads[-1]
            if start <= last + gap and max(end, last) - first <= max_read:
                reads[-1] = (first, max(end, last))
                where[i] = len(reads) - 1
                continue
        reads.append((start, end))
        where[i] = len(reads) - 1
    return reads, where


#: Most upstream READs one READV may cost a server (after
#: :func:`coalesce`): the extents past them are left out, as those past
#: its largest reply are.  Coalescing joins only extents near each
#: other; 256 extents a byte each, far apart, would still be 256 READs
#: for one small call.  A boot's prefetch never comes near it: a batch
#: of 1 MiB of 64 KiB cache blocks (its last run may take it to 2 MiB)
#: holds at most 31 blocks, and a READ starts only past a gap of more
#: than 64 KiB (at most one per block: a block of zeros is not fetched)
#: or where the one before reached 1 MiB: some 33 at worst.
MAX_READV_READS = 64


def _cost(reads: Sequence[tuple[int, int]],
          max_read: int) -> tuple[int, int]:
    """``(upstream READs, bytes read)`` of :func:`coalesce`'s ``reads``.

    A read longer than ``max_read`` is several READs.
    """
    return (sum(-(-(end - start) // max_read) for start, end in reads),
            sum(end - start for start, end in reads))


def coalesce_within(spans: Sequence[tuple[int, int]], max_read: int,
                    max_reads: int = MAX_READV_READS,
                    max_bytes: int | None = None,
                    gap: int = COALESCE_GAP
                    ) -> tuple[list[tuple[int, int]], list[tuple[int, int]],
                               list[int | None]]:
    """The first ``spans`` that at most ``max_reads`` READs answer.

    ``(answered, reads, where)``: ``answered`` are the first spans (at
    least one, so that a caller that asks again makes progress) that
    :func:`coalesce` reads in at most ``max_reads`` READs of at most
    ``max_read`` bytes each and, with ``max_bytes``, at most that many
    bytes read in all, the gaps coalescing reads over included (256
    bytes 64 KiB apart would otherwise read 16 MiB); ``reads`` and
    ``where`` its answer for them.  All the spans in the common case,
    for the one :func:`coalesce` a server did anyway; past the bound a
    bisection of their number costs a few more.
    """
    answered = list(spans)

    def fits(count: int) -> bool:
        reads_, bytes_ = _cost(coalesce(answered[:count], max_read, gap)[0],
                               max_read)
        return reads_ <= max_reads and (max_bytes is None or
                                        bytes_ <= max_bytes)

    if not fits(len(answered)):
        # The first span alone always goes, whatever it costs.
        good, bad = 1, len(answered)
        while bad - good > 1:
            middle = (good + bad) // 2
            if fits(middle):
                good = middle
            else:
                bad = middle
        answered = answered[:good]
    reads, where = coalesce(answered, max_read, gap)
    return answered, reads, where


def split(asked: Sequence[int], counts: Sequence[int],
          data: bytes) -> list[memoryview]:
    """The bytes of each answered extent of a READV, as views.

    ``asked`` are the counts the call asked for.  Raises ValueError when
    the reply answers none of them, more of them, more bytes than one
    asked, or counts that do not add up to the data: a reply that
    cannot be taken apart is not guessed at.
    """
    if not counts or len(counts) > len(asked) or any(
            got > wanted for got, wanted in zip(counts, asked)):
        raise ValueError("a READV reply answers other extents than asked")
    if sum(counts) != len(data):
        raise ValueError("READV counts add up to %d bytes, not the %d "
                         "it carries" % (sum(counts), len(data)))
    view, at, pieces = memoryview(data), 0, []
    for count in counts:
        pieces.append(view[at:at + count])
        at += count
    return pieces


#: NULL takes and returns nothing, as in every program.
PROCEDURES: dict[int, nfs3.Procedure] = {
    BulkProc.READ: nfs3.Procedure(BulkProc.READ, ReadArgs.CODEC,
                                  nfs3.ResultCodec(ReadOk.CODEC,
                                                   nfs3.AttrBody.CODEC)),
    BulkProc.WRITE: nfs3.Procedure(BulkProc.WRITE, WriteArgs.CODEC,
                                   nfs3.ResultCodec(nfs3.WriteOk.CODEC,
                                                    nfs3.WccBody.CODEC)),
    BulkProc.READV: nfs3.Procedure(BulkProc.READV, ReadvArgs.CODEC,
                                   nfs3.ResultCodec(ReadvOk.CODEC,
                                                    nfs3.AttrBody.CODEC)),
}


encode_args, decode_args, encode_res, decode_res = nfs3.codecs_for(PROCEDURES)
