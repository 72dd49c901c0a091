# SPDX-License-Identifier: Apache-2.0
"""How a conductor reaches a site's Glance: keystoneauth per site group."""

import socket

from keystoneauth1 import identity
from keystoneauth1 import session
from oslo_config import cfg
import pytest

from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration import images_api as glance_api
from gvfs_openstack.migration import sites

DTN = """dtn_export = /export
gridftp_url = ftp://127.0.0.1:2812/
gridftp_data_protection = clear
"""


def _conf(tmp_path, east, west):
    path = tmp_path / "conductor.conf"
    path.write_text("[conductor]\nsites = east,west\nlocal_site = east\n"
                    "[site:east]\n%s%s[site:west]\n%s%s"
                    % (east, DTN, west, DTN))
    return migration_conf.load(cfg.ConfigOpts(), ["--config-file",
                                                  str(path)], "test")


def _password(user, region):
    return """auth_type = password
auth_url = http://127.0.0.1:5000/v3
username = %s
password = secret
project_name = service
user_domain_name = Default
project_domain_name = Default
glance_region = %s
""" % (user, region)


def test_each_site_logs_in_with_its_own_credentials_and_region(tmp_path):
    conf = _conf(tmp_path, _password("conductor-east", "RegionEast"),
                 _password("conductor-west", "RegionWest"))
    for name, user, region in (("east", "conductor-east", "RegionEast"),
                               ("west", "conductor-west", "RegionWest")):
        site = sites.load(conf, name)
        assert site.glance_endpoint is None
        assert site.glance_region == region
        auth = sites.glance_session(conf, name).auth
        assert isinstance(auth, identity.Password)
        elements = auth.get_cache_id_elements()
        assert elements["username"] == user
        assert elements["auth_url"] == "http://127.0.0.1:5000/v3"
        assert elements["project_name"] == "service"


def test_a_site_without_credentials_or_endpoint_is_a_clear_error(tmp_path):
    conf = _conf(tmp_path, "", _password("conductor", "RegionWest"))
    with pytest.raises(exceptions.InvalidConfig,
                       match=r"\[site:east\] auth_type.*Keystone catalog"):
        sites.load(conf, "east")
    # The other site is fine.
    assert sites.load(conf, "west").glance_region == "RegionWest"


def test_a_glance_without_keystone_needs_its_endpoint(tmp_path):
    conf = _conf(tmp_path, "auth_type = none\n"
                 "glance_endpoint = http://127.0.0.1:9292\n",
                 "auth_type = none\n")
    assert sites.load(conf, "east").glance_endpoint == \
        "http://127.0.0.1:9292"
    assert sites.glance_session(conf, "east").auth is not None
    # auth_type = none without an endpoint: there is no catalog to ask.
    with pytest.raises(exceptions.InvalidConfig,
                       match=r"\[site:west\] auth_type"):
        sites.load(conf, "west")


def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_keystone_that_does_not_answer_is_a_transient_stage_failure(
        tmp_path):
    west = _password("conductor", "RegionWest").replace(
        "127.0.0.1:5000", "127.0.0.1:%d" % _closed_port())
    conf = _conf(tmp_path, _password("conductor", "RegionEast"), west)
    client = glance_api.GlanceClient(sites.glance_session(conf, "west"),
                                     sites.load(conf, "west"))
    with pytest.raises(exceptions.StageFailed,
                       match="site west: cannot reach") as failed:
        client.image("0f4a8c2e-7d3b-4e8a-9c6f-0b1d2e3f4a5b")
    assert failed.value.transient


def test_no_credentials_is_a_final_stage_failure(tmp_path):
    conf = _conf(tmp_path, _password("conductor", "RegionEast"),
                 _password("conductor", "RegionWest"))
    site = sites.load(conf, "west")
    client = glance_api.GlanceClient(session.Session(), site)
    with pytest.raises(exceptions.StageFailed,
                       match="site west: no credentials") as failed:
        client.find("some-image")
    assert not failed.value.transient


# --- the conductor's NFS to a DTN ------------------------------------------

def _dtn_conf(tmp_path, east):
    return _conf(tmp_path, "auth_type = none\n"
                 "glance_endpoint = http://127.0.0.1:9292\n" + east,
                 "auth_type = none\n"
                 "glance_endpoint = http://127.0.0.1:9393\n")


@pytest.mark.parametrize("host", ["192.0.2.7", "dtn-east.example.org"])
def test_plain_nfs_to_a_dtn_off_loopback_is_refused(tmp_path, host):
    conf = _dtn_conf(tmp_path, "dtn_nfs_host = %s\n" % host)
    with pytest.raises(exceptions.InvalidConfig) as refused:
        sites.load(conf, "east")
    assert str(refused.value).startswith(
        "Invalid configuration of [site:east] dtn_nfs_host: %s is not a "
        "loopback address" % host)
    assert "dtn_nfs_tls_cert" in str(refused.value)
    assert sites.load(conf, "west").nfs_tls is None     # 127.0.0.1


def test_a_trusted_network_lets_plain_nfs_cross(tmp_path):
    conf = _dtn_conf(tmp_path, "dtn_nfs_host = 192.0.2.7\n"
                     "dtn_nfs_trusted_network = true\n")
    site = sites.load(conf, "east")
    assert site.nfs_host == "192.0.2.7" and site.nfs_tls is None


def test_tls_to_the_dtn_needs_its_three_files(tmp_path):
    for name in ("cert.pem", "key.pem", "ca.pem"):
        (tmp_path / name).write_text("pem")
    files = ("dtn_nfs_tls_cert = {0}/cert.pem\n"
             "dtn_nfs_tls_key = {0}/key.pem\n"
             "dtn_nfs_tls_ca = {0}/ca.pem\n".format(tmp_path))
    site = sites.load(_dtn_conf(tmp_path, "dtn_nfs_host = 192.0.2.7\n"
                                + files), "east")
    assert site.nfs_tls.cert == str(tmp_path / "cert.pem")
    assert site.nfs_tls.ca == str(tmp_path / "ca.pem")
    assert site.nfs_tls.server_name is None     # The host's name.
    # One missing: named, with the ones that were set.
    partial = files.replace("dtn_nfs_tls_key = %s/key.pem\n" % tmp_path, "")
    with pytest.raises(exceptions.InvalidConfig,
                       match=r"\[site:east\] dtn_nfs_tls_key: it is "
                             r"required with dtn_nfs_tls_ca, "
                             r"dtn_nfs_tls_cert"):
        sites.load(_dtn_conf(tmp_path, partial), "east")
    # A file that cannot be read is named at load, not at the first job.
    (tmp_path / "key.pem").unlink()
    with pytest.raises(exceptions.InvalidConfig,
                       match=r"dtn_nfs_tls_key: .*key.pem cannot be read"):
        sites.load(_dtn_conf(tmp_path, files), "east")
