# SPDX-License-Identifier: Apache-2.0
"""Slow clients cannot hold the ``gvfs-api`` program (issue 61, item 5).

The real program (its own threaded server under oslo.service's
launcher) with a request deadline of a few seconds; its Keystone and
message bus are never reached, as no request here gets past the
unauthenticated paths.  64 clients from four loopback addresses trickle
a byte a second, each read far within ``client_timeout``: the deadline
cuts them all and an honest request is answered within one deadline.
One address gets at most its share of connections, the rest 503 at
once.  A lawful client that sends its request slowly, within the
deadline, is served.
"""

import configparser
import os
import sys
import time
import urllib.request

import pytest

from gvfs_lab import process
from tests import slow_clients

#: ``[api] request_timeout`` of the program under attack.
DEADLINE = 4.0
PER_SOURCE = 16
#: Four addresses' full shares: every one of ``max_connections`` (64).
ATTACKERS = ["127.0.0.%d" % n for n in range(2, 6)]
#: The per-address test's: the server may still be counting its
#: connections for a moment after they closed.
GREEDY, OTHER = "127.0.0.6", "127.0.0.7"


@pytest.fixture(scope="module")
def api_port(tmp_path_factory):
    workdir = str(tmp_path_factory.mktemp("gvfs-api-slow"))
    port = process.free_port()
    conf = configparser.ConfigParser(interpolation=None)
    conf["DEFAULT"] = {"transport_url": "rabbit://guest:guest@127.0.0.1:1/"}
    conf["api"] = {"host_ip": "127.0.0.1", "port": str(port),
                   "trusts": "false", "max_connections": "64",
                   "client_timeout": "30",
                   "request_timeout": str(DEADLINE),
                   "max_connections_per_source": str(PER_SOURCE)}
    conf["keystone_authtoken"] = {
        "www_authenticate_uri": "http://127.0.0.1:1/v3",
        "auth_url": "http://127.0.0.1:1/v3"}
    path = os.path.join(workdir, "gvfs-api.conf")
    with open(path, "w") as f:
        conf.write(f)
    program = os.path.join(os.path.dirname(sys.executable), "gvfs-api")
    api = process.ManagedProcess("gvfs-api", [program, "--config-file", path],
                                 os.path.join(workdir, "gvfs-api.log"))
    try:
        process.wait_until(lambda: _healthy(port), "gvfs-api answering",
                           120, api, 0.2)
        yield port
    finally:
        api.stop(timeout=30)


def _healthy(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/healthcheck" % port,
                                    timeout=5) as reply:
            return reply.status == 200
    except OSError:
        return False


def _answered(answer):
    """Whether ``answer`` is the API's (its version document)."""
    return answer.startswith(b"HTTP/1.0 200") and b"v1.0" in answer


def test_a_normal_request_is_answered(api_port):
    assert _answered(slow_clients.request(api_port, path="/v1"))


def test_a_slow_request_within_the_deadline_is_answered(api_port):
    started = time.monotonic()
    answer = slow_clients.request(api_port, pieces=4, every=0.6,
                                  path="/v1")
    assert _answered(answer), answer
    assert time.monotonic() - started > 2.0


def test_one_address_holds_at_most_its_share(api_port):
    held = slow_clients.start_tricklers(api_port, [GREEDY], PER_SOURCE,
                                        1.0, 3.0)
    time.sleep(0.5)
    for _ in range(4):
        started = time.monotonic()
        answer = slow_clients.request(api_port, source=GREEDY)
        assert answer.startswith(b"HTTP/1.0 503") or answer == b"reset", \
            answer
        assert time.monotonic() - started < 2.0
    assert _answered(slow_clients.request(api_port, source=OTHER,
                                          path="/v1"))
    for trickler in held:
        trickler.join(30)


def test_trickling_clients_cannot_keep_an_honest_request_waiting(api_port):
    tricklers = slow_clients.start_tricklers(api_port, ATTACKERS, PER_SOURCE,
                                             1.0, 25.0)
    time.sleep(1.0)
    started = time.monotonic()
    assert _answered(slow_clients.request(api_port, path="/v1"))
    waited = time.monotonic() - started
    for trickler in tricklers:
        trickler.join(30)
    assert waited < DEADLINE + 5, waited
    ended = [t.ended_after for t in tricklers]
    assert None not in ended, "%d never cut" % ended.count(None)
    ended.sort()
    # Cut at the deadline; the honest request may have cut the oldest
    # of them sooner to take its slot (every slot was taken).
    assert DEADLINE - 0.5 < ended[1], ended
    assert ended[len(ended) // 2] < DEADLINE + 2 and ended[-1] < 15, ended
