# SPDX-License-Identifier: Apache-2.0
import json
import os
import subprocess
import sys
import textwrap

from oslo_config import cfg
import pytest

from gvfs_openstack.cmd import proxy as proxy_cmd
from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack.conf import nova as nova_conf
from gvfs_openstack.conf import opts
from gvfs_openstack import exceptions
from gvfs_openstack.proxy import access
from gvfs_openstack.proxy import service

TOP = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


@pytest.fixture
def make_conf():
    """A fresh ConfigOpts per call, overrides cleared after the test.

    The option groups (and so their overrides) are module-level objects.
    """
    made = []

    def make(**sections):
        conf = cfg.ConfigOpts()
        proxy_cmd.register_opts(conf)
        for group, values in sections.items():
            for name, value in values.items():
                conf.set_override(name, value, group)
                made.append((conf, name, group))
        conf([])
        return conf

    yield make
    for conf, name, group in made:
        conf.clear_override(name, group)


def _listed(groups):
    """{(group name, option name)} of a ``list_opts()`` result."""
    return {(getattr(group, "name", group), opt.dest)
            for group, group_opts in groups for opt in group_opts}


def _registered(conf):
    return {(group, opt) for group in conf
            if isinstance(conf[group], cfg.ConfigOpts.GroupAttr)
            for opt in conf[group]}


def test_each_program_registers_what_its_sample_lists():
    proxy = cfg.ConfigOpts()
    proxy_cmd.register_opts(proxy)
    assert _registered(proxy) == _listed(opts.list_proxy_opts()) \
        | _listed(opts.list_metrics_opts())
    nova = cfg.ConfigOpts()
    nova_conf.register_opts(nova)
    assert _registered(nova) == _listed(opts.list_nova_opts())
    conductor = cfg.ConfigOpts()
    migration_conf.register_opts(conductor)
    assert _registered(conductor) <= _listed(opts.list_conductor_opts()) \
        | _listed(opts.list_metrics_opts())


def test_list_opts_holds_every_option_of_the_project():
    every = _listed(opts.list_opts())
    for program in (opts.list_proxy_opts, opts.list_glance_opts,
                    opts.list_nova_opts, opts.list_conductor_opts,
                    opts.list_privileged_opts, opts.list_metrics_opts):
        assert _listed(program()) <= every
    for _, group_opts in opts.list_opts():
        for opt in group_opts:
            assert opt.help, "option %s has no help text" % opt.name


def test_importing_a_plugin_registers_no_option():
    """glance-api and nova-compute keep their own options only."""
    code = textwrap.dedent("""
        import json
        from oslo_config import cfg
        # The services' own modules first: their options are theirs.
        import glance_store.driver
        import nova.virt.libvirt.driver
        import oslo_messaging
        def registered():
            return sorted((g, o) for g in cfg.CONF
                          if isinstance(cfg.CONF[g], cfg.ConfigOpts.GroupAttr)
                          for o in cfg.CONF[g])
        before = registered()
        import gvfs_openstack.glance.store
        import gvfs_openstack.nova.driver
        import gvfs_openstack.cmd.proxy
        import gvfs_openstack.cmd.conductor
        import gvfs_openstack.osc.plugin
        print(json.dumps([p for p in registered() if p not in before]))
    """)
    out = subprocess.run([sys.executable, "-c", code], check=True,
                         capture_output=True, text=True, cwd=TOP)
    added = json.loads(out.stdout.splitlines()[-1])
    assert added == [], added


@pytest.mark.parametrize("name", ["gvfs-proxy", "glance-gvfs-store",
                                  "nova-gvfs", "gvfs-conductor", "gvfs-api"])
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


#: A server proxy's listener that names its tunnel endpoint.
PEERS = {"allowed_peers": ["127.0.0.1/32"]}


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
    conf = make_conf(proxy={"role": "server"}, listen=PEERS)
    with pytest.raises(exceptions.InvalidConfig, match="export"):
        service.ProxyService(conf)


def test_server_role_rejects_bad_id_maps(make_conf):
    conf = make_conf(proxy={"role": "server"}, listen=PEERS,
                     server={"exports": ["/srv"], "uid_map": {"a": "1"}})
    with pytest.raises(exceptions.InvalidConfig, match="uid map"):
        service.ProxyService(conf)


def test_tls_listener_needs_key_and_ca(make_conf):
    conf = make_conf(proxy={"role": "server"}, server={"exports": ["/srv"]},
                     listen=dict(PEERS, tls_cert="/c.pem"))
    with pytest.raises(exceptions.InvalidConfig, match="tls"):
        service.ProxyService(conf)


@pytest.mark.parametrize("listen, why", [
    ({}, "server proxy with an empty allowed_peers"),
    ({"host": "0.0.0.0", "allowed_peers": ["192.0.2.0/24"]},
     "without TLS sends images"),
])
def test_an_exposed_server_proxy_does_not_start(make_conf, listen, why):
    conf = make_conf(proxy={"role": "server"}, listen=listen,
                     server={"exports": ["/srv"]})
    with pytest.raises(exceptions.InvalidConfig, match=why):
        service.ProxyService(conf)


def test_a_plain_client_listener_off_loopback_names_its_peers(make_conf):
    conf = make_conf(proxy={"role": "client"}, listen={"host": "0.0.0.0"},
                     upstream={"tunnel": "tcp", "port": 1})
    with pytest.raises(exceptions.InvalidConfig,
                       match="plain TCP listener on 0.0.0.0"):
        service.ProxyService(conf)


@pytest.mark.parametrize("role, host, tls, peers, exposed", [
    ("server", "127.0.0.1", False, ["127.0.0.1/32"], False),
    ("server", "::1", False, [], True),
    ("server", "192.0.2.1", True, ["192.0.2.0/24"], False),
    ("server", "dtn.example.org", False, ["192.0.2.0/24"], True),
    ("client", "127.0.0.1", False, [], False),
    ("client", "localhost", False, [], False),
    ("client", "192.0.2.1", False, ["192.0.2.0/24"], False),
    ("client", "192.0.2.1", True, [], False),
    ("client", "::", False, [], True),
])
def test_exposure_of_a_listener(role, host, tls, peers, exposed):
    assert (access.exposure(role, host, tls, peers) is not None) == exposed
