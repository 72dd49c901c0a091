# SPDX-License-Identifier: Apache-2.0
"""Who may connect to a proxy from this host: socket owners in /proc/net."""

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


def test_the_row_must_match_both_ends_and_be_established():
    peer, local = ("127.0.0.1", 40000), ("127.0.0.1", 2049)
    other_listener = _row(_hex4(*peer), _hex4("127.0.0.1", 2050), 0)
    closing = _row(_hex4(*peer), _hex4(*local), 0, state="08")
    table = _HEADER + other_listener + closing
    assert local_peers.socket_owner(table, peer, local) is None
    why = local_peers.LocalPeers(read=lambda path: table).refusal(
        peer, local)
    assert "owner is not known" in why


def test_a_privileged_source_port_on_loopback_is_served_without_a_row():
    """The kernel NFS client binds reserved ports; only root can."""
    peers = local_peers.LocalPeers(read=lambda path: _HEADER)
    assert peers.refusal(("127.0.0.1", 801), ("127.0.0.1", 2049)) is None


def test_a_peer_of_another_host_is_left_to_allowed_peers():
    peers = local_peers.LocalPeers(read=lambda path: _HEADER)
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
