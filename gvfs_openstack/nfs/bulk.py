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

A zstd chunk is one frame with its content checksum, so a corrupted
chunk fails to decompress instead of becoming file data
(:mod:`gvfs_openstack.client.zstd_chunks` makes and checks them).
"""

import enum

from gvfs_openstack.nfs import codec as c
from gvfs_openstack.nfs import nfs3

BULK_PROGRAM = 0x20475653  # " GVS"
BULK_VERSION = 1
#: Largest chunk (uncompressed) a server proxy sends in one reply.
MAX_CHUNK = 16 * 1024 * 1024


class BulkProc(enum.IntEnum):
    NULL = 0
    READ = 1
    WRITE = 2


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


#: NULL takes and returns nothing, as in every program.
PROCEDURES: dict[int, nfs3.Procedure] = {
    BulkProc.READ: nfs3.Procedure(BulkProc.READ, ReadArgs.CODEC,
                                  nfs3.ResultCodec(ReadOk.CODEC,
                                                   nfs3.AttrBody.CODEC)),
    BulkProc.WRITE: nfs3.Procedure(BulkProc.WRITE, WriteArgs.CODEC,
                                   nfs3.ResultCodec(nfs3.WriteOk.CODEC,
                                                    nfs3.WccBody.CODEC)),
}


encode_args, decode_args, encode_res, decode_res = nfs3.codecs_for(PROCEDURES)
