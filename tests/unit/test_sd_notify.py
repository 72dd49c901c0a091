# SPDX-License-Identifier: Apache-2.0
"""``Type=notify``: the proxy tells systemd it serves once it listens.

A datagram socket of the test's stands for systemd's ``NOTIFY_SOCKET``;
the real ``gvfs-proxy serve`` runs as a process with it in its
environment, as systemd starts it.
"""

import configparser
import os
import signal
import socket
import subprocess
import sys

import pytest

from gvfs_lab import process
from gvfs_openstack import sd_notify


@pytest.fixture
def systemd(tmp_path, monkeypatch):
    """A NOTIFY_SOCKET; yields the socket the messages arrive on."""
    path = str(tmp_path / "notify")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(60)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        yield sock


def test_ready_is_sent_with_its_status(systemd):
    assert sd_notify.ready("listening on port 1")
    assert systemd.recv(4096) == b"READY=1\nSTATUS=listening on port 1"


def test_nothing_is_sent_outside_systemd(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert sd_notify.ready() is False


def test_an_unreachable_socket_is_not_fatal(tmp_path, monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "nobody"))
    assert sd_notify.ready() is False


def test_gvfs_proxy_serve_is_ready_once_it_listens(systemd, tmp_path):
    port = process.free_port()
    conf = configparser.ConfigParser()
    conf["proxy"] = {"role": "client"}
    conf["listen"] = {"host": "127.0.0.1", "port": str(port)}
    conf["upstream"] = {"tunnel": "tcp", "host": "127.0.0.1", "port": "1"}
    path = tmp_path / "gvfs-proxy.conf"
    with open(path, "w") as f:
        conf.write(f)
    proxy = subprocess.Popen(
        [sys.executable, "-c", "import sys; from gvfs_openstack.cmd "
         "import entry; sys.exit(entry.proxy())", "--config-file",
         str(path), "serve"], cwd=tmp_path, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL, env=dict(os.environ))
    try:
        assert systemd.recv(4096) == \
            b"READY=1\nSTATUS=listening on port %d" % port
        # It says so only once it does.
        socket.create_connection(("127.0.0.1", port), timeout=10).close()
    finally:
        proxy.send_signal(signal.SIGTERM)
        proxy.wait(60)
