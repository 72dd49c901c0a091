# SPDX-License-Identifier: Apache-2.0
"""Who may connect to a proxy from this host: socket owners in /proc/net."""

import ipaddress
import os
import socket
import sys

import pytest

from gvfs_openstack.proxy import local_peers

_HEADER = ("  sl  local_address rem_address   st tx_queue rx_queue tr "
           "tm->when retrnsmt   uid  timeout inode\n")


def _row(local, remote, uid, state="01"):
    return ("   0: %s %s %s 00000000:00000000 00:00000000 00000000 %5d "
            "       0 4242 1 0000000000000000 20 4 30 10 -1\n"
            % (local, remote, state, uid))


def _hex4(ip, port):
    """An IPv4 address as this host's kernel prints it."""
    word = int.from_bytes(socket.inet_aton(ip), sys.byteorder)
    return "%08X:%04X" % (word, port)


@pytest.fixture
def connected():
    """A real loopback connection: (client socket, accepted socket)."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
    yield client, accepted
    client.close()
    accepted.close()


def test_the_owner_of_a_real_loopback_socket_is_found(connected):
    client, accepted = connected
    with open("/proc/net/tcp") as f:
        table = f.read()
    assert local_peers.socket_owner(
        table, accepted.getpeername(), accepted.getsockname()) == \
        os.geteuid()


def test_the_proxys_own_account_is_served(connected):
    _, accepted = connected
    assert local_peers.LocalPeers().refusal(
        accepted.getpeername(), accepted.getsockname()) is None


def test_another_accounts_socket_is_refused_naming_its_uid():
    peer, local = ("127.0.0.1", 40000), ("127.0.0.1", 2049)
    table = _HEADER + _row(_hex4(*peer), _hex4(*local), 1234)
    peers = local_peers.LocalPeers(read=lambda path: table)
    why = peers.refusal(peer, local)
    assert "uid 1234" in why
    assert local_peers.LocalPeers(
        {1234}, read=lambda path: table).refusal(peer, local) is None


def test_the_row_must_match_both_ends():
    peer, local = ("127.0.0.1", 40000), ("127.0.0.1", 2049)
    other_listener = _row(_hex4(*peer), _hex4("127.0.0.1", 2050), 0)
    table = _HEADER + other_listener
    assert local_peers.socket_owner(table, peer, local) is None
    why = local_peers.LocalPeers(read=lambda path: table).refusal(
        peer, local)
    assert "owner is not known" in why


#: Every TCP state of a client's socket but LISTEN (tcp_states.h).
_STATES = ["01", "02", "03", "04", "05", "06", "07", "08", "09", "0B", "0C"]


@pytest.mark.parametrize("state", _STATES)
def test_a_socket_in_any_state_is_found_by_its_exact_tuple(state):
    """Issue 61: a client that half-closed (FIN_WAIT2) was not found."""
    peer, local = ("192.0.2.9", 40000), ("127.0.0.1", 2049)
    table = _HEADER + _row(_hex4(*peer), _hex4(*local), 1234, state)
    found = local_peers.table_socket(table, peer, local)
    assert (found.state, found.uid, found.inode) == (int(state, 16), 1234,
                                                     4242)
    why = local_peers.LocalPeers(
        read=lambda path: table, addresses=lambda: ()).refusal(peer, local)
    assert "uid 1234" in why
    # The tuple must match exactly: another port or address is not it.
    for other in ((peer[0], 40001), ("192.0.2.10", 40000)):
        assert local_peers.table_socket(table, other, local) is None
    assert local_peers.table_socket(
        table, peer, ("127.0.0.1", 2050)) is None


def test_a_listening_socket_is_not_a_peer():
    peer, local = ("127.0.0.1", 40000), ("0.0.0.0", 0)
    table = _HEADER + _row(_hex4(*peer), _hex4(*local), 1234, "0A")
    assert local_peers.table_socket(table, peer, local) is None


@pytest.mark.parametrize("state", ["05", "06"])
def test_a_closed_clients_remnant_has_no_owner(state):
    """The kernel shows a socket no process holds as root's, inode 0."""
    peer, local = ("192.0.2.2", 40000), ("127.0.0.1", 2049)
    row = _row(_hex4(*peer), _hex4(*local), 0, state).replace(
        " 4242 ", "    0 ")
    table = _HEADER + row
    assert local_peers.table_socket(table, peer, local).inode == 0
    assert local_peers.socket_owner(table, peer, local) is None
    why = local_peers.LocalPeers(
        read=lambda path: table, addresses=lambda: ()).refusal(peer, local)
    assert "owner is not known: its socket is closed" in why


