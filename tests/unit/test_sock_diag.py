# SPDX-License-Identifier: Apache-2.0
"""The kernel's answers on sockets and addresses, from real sockets.

Each state a client's socket can be in when the proxy checks it --
connected, half-closed, closed -- is made here for real, and both ways of
asking (sock_diag by exact tuple, the /proc tables read whole) must find
it with its true owner, or as a remnant no process holds.
"""

import asyncio
import ipaddress
import os
import socket
import threading
import time

import pytest

from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy import host_addresses
from gvfs_openstack.proxy import listener
from gvfs_openstack.proxy import local_peers
from gvfs_openstack.proxy import sock_diag

ESTABLISHED, FIN_WAIT1, FIN_WAIT2, CLOSE_WAIT = 1, 4, 5, 8

pytestmark = pytest.mark.skipif(not sock_diag.available(),
                                reason="no TCP sock_diag in this kernel")


def _tables(peer, local):
    with open("/proc/net/tcp") as f:
        v4 = f.read()
    with open("/proc/net/tcp6") as f:
        v6 = f.read()
    return local_peers.table_socket(v4, peer, local) or \
        local_peers.table_socket(v6, peer, local)


def _settled(predicate):
    """Wait (briefly) until the kernel has moved the sockets on."""
    deadline = time.monotonic() + 5
    while not predicate():
        assert time.monotonic() < deadline, "the socket never got there"
        time.sleep(0.01)


@pytest.fixture(params=["127.0.0.1", "::1"])
def pair(request):
    """(client, accepted) over loopback, IPv4 and IPv6."""
    with socket.create_server((request.param, 0),
                              family=socket.AF_INET6 if ":" in
                              request.param else socket.AF_INET) as server:
        client = socket.create_connection(server.getsockname()[:2])
        accepted, _ = server.accept()
    yield client, accepted
    client.close()
    accepted.close()


def _both(accepted):
    peer, local = accepted.getpeername()[:2], accepted.getsockname()[:2]
    return sock_diag.find(peer, local), _tables(peer, local)


def test_a_connected_client_is_found_with_its_owner(pair):
    _, accepted = pair
    for found in _both(accepted):
        assert (found.state, found.uid) == (ESTABLISHED, os.geteuid())
        assert found.inode != 0


def test_a_half_closed_client_is_found_with_its_owner(pair):
    client, accepted = pair
    client.shutdown(socket.SHUT_WR)
    _settled(lambda: _both(accepted)[0].state == FIN_WAIT2)
    for found in _both(accepted):
        assert (found.state, found.uid) == (FIN_WAIT2, os.geteuid())
        assert found.inode != 0


def test_a_closed_clients_remnant_has_no_owner(pair):
    client, accepted = pair
    peer, local = accepted.getpeername()[:2], accepted.getsockname()[:2]
    client.close()
    _settled(lambda: sock_diag.find(peer, local).inode == 0)
    for found in _both(accepted):
        assert found.state in (FIN_WAIT1, FIN_WAIT2)
        assert found.inode == 0
    if found.uid == 0:
        # Root's remnant looks like any other: an owner not known.
        # (Another account's keeps its uid, and is judged by it.)
        assert "its socket is closed" in local_peers.LocalPeers().refusal(
            peer, local)


def test_the_accepting_side_is_not_the_client(pair):
    """The tuple read the other way round is the proxy's own socket."""
    client, accepted = pair
    client.shutdown(socket.SHUT_WR)
    peer, local = accepted.getpeername()[:2], accepted.getsockname()[:2]
    _settled(lambda: sock_diag.find(peer, local).state == FIN_WAIT2)
    assert sock_diag.find(local, peer).state == CLOSE_WAIT


def test_no_such_socket_is_none():
    assert sock_diag.find(("127.0.0.1", 1), ("127.0.0.1", 2)) is None
    assert sock_diag.find(("::1", 1), ("127.0.0.1", 2)) is None


def test_a_listener_with_the_peers_port_is_not_taken_for_it():
    """The kernel falls back to a listening socket; the exact tuple not."""
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        assert sock_diag.find(("127.0.0.1", port),
                              ("127.0.0.1", 9)) is None


def test_this_hosts_addresses_are_every_one_it_binds():
    found = host_addresses.addresses()
    assert ipaddress.ip_address("127.0.0.1") in found
    with open("/proc/net/if_inet6") as f:
        for line in f:
            raw = bytes.fromhex(line.split()[0])
            assert ipaddress.ip_address(raw) in found
    for ip in found:
        if ip.version == 4:
            with socket.socket() as s:
                s.bind((str(ip), 0))


def test_the_listener_asks_the_kernel_off_its_event_loop():
    """The check blocks on the kernel: it must not stall other clients."""
    threads = []

    def find(peer, local):
        threads.append(threading.get_ident())
        return sock_diag.Socket(ESTABLISHED, 65534, 1)

    async def connect():
        refused = counters.ListenerCounters()
        serving = listener.Listener(
            None, "127.0.0.1", 0, refused,
            local_peers=local_peers.LocalPeers(find=find))
        port = await serving.start()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        assert await reader.read() == b""
        writer.close()
        await serving.close()
        return refused.peers_refused, threading.get_ident()

    refused, loop_thread = asyncio.run(connect())
    assert refused == 1
    assert threads and loop_thread not in threads
