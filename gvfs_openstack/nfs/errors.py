# SPDX-License-Identifier: Apache-2.0
"""Errors of the NFS protocol core.

Two families, as in h11: :class:`ProtocolError` means the *peer* sent bytes
we cannot accept; :class:`LocalProtocolError` means *our* caller asked for
something the protocol does not allow.  Decoders raise only
:class:`ProtocolError` (and its subclasses) on bad input, whatever the input.
"""

from typing import TYPE_CHECKING

from gvfs_openstack.nfs import const

if TYPE_CHECKING:
    from gvfs_openstack.nfs import rpc


class ProtocolError(Exception):
    """The peer sent malformed, truncated, oversized or hostile data."""


class XdrError(ProtocolError):
    """XDR data could not be decoded (RFC 4506)."""


class RecordTooLarge(ProtocolError):
    """An RPC record exceeded the configured maximum size (RFC 5531 s.11).

    ``xid`` is the record's XID when its first bytes had arrived (a reply
    too large for us can then fail its own call, not every call on the
    connection), else None; ``head`` its first bytes, as far as they
    arrived (a call's header, to refuse it by program and procedure).
    """

    def __init__(self, message: str, xid: int | None = None,
                 head: bytes = b"") -> None:
        super().__init__(message)
        self.xid = xid
        self.head = head


class LocalProtocolError(Exception):
    """We were asked to send something the protocol does not allow."""


class RpcError(Exception):
    """An RPC call was rejected or not accepted by the server."""

    def __init__(self, message: str,
                 reply: "rpc.Reply | rpc.Denied | None" = None) -> None:
        super().__init__(message)
        self.reply = reply


class NfsError(Exception):
    """An NFSv3 or MOUNTv3 procedure returned a non-OK status."""

    def __init__(self, status: int, procedure: str,
                 detail: str = "") -> None:
        self.status = status
        self.procedure = procedure
        name = const.status_name(status)
        super().__init__("%s failed: %s (%d)%s" % (
            procedure, name, status, (": " + detail) if detail else ""))
