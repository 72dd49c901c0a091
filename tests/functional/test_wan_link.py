# SPDX-License-Identifier: Apache-2.0
"""The lab's emulated WAN link: one bucket every connection shares.

How fast it is belongs to ``tox -e bench -- wan-link``; here: that every
connection crosses the one bucket, bytes arrive intact, a route can be
cut, and nothing is left on the machine after stop.
"""

import hashlib
import os
import socket
import socketserver
import subprocess
import threading

import pytest

from gvfs_lab import wan
from tests.functional.conftest import nfs_cp
from tests.functional.conftest import random_file
from tests.functional.conftest import sha256

MIB = 1024 * 1024


class _Digests(socketserver.ThreadingTCPServer):
    """A server on 127.0.0.1 answering each connection with its digest."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _DigestHandler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()


class _DigestHandler(socketserver.BaseRequestHandler):
    """Reads a length (8 bytes) and that many bytes; sends their digest.

    toxiproxy closes both ways at the first end's shutdown, so the length
    ends the payload rather than a half close.
    """

    def handle(self):
        header = self.request.recv(8, socket.MSG_WAITALL)
        left = int.from_bytes(header, "big") if len(header) == 8 else 0
        digest = hashlib.sha256()
        while left:
            chunk = self.request.recv(min(left, MIB))
            if not chunk:
                return
            digest.update(chunk)
            left -= len(chunk)
        self.request.sendall(digest.digest())


def _send(host, port, payload):
    with socket.create_connection((host, port), timeout=30) as sock:
        sock.sendall(len(payload).to_bytes(8, "big") + payload)
        answer = b""
        while len(answer) < 32:
            chunk = sock.recv(32)
            if not chunk:
                break
            answer += chunk
    return answer


@pytest.fixture(scope="module")
def server():
    srv = _Digests()
    yield srv
    srv.shutdown()


@pytest.fixture
def link(tmp_path):
    shared = wan.SharedLink(str(tmp_path), rate_mbit=1000, rtt_ms=2)
    yield shared
    shared.stop()


def test_every_connection_crosses_the_one_bucket(link, server):
    port = link.add_link("digests", server.port)
    payloads = [os.urandom(4 * MIB + i) for i in range(4)]
    before = link.bytes_sent()
    answers = [None] * 4

    def send(i):
        answers[i] = _send(link.host, port, payloads[i])

    threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == [hashlib.sha256(p).digest() for p in payloads]
    # Each byte crosses the bucket on its way to toxiproxy (and the
    # headers with it): all four streams went through the one rate.
    assert link.bytes_sent() - before >= sum(map(len, payloads))


def test_a_cut_route_refuses_connections_until_restored(link, server):
    port = link.add_link("cut", server.port)
    link.set_enabled("cut", False)
    with pytest.raises(OSError):
        _send(link.host, port, b"lost")
    link.set_enabled("cut", True)
    assert _send(link.host, port, b"kept") == \
        hashlib.sha256(b"kept").digest()


def test_a_server_the_link_cannot_reach_is_refused(link):
    with pytest.raises(ValueError):
        link.add_link("elsewhere", 1, "192.0.2.1")


def test_stop_leaves_nothing_behind(tmp_path, server):
    shared = wan.SharedLink(str(tmp_path), rate_mbit=100)
    shared.add_link("x", server.port)
    netns, outside = shared.netns, shared._veth[0]
    shared.stop()
    assert netns not in subprocess.run(["ip", "netns", "list"],
                                       capture_output=True,
                                       text=True).stdout
    assert subprocess.run(["ip", "link", "show", outside],
                          capture_output=True).returncode != 0
    rules = subprocess.run(["iptables", "-t", "nat", "-S"],
                           capture_output=True, text=True).stdout
    assert "gvfs-lab-%d" % os.getpid() not in rules


@pytest.mark.parametrize("tunnel", ["tcp", "tls", "ssh"])
def test_a_chain_across_the_link_copies_byte_identically(
        lab_factory, tmp_path, tunnel):
    lab = lab_factory(tunnel, wan=(4, 400))
    src = tmp_path / "src"
    expected = random_file(src, 24 * MIB)
    before = lab.shared_link.bytes_sent()
    copied = nfs_cp(str(src), lab.client_url("across.bin"))
    assert copied.returncode == 0, copied.stderr
    assert lab.shared_link.bytes_sent() - before >= 24 * MIB
    assert sha256(os.path.join(lab.export, "across.bin")) == expected
    lab.cut_tunnel()
    back = tmp_path / "back"
    copied = nfs_cp(lab.client_url("across.bin"), str(back))
    assert copied.returncode == 0, copied.stderr
    assert sha256(back) == expected
