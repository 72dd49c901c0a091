# SPDX-License-Identifier: Apache-2.0
"""MOUNTv3 protocol types and procedures (RFC 1813 section 5)."""

from gvfs_openstack.nfs import codec as c
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import MountProc as P
from gvfs_openstack.nfs import nfs3

DIRPATH = c.string(const.MNTPATHLEN)
NAME = c.string(const.MNTNAMLEN)


@c.xdr_struct(DIRPATH)
class MntArgs(c.XdrStruct):
    dirpath: str


@c.xdr_struct(c.opaque(const.NFS3_FHSIZE), c.Array(c.INT32))
class MntOk(c.XdrStruct):
    fhandle: bytes
    auth_flavors: tuple[int, ...]


@c.xdr_struct(NAME, DIRPATH)
class MountEntry(c.XdrStruct):
    hostname: str
    directory: str


@c.xdr_struct(c.LinkedList(MountEntry.CODEC))
class MountList(c.XdrStruct):
    entries: tuple[MountEntry, ...]


@c.xdr_struct(DIRPATH, c.LinkedList(NAME))
class ExportNode(c.XdrStruct):
    directory: str
    groups: tuple[str, ...]


@c.xdr_struct(c.LinkedList(ExportNode.CODEC))
class ExportList(c.XdrStruct):
    exports: tuple[ExportNode, ...]


PROCEDURES = {p.number: p for p in (
    nfs3.Procedure(P.NULL, c.VOID, c.VOID),
    nfs3.Procedure(P.MNT, MntArgs.CODEC,
                   nfs3.ResultCodec(MntOk.CODEC, c.VOID)),
    nfs3.Procedure(P.DUMP, c.VOID, MountList.CODEC),
    nfs3.Procedure(P.UMNT, MntArgs.CODEC, c.VOID),
    nfs3.Procedure(P.UMNTALL, c.VOID, c.VOID),
    nfs3.Procedure(P.EXPORT, c.VOID, ExportList.CODEC),
)}


encode_args, decode_args, encode_res, decode_res = nfs3.codecs_for(PROCEDURES)
