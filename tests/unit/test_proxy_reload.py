# SPDX-License-Identifier: Apache-2.0
"""``gvfs-proxy serve`` on SIGHUP: what a reload applies, and what not.

The proxy is assembled from a real configuration file (not started: a
reload touches only the listener's settings and the cache's policies),
the file is edited as an operator would, and :meth:`reload` re-reads it.
"""

import configparser

from oslo_config import cfg
import pytest

from gvfs_openstack.cmd import proxy as proxy_cmd
from gvfs_openstack.proxy import service


def _write(path, sections):
    parser = configparser.ConfigParser()
    parser.read_dict(sections)
    with open(path, "w") as f:
        parser.write(f)


@pytest.fixture
def client(tmp_path):
    """``(ProxyService, config path, sections)`` of a caching client."""
    path = str(tmp_path / "client.conf")
    sections = {
        "proxy": {"role": "client"},
        "listen": {"host": "127.0.0.1", "port": "0"},
        "upstream": {"tunnel": "tcp", "host": "127.0.0.1", "port": "1"},
        "cache": {"directory": str(tmp_path / "cache"), "capacity_mb": "8",
                  "bank_size_mb": "8"},
    }
    _write(path, sections)
    conf = cfg.ConfigOpts()
    proxy_cmd.register_opts(conf)
    conf(["--config-file", path])
    return service.ProxyService(conf), path, sections


def test_live_options_apply_and_the_rest_waits(client):
    proxy, path, sections = client
    capacity = proxy.cache.store.geometry.capacity
    sections["listen"]["allowed_peers"] = "10.0.0.0/8"
    sections["cache"]["coherence_window"] = "9"
    sections["cache"]["capacity_mb"] = "64"       # Not mutable.
    _write(path, sections)
    assert proxy.reload() == ["[cache] coherence_window",
                              "[listen] allowed_peers"]
    assert proxy.listener.peers.allows("10.1.2.3")
    assert not proxy.listener.peers.allows("192.0.2.1")
    assert proxy.cache.policies.default_after == 9.0
    assert proxy.cache.store.geometry.capacity == capacity


def test_a_bad_value_changes_nothing(client):
    proxy, path, sections = client
    peers = proxy.listener.peers
    window = proxy.cache.policies.default_after
    rate = proxy._warm_rate
    sections["listen"]["allowed_peers"] = "not-a-network"
    sections["cache"]["coherence_window"] = "9"
    sections["cache"]["warm_rate_mib"] = str(rate + 7)
    _write(path, sections)
    assert proxy.reload() == []
    assert proxy.listener.peers is peers
    assert proxy.cache.policies.default_after == window
    assert proxy._warm_rate == rate
    # Fixed, the next reload applies all of it.
    sections["listen"]["allowed_peers"] = "10.0.0.0/8"
    _write(path, sections)
    proxy.reload()
    assert proxy.listener.peers.allows("10.1.2.3")
    assert proxy.cache.policies.default_after == 9.0
    assert proxy._warm_rate == rate + 7


def test_a_server_proxy_is_not_opened_to_everyone_by_a_reload(tmp_path):
    path = str(tmp_path / "server.conf")
    sections = {
        "proxy": {"role": "server"},
        "listen": {"host": "127.0.0.1", "port": "0",
                   "allowed_peers": "127.0.0.1/32"},
        "server": {"exports": "/srv"},
    }
    _write(path, sections)
    conf = cfg.ConfigOpts()
    proxy_cmd.register_opts(conf)
    conf(["--config-file", path])
    proxy = service.ProxyService(conf)
    sections["listen"]["allowed_peers"] = ""
    _write(path, sections)
    assert proxy.reload() == []
    assert not proxy.listener.peers.allows("192.0.2.1")
    assert proxy.listener.peers.allows("127.0.0.1")
