# SPDX-License-Identifier: Apache-2.0
"""``[metrics] token_file``: a scrape without the token is answered 401.

Both kinds of endpoint, on loopback with real sockets: the threaded one
of gvfs-api and gvfs-conductor (:class:`metrics_server.MetricsServer`)
and the event loop's of the proxies and the mount
(:class:`metrics_server.LoopEndpoint`), built as the services build
them (the proxy's from its configuration file).
"""

import asyncio
import logging
import os
import socket
import textwrap

from oslo_config import cfg
from prometheus_client import core
import pytest

from gvfs_openstack.cmd import proxy as proxy_cmd
from gvfs_openstack import exceptions
from gvfs_openstack import metrics_access
from gvfs_openstack import metrics_server
from gvfs_openstack.proxy import service

TOKEN = b"s3cret-scrape-token"
#: Whether each header is let in, the token being TOKEN.
HEADERS = [
    (None, False),
    (b"Bearer " + TOKEN, True),
    (b"bearer " + TOKEN, True),
    (b"Bearer " + TOKEN[:-1], False),
    (b"Bearer " + TOKEN + b"x", False),
    (b"Basic " + TOKEN, False),
    (TOKEN, False),
    (b"Bearer", False),
]


def _registry():
    def collect():
        gauge = core.GaugeMetricFamily("gvfs_secret_paths", "Paths.",
                                       labels=["export"])
        gauge.add_metric(["/srv/dtn/images"], 1)
        yield gauge
    return metrics_server.registry_of(collect)


def _request(port, header):
    head = b"GET /metrics HTTP/1.0\r\nHost: x\r\n"
    if header is not None:
        head += b"Authorization: " + header + b"\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(head + b"\r\n")
        answer = b""
        while data := conn.recv(65536):
            answer += data
    return answer


def _token_file(tmp_path, content=TOKEN + b"\n", mode=0o600):
    path = tmp_path / "metrics-token"
    path.write_bytes(content)
    os.chmod(path, mode)
    return str(path)


@pytest.mark.parametrize("header,let_in", HEADERS)
def test_the_threaded_endpoint_wants_the_token(tmp_path, header, let_in):
    token = metrics_access.read_token(_token_file(tmp_path))
    server = metrics_server.MetricsServer("127.0.0.1", 0, _registry(),
                                          token=token)
    server.start()
    try:
        answer = _request(server.port, header)
    finally:
        server.stop()
    _check(answer, let_in)


def _check(answer, let_in, metric=b"gvfs_secret_paths"):
    if let_in:
        assert answer.startswith(b"HTTP/1.0 200"), answer[:200]
        assert metric in answer
    else:
        assert answer.split(b"\r\n", 1)[0].endswith(b"401 Unauthorized"), \
            answer[:200]
        assert b"WWW-Authenticate: Bearer" in answer
        assert metric not in answer


def _proxy(tmp_path, token_file):
    path = tmp_path / "client.conf"
    path.write_text(textwrap.dedent("""\
        [proxy]
        role = client
        [upstream]
        tunnel = tcp
        host = 127.0.0.1
        port = 1
        [metrics]
        port = 0
        token_file = %s
        """ % token_file))
    conf = cfg.ConfigOpts()
    proxy_cmd.register_opts(conf)
    conf(["--config-file", str(path)])
    return service.ProxyService(conf)


@pytest.mark.parametrize("header,let_in", HEADERS)
def test_the_proxys_endpoint_wants_the_token(tmp_path, header, let_in):
    endpoint = _proxy(tmp_path, _token_file(tmp_path)).metrics

    async def scrape():
        port = await endpoint.start()
        try:
            return await asyncio.to_thread(_request, port, header)
        finally:
            await endpoint.close()
    _check(asyncio.run(scrape()), let_in, b"gvfs_proxy_")


def test_without_a_token_file_every_scrape_is_answered(tmp_path):
    server = metrics_server.MetricsServer("127.0.0.1", 0, _registry())
    server.start()
    try:
        _check(_request(server.port, None), True)
    finally:
        server.stop()


@pytest.mark.parametrize("content", [b"", b"\n  \n", b"one\ntwo\n",
                                     b"x" * 4097])
def test_a_token_file_without_one_token_is_refused_at_start(tmp_path,
                                                            content):
    with pytest.raises(exceptions.InvalidConfig, match="token_file"):
        _proxy(tmp_path, _token_file(tmp_path, content))


def test_a_missing_token_file_is_refused_at_start(tmp_path):
    with pytest.raises(exceptions.InvalidConfig, match="token_file"):
        _proxy(tmp_path, str(tmp_path / "nowhere"))


def test_a_token_every_account_reads_is_warned_of(tmp_path, caplog):
    caplog.set_level(logging.WARNING)
    metrics_access.read_token(_token_file(tmp_path, mode=0o644))
    assert "readable by every account" in caplog.text


@pytest.mark.parametrize("host,warned", [("127.0.0.1", False),
                                         ("::1", False),
                                         ("localhost", False),
                                         ("192.0.2.10", True),
                                         ("0.0.0.0", True)])
def test_an_endpoint_beyond_loopback_without_a_token_is_warned_of(
        caplog, host, warned):
    caplog.set_level(logging.WARNING)
    metrics_access.warn_if_open(host, None)
    assert ("without [metrics] token_file" in caplog.text) == warned
    caplog.clear()
    metrics_access.warn_if_open(host, TOKEN)
    assert "token_file" not in caplog.text
