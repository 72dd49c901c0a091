# SPDX-License-Identifier: Apache-2.0
"""Which local accounts may talk to a proxy.

A TCP connection from this host says nothing about who opened it: every
account can connect to a loopback port and send any AUTH_SYS uid, and the
server proxy maps whoever it is to the account that owns the images.  So
a connection from a socket of this host is served only if its owner is
trusted: root, the proxy's own account, or one of ``[listen]
local_users`` (sshd's login account for tunnels, the account of a FUSE
mount run apart).

The kernel names each socket's owner.  The client's socket is looked up
by its exact 4-tuple in every TCP state (:mod:`sock_diag`; the
``/proc/net/tcp`` tables, read whole, where the kernel has no TCP
sock_diag): a client that sent its calls and half-closed before the
check is in FIN_WAIT2, and one that closed is a remnant with no owner.
A peer whose address is one of this host's (:mod:`host_addresses`; any
loopback address, or the listener's own) is local whether or not its
socket is found, and is refused unless its owner is found and trusted
(issue 61: a half-closed client from the host's LAN address was served).
A source port below ``ip_unprivileged_port_start`` on such an address
was bound with privilege (the kernel NFS client's sockets use such
ports).  Only a peer that is neither found nor of this host's addresses
is of another host (or network namespace), for ``[listen]
allowed_peers`` to decide alone.

The checks block on the kernel: the listener runs them in a thread,
never on its event loop.
"""

import ipaddress
import os
import pwd
import struct

from gvfs_openstack.proxy import host_addresses
from gvfs_openstack.proxy import sock_diag

_TABLES = {4: "/proc/net/tcp", 6: "/proc/net/tcp6"}
_UNPRIVILEGED_PORT_START = "/proc/sys/net/ipv4/ip_unprivileged_port_start"
_LISTEN = 10


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


def table_socket(table, peer, local):
    """The :class:`sock_diag.Socket` ``peer`` connected to ``local``.

    Or None.  ``table`` is the text of /proc/net/tcp or tcp6; ``peer``
    and ``local`` are (address, port) as the accepting side sees them, so
    the row sought has them the other way round.  Every state counts but
    LISTEN: a client that half-closed or closed is still the one whose
    owner decides.
    """
    want_local = (_plain(peer[0]), int(peer[1]))
    want_remote = (_plain(local[0]), int(local[1]))
    for line in table.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 10:
            continue
        try:
            row_local = _address(fields[1])
            row_remote = _address(fields[2])
            state = int(fields[3], 16)
            uid, inode = int(fields[7]), int(fields[9])
        except ValueError:
            continue
        if state != _LISTEN and \
                (_plain(row_local[0]), row_local[1]) == want_local and \
                (_plain(row_remote[0]), row_remote[1]) == want_remote:
            return sock_diag.Socket(state, uid, inode)
    return None


def socket_owner(table, peer, local):
    """The uid owning the socket ``peer`` connected to ``local``, or None.

    None also for a socket no process holds (a closed client's remnant,
    which the kernel shows as root's).
    """
    found = table_socket(table, peer, local)
    return _owner(found)


def _owner(found):
    if found is None or (found.inode == 0 and found.uid == 0):
        return None
    return found.uid


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
    ``find(peer, local)`` and ``addresses()`` ask the kernel (the
    defaults: :func:`sock_diag.find`, or the /proc tables through
    ``read`` where it has no TCP sock_diag, and
    :func:`host_addresses.addresses`); tests give tables of their own.
    """

    def __init__(self, uids=(), read=_read, find=None, addresses=None):
        self.uids = {0, os.geteuid(), *uids}
        self._read = read
        if find is None:
            find = sock_diag.find if read is _read and \
                sock_diag.available() else self._find_in_tables
        self._find = find
        self._addresses = addresses or host_addresses.addresses
        #: Source ports below this were bound with privilege (read once).
        self._privileged_below = _unprivileged_port_start()

    def _find_in_tables(self, peer, local):
        ip = _plain(peer[0])
        for version in sorted((4, 6), key=lambda v: v != ip.version):
            try:
                table = self._read(_TABLES[version])
            except OSError:
                continue
            found = table_socket(table, peer, local)
            if found is not None:
                return found
        return None

    def _is_this_hosts(self, ip, local_ip):
        """Whether ``ip`` is an address of this host.

        An address the kernel cannot list is taken as this host's
        (refused unless its owner is found): a check that fails must not
        let a peer through.  A listener's loopback address says nothing
        of the peer: with ``route_localnet`` and a DNAT rule (a
        container's published port, the lab's emulated WAN) hosts of
        other network namespaces reach it from their own addresses,
        and their sockets are not this namespace's to find.
        """
        if ip.is_loopback or ip == local_ip:
            return True
        try:
            return ip in {_plain(a) for a in self._addresses()}
        except OSError:
            return True

    def refusal(self, peer, local):
        """Why the connection from ``peer`` to ``local`` is refused, or None.

        A peer that is not a socket of this host is left to the other
        checks.  Blocks on the kernel (two netlink requests): call it
        from a thread.
        """
        try:
            ip = _plain(peer[0])
            local_ip = _plain(local[0])
        except ValueError:
            return "a peer with no IP address"
        this_hosts = self._is_this_hosts(ip, local_ip)
        if this_hosts and int(peer[1]) < self._privileged_below:
            return None
        try:
            found = self._find(peer, local)
        except OSError as e:
            return "its socket could not be looked up (%s)" % e
        if found is None and not this_hosts:
            return None
        owner = _owner(found)
        if owner is None:
            return ("a peer of this host (%s) whose owner is not known: "
                    "its socket is %s" % (ip, "closed" if found else
                                          "not found"))
        if owner in self.uids:
            return None
        return ("a local socket of uid %d, which is not root, the proxy's "
                "account or one of [listen] local_users" % owner)
