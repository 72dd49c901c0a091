# SPDX-License-Identifier: Apache-2.0
"""Which local accounts may talk to a proxy.

A TCP connection from this host says nothing about who opened it: every
account can connect to a loopback port and send any AUTH_SYS uid, and the
server proxy maps whoever it is to the account that owns the images.  So
a connection from a socket of this host is served only if its owner is
trusted: root, the proxy's own account, or one of ``[listen]
local_users`` (sshd's login account for tunnels, the account of a FUSE
mount run apart).  The kernel keeps each socket's owner in
``/proc/net/tcp`` and ``tcp6``; a source port below
``ip_unprivileged_port_start`` was bound with privilege (the kernel NFS
client's sockets have no owner but use such ports).  A peer found in
neither table is not of this host (of this network namespace), and
``[listen] allowed_peers`` decides for it alone; a loopback peer that is
not found is refused, since its owner cannot be known.
"""

import ipaddress
import os
import pwd
import struct

_TABLES = {4: "/proc/net/tcp", 6: "/proc/net/tcp6"}
_UNPRIVILEGED_PORT_START = "/proc/sys/net/ipv4/ip_unprivileged_port_start"
_ESTABLISHED = "01"


def _address(text):
    """``0100007F:1F90`` (as /proc/net/tcp prints it) to (ip, port).

    The address is the kernel's network-order bytes printed as host-order
    32-bit words, so each word is unpacked in this host's byte order.
    """
    host, port = text.split(":")
    raw = b"".join(struct.pack("=I", int(host[i:i + 8], 16))
                   for i in range(0, len(host), 8))
    return ipaddress.ip_address(raw), int(port, 16)


def _plain(ip):
    ip = ipaddress.ip_address(ip)
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def socket_owner(table, peer, local):
    """The uid owning the socket ``peer`` connected to ``local``, or None.

    ``table`` is the text of /proc/net/tcp or tcp6; ``peer`` and
    ``local`` are (address, port) as the accepting side sees them, so the
    row sought has them the other way round.
    """
    want_local = (_plain(peer[0]), int(peer[1]))
    want_remote = (_plain(local[0]), int(local[1]))
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 8 or fields[3] != _ESTABLISHED:
            continue
        try:
            row_local = _address(fields[1])
            row_remote = _address(fields[2])
            uid = int(fields[7])
        except ValueError:
            continue
        if (_plain(row_local[0]), row_local[1]) == want_local and \
                (_plain(row_remote[0]), row_remote[1]) == want_remote:
            return uid
    return None


def resolve_users(names):
    """User names or numeric uids (``[listen] local_users``) to uids."""
    uids = set()
    for name in names:
        if name.isdigit():
            uids.add(int(name))
            continue
        try:
            uids.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            raise ValueError("no such local user: %r" % name) from None
    return uids


def _read(path):
    with open(path) as f:
        return f.read()


def _unprivileged_port_start():
    try:
        return int(_read(_UNPRIVILEGED_PORT_START))
    except (OSError, ValueError):
        return 1024


class LocalPeers:
    """Refuses connections from this host's sockets of untrusted accounts.

    ``uids``: the accounts trusted besides root and this process's own.
    """

    def __init__(self, uids=(), read=_read):
        self.uids = {0, os.geteuid(), *uids}
        self._read = read
        #: Source ports below this were bound with privilege (read once).
        self._privileged_below = _unprivileged_port_start()

    def refusal(self, peer, local):
        """Why the connection from ``peer`` to ``local`` is refused, or None.

        A peer that is not a socket of this host is left to the other
        checks.  The tables are read at each accept; connections are few
        and long-lived, and a table read takes well under a millisecond
        on a host with a thousand sockets.
        """
        try:
            ip = _plain(peer[0])
        except ValueError:
            return "a peer with no IP address"
        if ip.is_loopback and int(peer[1]) < self._privileged_below:
            return None
        owner = None
        for version in sorted((4, 6), key=lambda v: v != ip.version):
            try:
                table = self._read(_TABLES[version])
            except OSError:
                continue
            owner = socket_owner(table, peer, local)
            if owner is not None:
                break
        if owner is None:
            if ip.is_loopback:
                return "a loopback peer whose owner is not known"
            return None
        if owner in self.uids:
            return None
        return ("a local socket of uid %d, which is not root, the proxy's "
                "account or one of [listen] local_users" % owner)
