# SPDX-License-Identifier: Apache-2.0
"""gvfs-api's own HTTP server: bounded threads, slow clients let go.

The real server of ``gvfs-api`` (:func:`gvfs_openstack.cmd.api.
make_server`) on loopback, with a WSGI application that holds each
request until the test lets it go; the clients are raw sockets.
"""

import socket
import threading
import time

import pytest

from gvfs_openstack.cmd import api as api_cmd


class _Holding:
    """A WSGI application that answers once released; counts callers."""

    def __init__(self):
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.inside = 0
        self.most_inside = 0

    def __call__(self, environ, start_response):
        with self.lock:
            self.inside += 1
            self.most_inside = max(self.most_inside, self.inside)
        try:
            self.release.wait(30)
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"done"]
        finally:
            with self.lock:
                self.inside -= 1


@pytest.fixture
def served():
    started = []

    def serve(application, max_connections, client_timeout):
        server = api_cmd.make_server("127.0.0.1", 0, application,
                                     max_connections, client_timeout)
        thread = threading.Thread(target=server.serve_forever)
        thread.start()
        started.append((server, thread))
        return server.server_port

    yield serve
    for server, thread in started:
        server.shutdown()
        server.server_close()
        thread.join(30)


def _get(port):
    conn = socket.create_connection(("127.0.0.1", port), timeout=30)
    conn.sendall(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
    return conn


def _until(condition, seconds=10.0):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "not within %s s" % seconds
        time.sleep(0.02)


def test_no_more_connections_are_served_at_once_than_allowed(served):
    app = _Holding()
    port = served(app, max_connections=2, client_timeout=30.0)
    clients = [_get(port) for _ in range(5)]
    _until(lambda: app.inside == 2)
    time.sleep(0.3)
    assert app.most_inside == 2      # The others wait to be accepted.
    app.release.set()
    for conn in clients:
        with conn:
            assert conn.recv(4096).startswith(b"HTTP/1.0 200")
    assert app.most_inside == 2


def test_a_client_that_sends_nothing_loses_its_connection(served):
    app = _Holding()
    app.release.set()
    port = served(app, max_connections=1, client_timeout=1.0)
    silent = socket.create_connection(("127.0.0.1", port), timeout=30)
    with silent:
        started = time.monotonic()
        # Closed by the server once its timeout passed...
        assert silent.recv(4096) == b""
        assert time.monotonic() - started < 10
    # ...so the one slot serves the next client.
    with _get(port) as conn:
        assert conn.recv(4096).startswith(b"HTTP/1.0 200")


def test_a_thread_that_cannot_start_gives_its_slot_back(served, monkeypatch):
    """The host is out of threads for one connection: that one is closed.

    Its slot must not be lost with it, or the server would serve one
    client fewer for good (with one slot, none at all).
    """
    app = _Holding()
    app.release.set()
    port = served(app, max_connections=1, client_timeout=30.0)
    start = threading.Thread.start
    failures = []

    def start_or_fail(thread):
        if not failures:
            failures.append(thread)
            raise RuntimeError("can't start new thread")
        return start(thread)
    monkeypatch.setattr(threading.Thread, "start", start_or_fail)
    with _get(port) as refused:
        assert refused.recv(4096) == b""
    assert failures
    with _get(port) as conn:
        assert conn.recv(4096).startswith(b"HTTP/1.0 200")
