# SPDX-License-Identifier: Apache-2.0
"""The threaded metrics endpoint (gvfs-api's, gvfs-conductor's) bounded.

A scraper trickling its request a byte at a time was served for as long
as it trickled, each read far within the 10 s socket timeout, and every
connection got a thread.  Now the request has a deadline and the
scrapes at once a cap.  Real server, real sockets.
"""

import socket
import threading
import time

from prometheus_client import core
import pytest

from gvfs_openstack import metrics_server


@pytest.fixture
def endpoint(monkeypatch):
    monkeypatch.setattr(metrics_server._Quiet, "request_deadline", 2.0)

    def collect():
        yield core.GaugeMetricFamily("gvfs_up", "Up.", value=1)
    server = metrics_server.MetricsServer(
        "127.0.0.1", 0, metrics_server.registry_of(collect))
    server.start()
    yield server.port
    server.stop()


def _trickle(port, ended, index):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        started = time.monotonic()
        try:
            for byte in b"GET /metrics HTTP/1.0\r\nX-Padding: aaaaaaaaaa":
                conn.sendall(bytes([byte]))
                conn.settimeout(0.5)
                try:
                    if conn.recv(4096) == b"":
                        break
                except TimeoutError:
                    continue
        except OSError:
            pass
        ended[index] = time.monotonic() - started


def _scrape(port):
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        answer = b""
        while data := conn.recv(4096):
            answer += data
    return answer


def test_a_trickling_scraper_is_cut_at_the_deadline(endpoint):
    ended = [None] * 4
    threads = [threading.Thread(target=_trickle, args=(endpoint, ended, i))
               for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    # 47 bytes at one every 0.5 s would take 23 s.
    assert all(e is not None and e < 2.0 + 2.0 for e in ended), ended
    assert b"gvfs_up 1.0" in _scrape(endpoint)


def test_connections_past_the_cap_are_closed_not_threaded(endpoint):
    held = [socket.create_connection(("127.0.0.1", endpoint), timeout=30)
            for _ in range(metrics_server._Server.max_scrapes)]
    try:
        time.sleep(0.3)
        with socket.create_connection(("127.0.0.1", endpoint),
                                      timeout=30) as extra:
            started = time.monotonic()
            assert extra.recv(4096) == b""
            assert time.monotonic() - started < 1.0
    finally:
        for conn in held:
            conn.close()
    time.sleep(0.3)
    assert b"gvfs_up 1.0" in _scrape(endpoint)
