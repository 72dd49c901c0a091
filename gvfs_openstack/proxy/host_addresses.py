# SPDX-License-Identifier: Apache-2.0
"""The addresses of this host (of its network namespace).

A connection whose source is one of them comes from a process here, and
its owner must be known before it is served, whatever the address: a
local account reaches a loopback listener just as well from the host's
LAN address.  The kernel lists them (``RTM_GETADDR``, ``rtnetlink(7)``);
asked at each check, since addresses come and go (DHCP, a VIP moving).
"""

import ipaddress
import socket
import struct

from gvfs_openstack.proxy import netlink

RTM_NEWADDR = 20
RTM_GETADDR = 22
IFA_ADDRESS = 1
IFA_LOCAL = 2

_IFADDRMSG = struct.Struct("=BBBBI")  # family, prefix, flags, scope, index


def parse(replies):
    """The addresses in ``RTM_NEWADDR`` replies, as a frozenset."""
    found = set()
    for kind, body in replies:
        if kind != RTM_NEWADDR or len(body) < _IFADDRMSG.size:
            continue
        family = body[0]
        size = {socket.AF_INET: 4, socket.AF_INET6: 16}.get(family)
        if size is None:
            continue
        attributes = netlink.attributes(body, _IFADDRMSG.size)
        for kind in (IFA_LOCAL, IFA_ADDRESS):
            value = attributes.get(kind)
            if value is not None and len(value) == size:
                found.add(ipaddress.ip_address(value))
    return frozenset(found)


def addresses():
    """Every address of this host's interfaces, IPv4 and IPv6.

    Blocks on the kernel's answer; raises OSError if it cannot be asked.
    """
    return parse(netlink.request(
        netlink.NETLINK_ROUTE, RTM_GETADDR,
        _IFADDRMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0), dump=True))
