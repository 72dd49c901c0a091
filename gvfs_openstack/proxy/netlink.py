# SPDX-License-Identifier: Apache-2.0
"""One request to the kernel over netlink, its replies as raw messages.

The proxy asks the kernel two questions a /proc file answers only slowly
or not at all: who owns a TCP socket, found by its exact 4-tuple
(:mod:`sock_diag`), and which addresses are this host's
(:mod:`host_addresses`).  Both are one request and its replies; this
module frames them (``netlink(7)``) and nothing more.  It blocks: call it
from a thread, never from the event loop.
"""

import os
import socket
import struct

NETLINK_ROUTE = 0
NETLINK_SOCK_DIAG = 4

NLM_F_REQUEST = 0x1
NLM_F_DUMP = 0x300

NLMSG_ERROR = 2
NLMSG_DONE = 3

_HEADER = struct.Struct("=IHHII")  # length, type, flags, sequence, port id
_ATTRIBUTE = struct.Struct("=HH")  # length, type

#: Seconds the kernel is given to answer; it answers at once, so a wait
#: this long means something else is wrong.
TIMEOUT = 5.0


def _align(n):
    return (n + 3) & ~3


def request(protocol, msg_type, payload, dump=False):
    """Send one request; the ``(type, payload)`` of each reply.

    Raises OSError with the kernel's errno when it answers with an error
    (ENOENT: no such socket, for an exact lookup).
    """
    flags = NLM_F_REQUEST | (NLM_F_DUMP if dump else 0)
    sequence = int.from_bytes(os.urandom(4), "little")
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW,
                       protocol) as sock:
        sock.settimeout(TIMEOUT)
        sock.bind((0, 0))
        sock.send(_HEADER.pack(_HEADER.size + len(payload), msg_type,
                               flags, sequence, 0) + payload)
        replies = []
        while True:
            data = sock.recv(1 << 16)
            if not data:
                raise OSError("the kernel closed the netlink socket")
            for kind, body in _messages(data, sequence):
                if kind == NLMSG_DONE:
                    return replies
                if kind == NLMSG_ERROR:
                    error = -struct.unpack_from("=i", body)[0]
                    if error:
                        raise OSError(error, os.strerror(error))
                    return replies
                replies.append((kind, body))
            if not dump and replies:
                return replies


def _messages(data, sequence):
    """The messages of one datagram that answer ``sequence``."""
    offset = 0
    while offset + _HEADER.size <= len(data):
        length, kind, _, seq, _ = _HEADER.unpack_from(data, offset)
        if length < _HEADER.size or offset + length > len(data):
            raise OSError("a truncated netlink message")
        if seq == sequence:
            yield kind, data[offset + _HEADER.size:offset + length]
        offset += _align(length)


def attributes(data, offset=0):
    """``{type: value}`` of the ``rtattr`` list from ``offset`` on."""
    found = {}
    while offset + _ATTRIBUTE.size <= len(data):
        length, kind = _ATTRIBUTE.unpack_from(data, offset)
        if length < _ATTRIBUTE.size:
            break
        found[kind] = data[offset + _ATTRIBUTE.size:offset + length]
        offset += _align(length)
    return found