def test_a_peer_from_this_hosts_own_address_is_local():
    """Not found, from the host's LAN address: refused, not left alone."""
    peer, local = ("192.0.2.2", 40000), ("192.0.2.2", 2049)
    for listener in (local, ("127.0.0.1", 2049)):
        peers = local_peers.LocalPeers(
            read=lambda path: _HEADER,
            addresses=lambda: {ipaddress.ip_address("192.0.2.2")})
        why = peers.refusal(peer, listener)
        assert "a peer of this host (192.0.2.2)" in why
        assert "not found" in why
    assert local_peers.LocalPeers(
        read=lambda path: _HEADER,
        addresses=lambda: {ipaddress.ip_address("::ffff:192.0.2.2")}
    ).refusal(peer, ("192.0.2.1", 2049)) is not None


def test_a_privileged_port_of_this_hosts_address_is_served():
    peers = local_peers.LocalPeers(
        read=lambda path: _HEADER,
        addresses=lambda: {ipaddress.ip_address("192.0.2.2")})
    assert peers.refusal(("192.0.2.2", 801), ("192.0.2.2", 2049)) is None


def test_a_found_socket_decides_whatever_its_address():
    """A socket bound to an address not the host's (ip_nonlocal_bind)."""
    peer, local = ("198.51.100.7", 40000), ("127.0.0.1", 2049)
    table = _HEADER + _row(_hex4(*peer), _hex4(*local), 1234)
    why = local_peers.LocalPeers(
        read=lambda path: table, addresses=lambda: ()).refusal(peer, local)
    assert "uid 1234" in why


def test_addresses_that_cannot_be_listed_count_as_this_hosts():
    def broken():
        raise OSError("no netlink here")
    peers = local_peers.LocalPeers(read=lambda path: _HEADER,
                                   addresses=broken)
    assert "owner is not known" in peers.refusal(
        ("198.51.100.7", 40000), ("192.0.2.1", 2049))


def test_a_privileged_source_port_on_loopback_is_served_without_a_row():
    """The kernel NFS client binds reserved ports; only root can."""
    peers = local_peers.LocalPeers(read=lambda path: _HEADER)
    assert peers.refusal(("127.0.0.1", 801), ("127.0.0.1", 2049)) is None


def test_a_peer_of_another_host_is_left_to_allowed_peers():
    peers = local_peers.LocalPeers(read=lambda path: _HEADER,
                                   addresses=lambda: ())
    assert peers.refusal(("192.0.2.7", 40000), ("192.0.2.1", 2049)) is None


def test_ipv6_rows_and_ipv4_mapped_peers_are_read():
    peer, local = ("::1", 40000), ("::1", 2049)
    words = "".join("%08X" % int.from_bytes(
        socket.inet_pton(socket.AF_INET6, "::1")[i:i + 4],
        sys.byteorder) for i in range(0, 16, 4))
    table = _HEADER + _row("%s:%04X" % (words, 40000),
                           "%s:%04X" % (words, 2049), 4321)
    assert local_peers.socket_owner(table, peer, local) == 4321
    v4 = _HEADER + _row(_hex4("127.0.0.1", 40000),
                        _hex4("127.0.0.1", 2049), 99)
    assert local_peers.socket_owner(
        v4, ("::ffff:127.0.0.1", 40000), ("::ffff:127.0.0.1", 2049)) == 99


def test_a_malformed_table_finds_nothing():
    table = _HEADER + "garbage\n   1: zz:zz yy:yy 01 a b c d e f\n"
    assert local_peers.socket_owner(
        table, ("127.0.0.1", 1), ("127.0.0.1", 2)) is None


def test_local_users_are_names_or_uids():
    assert local_peers.resolve_users(["root", "4242"]) == {0, 4242}
    with pytest.raises(ValueError, match="no such local user"):
        local_peers.resolve_users(["no-such-user-here"])


def test_a_peer_of_another_namespace_reaching_a_loopback_listener():
    """A peer of another namespace at a loopback listener is remote.

    A DNAT rule to a loopback listener (a published port, the lab's
    emulated WAN) brings peers of other namespaces: their address is not
    this host's and their socket is not here to find.  They are left to
    the other checks, as any remote peer; this host's own addresses and
    loopback still need an owner found.
    """
    peers = local_peers.LocalPeers(
        uids=(0,), find=lambda peer, local: None,
        addresses=lambda: frozenset({ipaddress.ip_address("192.0.2.2")}))
    local = ("127.0.0.1", 2049)
    assert peers.refusal(("10.213.47.94", 55850), local) is None
    for mine in ("192.0.2.2", "127.0.0.1", "127.0.0.9"):
        assert "whose owner is not known" in peers.refusal(
            (mine, 55850), local), mine
