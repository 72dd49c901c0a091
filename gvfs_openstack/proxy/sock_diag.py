# SPDX-License-Identifier: Apache-2.0
"""The TCP socket of this host with an exact 4-tuple, in any state.

``sock_diag(7)``: one ``SOCK_DIAG_BY_FAMILY`` request naming both ends
makes the kernel look the socket up in its hash tables, as it does for an
arriving segment -- established, closing and time-wait sockets alike --
instead of the proxy reading every socket of the host from
``/proc/net/tcp``.  A client that sent its calls and half-closed is in
FIN_WAIT2, not ESTABLISHED, by the time the proxy asks: a lookup that
only knows established sockets is no check at all (issue 61).
"""

import dataclasses
import errno
import functools
import ipaddress
import socket
import struct

from gvfs_openstack.proxy import netlink

SOCK_DIAG_BY_FAMILY = 20
_ALL_STATES = 0xFFFFFFFF
_NO_COOKIE = 0xFFFFFFFF
LISTEN = 10

_REQUEST = struct.Struct("=BBBBI")  # family, protocol, ext, pad, states
_PORTS = struct.Struct("!HH")       # source and destination, big-endian
_TAIL = struct.Struct("=III")       # interface, cookie
_MESSAGE = struct.Struct("=BBBB")   # family, state, timer, retransmits
_SOCKID_SIZE = _PORTS.size + 32 + _TAIL.size
_OWNER = struct.Struct("=IIIII")    # expires, rqueue, wqueue, uid, inode


@dataclasses.dataclass(frozen=True)
class Socket:
    """What the kernel says of one socket.

    ``state`` is the kernel's TCP state number (``tcp_states.h``);
    ``inode`` is 0 for a socket no process holds any more (closed, or
    a time-wait remnant, whose ``uid`` the kernel reports as 0).
    """

    state: int
    uid: int
    inode: int


def _family(ip):
    return socket.AF_INET if ip.version == 4 else socket.AF_INET6


def _packed(ip):
    return ip.packed.ljust(16, b"\0")


def request(source, destination):
    """The request for the socket from ``source`` to ``destination``.

    Both are ``(ipaddress address, port)`` of one family.
    """
    family = _family(source[0])
    return (_REQUEST.pack(family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES)
            + _PORTS.pack(source[1], destination[1])
            + _packed(source[0]) + _packed(destination[0])
            + _TAIL.pack(0, _NO_COOKIE, _NO_COOKIE))


def parse(reply, source, destination):
    """The :class:`Socket` of one reply, or None if it is another one.

    The kernel falls back to a listening socket when no connection
    matches; only a socket with both ends as asked is the one sought.
    """
    if len(reply) < _MESSAGE.size + _SOCKID_SIZE + _OWNER.size:
        raise OSError("a truncated sock_diag reply")
    _, state, _, _ = _MESSAGE.unpack_from(reply)
    offset = _MESSAGE.size
    sport, dport = _PORTS.unpack_from(reply, offset)
    offset += _PORTS.size
    size = 4 if source[0].version == 4 else 16
    src = reply[offset:offset + size]
    dst = reply[offset + 16:offset + 16 + size]
    if state == LISTEN or (sport, dport) != (source[1], destination[1]) \
            or src != source[0].packed or dst != destination[0].packed:
        return None
    _, _, _, uid, inode = _OWNER.unpack_from(
        reply, _MESSAGE.size + _SOCKID_SIZE)
    return Socket(state, uid, inode)


def find(source, destination):
    """The socket of this host from ``source`` to ``destination``, or None.

    ``source`` and ``destination`` are ``(address, port)``; IPv4-mapped
    IPv6 addresses are looked up as the IPv4 ones they are.  Blocks on
    the kernel's answer; raises OSError if the kernel cannot be asked.
    """
    source = (_plain(source[0]), int(source[1]))
    destination = (_plain(destination[0]), int(destination[1]))
    if source[0].version != destination[0].version:
        return None
    try:
        replies = netlink.request(netlink.NETLINK_SOCK_DIAG,
                                  SOCK_DIAG_BY_FAMILY,
                                  request(source, destination))
    except OSError as e:
        if e.errno == errno.ENOENT:
            return None
        raise
    for kind, body in replies:
        if kind == SOCK_DIAG_BY_FAMILY:
            found = parse(body, source, destination)
            if found is not None:
                return found
    return None


@functools.cache
def available():
    """Whether the kernel answers TCP sock_diag requests here.

    An exact lookup answers ENOENT both for "no such socket" and for "no
    TCP sock_diag in this kernel" (``tcp_diag`` not loaded); an empty dump
    tells them apart, once.
    """
    try:
        netlink.request(netlink.NETLINK_SOCK_DIAG, SOCK_DIAG_BY_FAMILY,
                        _REQUEST.pack(socket.AF_INET, socket.IPPROTO_TCP,
                                      0, 0, 0)
                        + bytes(_SOCKID_SIZE), dump=True)
    except OSError:
        return False
    return True


def _plain(ip):
    ip = ipaddress.ip_address(ip)
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip
