import os
import subprocess
import sys

from oslo_config import cfg
import pytest

from gvfs_openstack import conf as gvfs_conf
from gvfs_openstack.conf import opts
from gvfs_openstack import exceptions
from gvfs_openstack.gvfs import service

TOP = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


@pytest.fixture
def make_conf():
    """A fresh ConfigOpts per call, overrides cleared after the test.

    The option groups (and so their overrides) are module-level objects.
    """
    made = []

    def make(**sections):
        conf = cfg.ConfigOpts()
        gvfs_conf.register_opts(conf)
        for group, values in sections.items():
            for name, value in values.items():
                conf.set_override(name, value, group)
                made.append((conf, name, group))
        conf([])
        return conf

    yield make
    for conf, name, group in made:
        conf.clear_override(name, group)


def test_list_opts_covers_every_registered_group():
    conf = cfg.ConfigOpts()
    gvfs_conf.register_opts(conf)
    listed = {group.name for group, _ in opts.list_opts()}
    groups = {name for name in conf
              if isinstance(conf[name], cfg.ConfigOpts.GroupAttr)}
    assert listed == groups
    for _, group_opts in opts.list_opts():
        for opt in group_opts:
            assert opt.help, "option %s has no help text" % opt.name


@pytest.mark.parametrize("name", ["gvfs-proxy", "glance-gvfs-store",
                                  "nova-gvfs", "gvfs-conductor"])
def test_sample_config_is_up_to_date(tmp_path, name):
    out = tmp_path / "sample"
    subprocess.run(
        [sys.executable, "-m", "oslo_config.generator", "--config-file",
         os.path.join(TOP, "etc/oslo-config-generator/%s.conf" % name),
         "--output-file", str(out)], check=True, cwd=TOP)
    with open(os.path.join(TOP, "etc/gvfs-openstack/"
                                "%s.conf.sample" % name)) as f:
        assert f.read() == out.read_text(), \
            "run `tox -e genconfig` and commit the sample"


def test_client_role_needs_an_upstream_port(make_conf):
    conf = make_conf(proxy={"role": "client"}, upstream={"tunnel": "tcp"})
    with pytest.raises(exceptions.InvalidConfig, match="port"):
        service.ProxyService(conf)


def test_ssh_tunnel_needs_host_key_pinning(make_conf):
    conf = make_conf(proxy={"role": "client"},
                     upstream={"tunnel": "ssh", "port": 1,
                               "ssh_host": "127.0.0.1", "ssh_user": "u",
                               "ssh_key": "/k"})
    with pytest.raises(exceptions.InvalidConfig, match="ssh_known_hosts"):
        service.ProxyService(conf)


def test_server_role_needs_exports(make_conf):
    conf = make_conf(proxy={"role": "server"})
    with pytest.raises(exceptions.InvalidConfig, match="export"):
        service.ProxyService(conf)


def test_server_role_rejects_bad_id_maps(make_conf):
    conf = make_conf(proxy={"role": "server"},
                     server={"exports": ["/srv"], "uid_map": {"a": "1"}})
    with pytest.raises(exceptions.InvalidConfig, match="uid map"):
        service.ProxyService(conf)


def test_tls_listener_needs_key_and_ca(make_conf):
    conf = make_conf(proxy={"role": "server"}, server={"exports": ["/srv"]},
                     listen={"tls_cert": "/c.pem"})
    with pytest.raises(exceptions.InvalidConfig, match="tls"):
        service.ProxyService(conf)
