# SPDX-License-Identifier: Apache-2.0
"""The sans-IO ONC-RPC, MOUNTv3 and NFSv3 protocol core.

Bytes in, events and decoded messages out, bytes to write back: no
sockets, no threads, no configuration, so that the NFS client, both
proxies and the tests drive the same code (as h11 is to HTTP/1.1).
``__all__`` is what the layers above may rely on: the connection and
its events, the errors, the RPC messages and the XDR primitives; the
program modules (``const``, ``nfs3``, ``mount3``, ``bulk``) are named
whole, as their codec functions share names.  The core is annotated
and checked by mypy (the ``[mypy]`` section of setup.cfg).
"""

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs.connection import CallReceived
from gvfs_openstack.nfs.connection import CLOSED
from gvfs_openstack.nfs.connection import DEFAULT_MAX_RECORD
from gvfs_openstack.nfs.connection import frame
from gvfs_openstack.nfs.connection import frame_header
from gvfs_openstack.nfs.connection import NEED_DATA
from gvfs_openstack.nfs.connection import RecordArriving
from gvfs_openstack.nfs.connection import RecordReader
from gvfs_openstack.nfs.connection import RecordRefused
from gvfs_openstack.nfs.connection import ReplyReceived
from gvfs_openstack.nfs.connection import Role
from gvfs_openstack.nfs.connection import RpcConnection
from gvfs_openstack.nfs.connection import UnexpectedReply
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import LocalProtocolError
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs.errors import ProtocolError
from gvfs_openstack.nfs.errors import RecordTooLarge
from gvfs_openstack.nfs.errors import RpcError
from gvfs_openstack.nfs.errors import XdrError
from gvfs_openstack.nfs import mount3
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs.rpc import accepted
from gvfs_openstack.nfs.rpc import AUTH_NONE
from gvfs_openstack.nfs.rpc import AuthSys
from gvfs_openstack.nfs.rpc import Call
from gvfs_openstack.nfs.rpc import call_builder
from gvfs_openstack.nfs.rpc import decode_call_header
from gvfs_openstack.nfs.rpc import decode_message
from gvfs_openstack.nfs.rpc import Denied
from gvfs_openstack.nfs.rpc import encode_message
from gvfs_openstack.nfs.rpc import OpaqueAuth
from gvfs_openstack.nfs.rpc import read_msg_type
from gvfs_openstack.nfs.rpc import read_xid
from gvfs_openstack.nfs.rpc import Reply
from gvfs_openstack.nfs.rpc import results_of
from gvfs_openstack.nfs.rpc import set_xid
from gvfs_openstack.nfs.xdr import Packer
from gvfs_openstack.nfs.xdr import Unpacker

__all__ = [
    # The connection (connection.py).
    "CLOSED",
    "DEFAULT_MAX_RECORD",
    "NEED_DATA",
    "RecordReader",
    "Role",
    "RpcConnection",
    "frame",
    "frame_header",
    # Its events.
    "CallReceived",
    "RecordArriving",
    "RecordRefused",
    "ReplyReceived",
    "UnexpectedReply",
    # The errors (errors.py).
    "LocalProtocolError",
    "NfsError",
    "ProtocolError",
    "RecordTooLarge",
    "RpcError",
    "XdrError",
    # ONC-RPC messages (rpc.py).
    "AUTH_NONE",
    "AuthSys",
    "Call",
    "Denied",
    "OpaqueAuth",
    "Reply",
    "accepted",
    "call_builder",
    "decode_call_header",
    "decode_message",
    "encode_message",
    "read_msg_type",
    "read_xid",
    "results_of",
    "set_xid",
    # XDR (xdr.py).
    "Packer",
    "Unpacker",
    # The programs' numbers and codecs, module by module.
    "bulk",
    "const",
    "mount3",
    "nfs3",
]
