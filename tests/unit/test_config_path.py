# SPDX-License-Identifier: Apache-2.0
"""Every program finds its configuration where the docs put it.

Given no ``--config-file``, oslo.config looks in ``~/.<project>/``,
``~/``, ``/etc/<project>/`` and ``/etc/`` for ``<program>.conf``: the
project must be ``gvfs-openstack`` for every program, or one of them
quietly runs on its defaults (a sqlite job store, say) while its file
sits in ``/etc/gvfs-openstack/``.  The tests put each program's file in
``~/.gvfs-openstack/`` of a home of their own, which oslo.config reads
by the same rule, and check the program read it.
"""

from oslo_config import cfg
from oslo_log import log as logging
import pytest

from gvfs_openstack.api import service as api_service
from gvfs_openstack.cmd import manage
from gvfs_openstack.cmd import proxy as proxy_cmd
from gvfs_openstack.cmd import status
from gvfs_openstack import conf as conf_pkg
from gvfs_openstack.conf import migration as migration_conf

STORE = "sqlite:////var/lib/gvfs-openstack/from-the-project-dir.db"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A home whose ``.gvfs-openstack/`` holds the programs' files."""
    monkeypatch.setenv("HOME", str(tmp_path))
    directory = tmp_path / ".gvfs-openstack"
    directory.mkdir()

    def put(prog, text):
        (directory / (prog + ".conf")).write_text(text)
    return put


def test_the_project_is_gvfs_openstack():
    assert conf_pkg.PROJECT == "gvfs-openstack"
    assert cfg.find_config_files(conf_pkg.PROJECT, "gvfs-conductor") == \
        cfg.find_config_files("gvfs-openstack", "gvfs-conductor")


def test_the_conductor_reads_its_file(home):
    home("gvfs-conductor", "[conductor]\njob_store = %s\n" % STORE)
    conf = migration_conf.load(cfg.ConfigOpts(), [], "gvfs-conductor")
    assert conf.conductor.job_store == STORE


def test_gvfs_manage_reads_the_conductors_file(home):
    home("gvfs-conductor", "[conductor]\njob_store = %s\n" % STORE)
    conf = manage._parse(["db", "version"])
    assert conf.conductor.job_store == STORE


def test_gvfs_status_reads_the_conductors_file(home):
    home("gvfs-conductor", "[conductor]\njob_store = %s\n" % STORE)
    conf, _ = status._parsed(["upgrade", "check"], status._conductor_opts)
    assert conf.conductor.job_store == STORE


def test_gvfs_api_reads_its_file(home, monkeypatch):
    home("gvfs-api", "[api]\nmax_connections = 7\n")
    monkeypatch.setattr(cfg, "CONF", cfg.ConfigOpts())
    monkeypatch.setattr(logging, "setup", lambda conf, prog: None)
    assert api_service.load([]).api.max_connections == 7


def test_gvfs_proxy_reads_its_file(home, monkeypatch):
    home("gvfs-proxy", "[proxy]\nrole = server\n")
    monkeypatch.setattr(proxy_cmd, "CONF", cfg.ConfigOpts())
    assert proxy_cmd._parse(["stats"]).proxy.role == "server"
