# SPDX-License-Identifier: Apache-2.0
"""HTTP clients for attacking gvfs-api's server slowly, on loopback.

Raw sockets, each bound to a source address of 127.0.0.0/8 of its own,
so that a test can play several hosts against the per-address limit.
"""

import os
import socket
import subprocess
import sys
import threading
import time

#: What a trickling client sends, a byte at a time; never a whole head.
HEAD = (b"POST /v1/migrations HTTP/1.1\r\nHost: x\r\n"
        b"Content-Type: application/json\r\nX-Padding: " + b"a" * 4096)


class Trickler(threading.Thread):
    """A client from ``source`` sending a byte every ``every`` seconds.

    Stops on its own after ``seconds``.  Records when the server ended
    the connection (``ended_after``, seconds after connecting; None if
    it never did) and what it answered before.
    """

    def __init__(self, port, source, every, seconds):
        super().__init__(daemon=True)
        self.sock = socket.socket()
        self.sock.bind((source, 0))
        self.sock.connect(("127.0.0.1", port))
        self.every, self.seconds = every, seconds
        self.connected_at = time.monotonic()
        self.ended_after = None
        self.answer = b""

    def run(self):
        sock, until = self.sock, self.connected_at + self.seconds
        with sock:
            for byte in HEAD:
                if time.monotonic() >= until:
                    return
                try:
                    sock.sendall(bytes([byte]))
                except OSError:
                    break
                sock.settimeout(self.every)
                try:
                    data = sock.recv(4096)
                except TimeoutError:
                    continue
                except OSError:
                    break
                self.answer += data
                if not data:
                    break
            self.ended_after = time.monotonic() - self.connected_at


class Churner(threading.Thread):
    """A trickling client from ``source`` that reconnects when cut.

    Until ``seconds`` pass: as soon as the server ends one connection it
    opens the next, so that its share of the server stays taken.
    ``connections``: how many it opened.
    """

    def __init__(self, port, source, every, seconds):
        super().__init__(daemon=True)
        self.port, self.source, self.every = port, source, every
        self.until = time.monotonic() + seconds
        self.connections = 0

    def run(self):
        while (left := self.until - time.monotonic()) > 0:
            try:
                trickler = Trickler(self.port, self.source, self.every,
                                    left)
            except OSError:
                time.sleep(0.05)
                continue
            self.connections += 1
            trickler.run()


def many_sources(count):
    """``count`` loopback source addresses, none of them 127.0.0.1."""
    return ["127.1.%d.%d" % (n // 200, 1 + n % 200) for n in range(count)]


def churn_elsewhere(port, count, every, seconds):
    """:class:`Churner` s from ``count`` sources, in a process of their own.

    Hundreds of client threads in the server's own process would starve
    its threads of the interpreter, which no real attacker can do.  The
    process prints how many connections they opened, when they stop.
    """
    return subprocess.Popen(
        [sys.executable, "-m", "tests.slow_clients", "churn", str(port),
         str(count), str(every), str(seconds)], stdout=subprocess.PIPE,
        text=True, cwd=os.path.dirname(os.path.dirname(
            os.path.abspath(__file__))))


def _churn(port, count, every, seconds):
    churners = [Churner(port, source, every, seconds)
                for source in many_sources(count)]
    for churner in churners:
        churner.start()
    for churner in churners:
        churner.join(seconds + 30)
    print(sum(churner.connections for churner in churners))


def start_tricklers(port, sources, per_source, every, seconds):
    """``per_source`` tricklers from each of ``sources``, started."""
    tricklers = [Trickler(port, source, every, seconds)
                 for source in sources for _ in range(per_source)]
    for trickler in tricklers:
        trickler.start()
    return tricklers


def request(port, source="127.0.0.1", body=None, pieces=1, every=0.0,
            path="/"):
    """An honest request's whole answer, or b"reset".

    A GET of ``path``, or with ``body`` a POST of it sent in ``pieces``
    after ``every`` seconds each.  With no ``body`` and ``pieces`` > 1
    the GET's head itself is sent in that many pieces.
    """
    if body is None:
        data = b"GET %s HTTP/1.0\r\nHost: x\r\n\r\n" % path.encode()
    else:
        data = b"POST %s HTTP/1.0\r\nHost: x\r\nContent-Length: %d\r\n\r\n" \
            % (path.encode(), len(body)) + body
    with socket.socket() as conn:
        conn.settimeout(60)
        conn.bind((source, 0))
        conn.connect(("127.0.0.1", port))
        try:
            if pieces == 1:
                conn.sendall(data)
            else:
                head = data if body is None else data[:-len(body)]
                rest = b"" if body is None else body
                if body is None:
                    chunks = _split(head, pieces)
                else:
                    conn.sendall(head)
                    chunks = _split(rest, pieces)
                for chunk in chunks:
                    time.sleep(every)
                    conn.sendall(chunk)
            answer = b""
            while True:
                received = conn.recv(4096)
                if not received:
                    return answer
                answer += received
        except ConnectionResetError:
            return b"reset"


def _split(data, pieces):
    size = -(-len(data) // pieces)
    return [data[start:start + size] for start in range(0, len(data), size)]


if __name__ == "__main__":
    if sys.argv[1:2] == ["churn"]:
        _churn(int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]),
               float(sys.argv[5]))
