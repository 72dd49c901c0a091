# SPDX-License-Identifier: Apache-2.0
"""The devstack plugin, phase by phase, with stand-ins for devstack.

devstack itself cannot run here (it clones from the internet), so each
phase sources ``devstack/settings`` and ``devstack/plugin.sh`` as
``stack.sh``/``unstack.sh``/``clean.sh`` do, with the devstack helpers the
plugin calls replaced by ``tests/unit/devstack/stubs.sh`` (which records
every call) and the system commands it runs replaced on ``$PATH``.  The
configuration files it writes are then read with the project's own
oslo.config options, so a wrong type, a wrong choice or a misspelt option
fails here rather than in a deployment; gvfs-api is started for real on
the configuration the plugin wrote.
"""

import configparser
import os
import pwd
import re
import sqlite3
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request

from keystoneauth1 import loading as ks_loading
from keystonemiddleware import opts as ksm_opts
from oslo_config import cfg
import pytest
import yaml

from gvfs_openstack.conf import api as api_conf
from gvfs_openstack.conf import glance as glance_conf
from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack.conf import nova as nova_conf
from gvfs_openstack.conf import opts as gvfs_opts
from gvfs_openstack.migration.db import schema

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
STUBS = os.path.join(REPO, "tests", "unit", "devstack", "stubs.sh")
PHASE = ('set -o errexit -o nounset; source "$STUBS"; '
         'source "$GVFS_DIR/devstack/settings"; '
         'source "$GVFS_DIR/devstack/plugin.sh" "$@"')
HOST_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeHostKeyForTheDevstackTest"

_UNMOUNT = ('rmdir "$(cat "$STUB_STATE/mounted")" && '
            'rm "$STUB_STATE/mounted"')
# System commands the plugin runs, replaced by recorders.
_FAKE_COMMANDS = {
    "systemctl": "",
    "exportfs": "",
    "ssh-keyscan": 'echo "$3 %s"' % HOST_KEY,
    "getent": 'echo "$2:x:%d:%d::$STUB_HOME:/bin/bash"' % (
        os.getuid(), os.getgid()),
    "mountpoint": '[ -f "$STUB_STATE/mounted" ]',
    "fusermount3": _UNMOUNT,
    "umount": _UNMOUNT,
}


class Devstack:
    """A fake devstack host in a temporary directory."""

    def __init__(self, root, **settings):
        self.root = str(root)
        self.etc = os.path.join(self.root, "etc")
        self.log = os.path.join(self.root, "calls.log")
        self.state = os.path.join(self.root, "stub-state")
        self.home = os.path.join(self.root, "home")
        self.data = os.path.join(self.root, "data")
        bindir = os.path.join(self.root, "bin")
        for path in (self.etc, self.state, self.home, self.data, bindir):
            os.makedirs(path)
        for name, body in _FAKE_COMMANDS.items():
            path = os.path.join(bindir, name)
            with open(path, "w") as f:
                f.write('#!/bin/bash\necho "%s $*" >> "$STUB_LOG"\n%s\n'
                        % (name, body))
            os.chmod(path, 0o755)
        # The plugin's own programs: gvfs-manage runs for real (its call
        # recorded); the services are run_process's, recorded only.
        self.bin_dir = os.path.join(self.root, "venv", "bin")
        os.makedirs(self.bin_dir)
        manage = os.path.join(self.bin_dir, "gvfs-manage")
        with open(manage, "w") as f:
            f.write('#!/bin/bash\necho "gvfs-manage $*" >> "$STUB_LOG"\n'
                    'exec "$STUB_PYTHON" -m gvfs_openstack.cmd.manage "$@"\n')
        os.chmod(manage, 0o755)
        user = pwd.getpwuid(os.getuid()).pw_name
        self.env = {
            "PATH": bindir + ":" + os.environ["PATH"],
            "HOME": self.home,
            "STUBS": STUBS, "STUB_LOG": self.log, "STUB_STATE": self.state,
            "STUB_HOME": self.home, "STUB_PYTHON": sys.executable,
            # What stack.sh defines before it sources a plugin.
            "DEST": os.path.join(self.root, "opt-stack"),
            "DATA_DIR": self.data,
            "STACK_USER": user,
            "SERVICE_HOST": "192.0.2.10",
            "ADMIN_PASSWORD": "secretadmin",
            "LIBVIRT_GROUP": "libvirt",
            "ENABLE_DEBUG_LOG_LEVEL": "True",
            "SERVICE_PROTOCOL": "http",
            "SERVICE_TIMEOUT": "60",
            "REGION_NAME": "RegionOne",
            "KEYSTONE_SERVICE_URI": "http://192.0.2.10/identity",
            "SERVICE_PASSWORD": "secretservice",
            "SERVICE_DOMAIN_NAME": "Default",
            "SERVICE_PROJECT_NAME": "service",
            "SSL_BUNDLE_FILE": os.path.join(self.data, "ca-bundle.pem"),
            "MEMCACHE_SERVERS": "localhost:11211",
            "NOVA_INSTANCES_PATH": os.path.join(self.data, "nova",
                                                "instances"),
            "GLANCE_API_CONF": os.path.join(self.etc, "glance",
                                            "glance-api.conf"),
            "NOVA_CPU_CONF": os.path.join(self.etc, "nova", "nova-cpu.conf"),
            "NOVA_BIN_DIR": "/opt/stack/data/venv/bin",
            "ENABLED_SERVICES": "key,g-api,n-api,n-cpu,rabbit",
            "DISABLED_SERVICES": "",
            # The plugin's checkout, and system files moved out of /etc.
            "GVFS_DIR": REPO,
            "GVFS_BIN_DIR": self.bin_dir,
            "GVFS_CONF_DIR": os.path.join(self.etc, "gvfs-openstack"),
            "GVFS_DTN_EXPORT": os.path.join(self.root, "srv", "gvfs-images"),
            "GVFS_KERNEL_EXPORTS": os.path.join(
                self.etc, "exports.d", "gvfs-openstack.exports"),
            "GVFS_KERNEL_NFS_CONF": os.path.join(
                self.etc, "nfs.conf.d", "gvfs-openstack.conf"),
            "GVFS_FUSE_CONF": os.path.join(self.etc, "fuse.conf"),
        }
        self.env.update(settings)
        glance_conf = self.env["GLANCE_API_CONF"]
        os.makedirs(os.path.dirname(glance_conf))
        with open(glance_conf, "w") as f:
            # What devstack's lib/glance wrote for a single file store.
            f.write(textwrap.dedent("""\
                [glance_store]
                stores = file, http
                default_store = file
                filesystem_store_datadir = /opt/stack/data/glance/images/
                """))
        with open(self.env["GVFS_FUSE_CONF"], "w") as f:
            f.write("# mount_max = 1000\n")

    def phase(self, *args, check=True):
        """Run the plugin as devstack does for one phase."""
        result = subprocess.run(["bash", "-c", PHASE, "plugin.sh"] +
                                list(args), env=self.env, text=True,
                                capture_output=True, timeout=60)
        if check and result.returncode:
            pytest.fail("phase %s failed:\n%s" % (args, result.stderr))
        return result

    def stack(self):
        for phase in ("pre-install", "install", "post-config", "extra",
                      "test-config"):
            self.phase("stack", phase)

    def calls(self):
        with open(self.log) as f:
            return f.read().splitlines()

    def running(self):
        """Services the stand-in run_process holds as started."""
        path = os.path.join(self.state, "running")
        if not os.path.isdir(path):
            return {}
        result = {}
        for name in os.listdir(path):
            with open(os.path.join(path, name)) as f:
                result[name] = f.read().strip()
        return result

    def conf_path(self, name):
        return os.path.join(self.env["GVFS_CONF_DIR"], name)

    def keystone(self, *path):
        """What the stand-in Keystone helpers made (a file's lines)."""
        full = os.path.join(self.state, "keystone", *path)
        if not os.path.exists(full):
            return None
        with open(full) as f:
            return f.read().splitlines()


def _oslo(path, groups):
    """Parse ``path`` with the options of ``groups`` ([(group, opts)])."""
    conf = cfg.ConfigOpts()
    for group, opts in groups:
        conf.register_opts(opts, group=group)
    conf(args=[], default_config_files=[path])
    return conf


def _ini(path):
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(path)
    return parser


@pytest.fixture
def devstack(tmp_path):
    return Devstack(tmp_path, GVFS_PEER_SITE_HOST="192.0.2.20")


def test_stack_starts_the_dtn_proxies_mount_and_conductor(devstack):
    devstack.stack()
    env = devstack.env
    running = devstack.running()
    bin_dir = devstack.bin_dir
    server_conf = devstack.conf_path("gvfs-proxy-server.conf")
    client_conf = devstack.conf_path("gvfs-proxy-client.conf")
    assert running["gvfs-server"] == (
        "%s/gvfs-proxy --config-file %s serve" % (bin_dir, server_conf))
    assert running["gvfs-client"] == (
        "%s/gvfs-proxy --config-file %s serve" % (bin_dir, client_conf))
    assert running["gvfs-mount"] == (
        "%s/gvfs-proxy --config-file %s mount %s" % (
            bin_dir, client_conf, os.path.join(env["DATA_DIR"],
                                               "gvfs-mnt")))
    assert running["gvfs-conductor"].endswith(
        "gvfs-conductor --config-file %s"
        % devstack.conf_path("gvfs-conductor.conf"))
    assert running["gvfs-nfs"].startswith("/usr/bin/ganesha.nfsd -F -f ")
    assert "-anonymous-user %s" % env["STACK_USER"] in \
        running["gvfs-gridftp"]
    # The stock nova-compute is restarted with the gvfs driver, in the
    # libvirt group.
    assert running["n-cpu"] == "%s/nova-compute --config-file %s" % (
        env["NOVA_BIN_DIR"], env["NOVA_CPU_CONF"])
    calls = devstack.calls()
    assert "stop_process n-cpu" in calls
    assert "run_process n-cpu %s libvirt" % running["n-cpu"] in calls
    # The extras of the enabled services; glance and nova are devstack's.
    assert ("setup_develop %s proxy,fuse,conductor,api" % env["GVFS_DIR"]
            in calls)
    install = [c for c in calls if c.startswith("install_package")]
    assert install and "nfs-ganesha-vfs" in install[0].split()
    # The DTN, then the proxies, then the mount: each needs the one before.
    order = [c.split()[1] for c in calls if c.startswith("run_process")]
    assert order[:5] == ["gvfs-nfs", "gvfs-gridftp", "gvfs-server",
                         "gvfs-client", "gvfs-mount"]
    assert order.index("gvfs-conductor") < order.index("gvfs-api")
    # Once mounted, root lets the kernel keep more guest reads in flight.
    tune = "sudo %s/gvfs-proxy --config-file %s tune-mount %s" % (
        bin_dir, client_conf, os.path.join(env["DATA_DIR"], "gvfs-mnt"))
    assert calls.index(tune) > calls.index(
        "run_process gvfs-mount %s" % running["gvfs-mount"])
    for sub in ("images", "staging"):
        assert os.path.isdir(os.path.join(env["GVFS_DTN_EXPORT"], sub))


def test_proxy_configs_parse_with_the_proxy_options(devstack):
    devstack.stack()
    env = devstack.env
    groups = gvfs_opts.list_proxy_opts()
    server = _oslo(devstack.conf_path("gvfs-proxy-server.conf"), groups)
    assert server.proxy.role == "server"
    assert server.listen.host == "127.0.0.1"
    assert server.listen.port == 20490
    assert server.listen.allowed_peers == ["127.0.0.1/32"]
    assert server.server.exports == [env["GVFS_DTN_EXPORT"]]
    assert server.server.squash_uid == os.getuid()
    assert server.server.squash_gid == os.getgid()
    assert (server.server.nfs_port, server.server.mount_port) == (2049,
                                                                  20048)
    client = _oslo(devstack.conf_path("gvfs-proxy-client.conf"), groups)
    assert client.proxy.role == "client"
    assert client.upstream.tunnel == "ssh"
    assert client.upstream.ssh_host == "192.0.2.10"
    assert client.upstream.port == 20490
    assert client.cache.block_size == 64 * 1024
    assert client.cache.capacity_mb == 4096
    assert client.cache.consistency == "immutable"
    assert client.mount.export == env["GVFS_DTN_EXPORT"]
    assert client.mount.allow_other is True
    assert client.mount.read_cache_mb == 256
    with open(client.upstream.ssh_known_hosts) as f:
        assert f.read().split() == ["192.0.2.10"] + HOST_KEY.split()
    assert os.path.exists(client.upstream.ssh_key)
    # The key may only forward to the server proxy.
    with open(os.path.join(devstack.home, ".ssh", "authorized_keys")) as f:
        line, = f.read().splitlines()
    assert line.startswith(
        'restrict,port-forwarding,permitopen="127.0.0.1:20490",command="cat" ')
    with open(client.upstream.ssh_key + ".pub") as f:
        assert line.endswith(f.read().strip())
    with open(env["GVFS_FUSE_CONF"]) as f:
        assert "user_allow_other" in f.read().splitlines()
    with open(devstack.conf_path("ganesha.conf")) as f:
        ganesha = f.read()
    assert "Path = %s;" % env["GVFS_DTN_EXPORT"] in ganesha
    assert "NFS_Port = 2049;" in ganesha
    assert "MNT_Port = 20048;" in ganesha
    # Every NFS call is the file account's, root's included: a process
    # on the DTN that skips the server proxy gets no root on the export.
    server = _ini(devstack.conf_path("gvfs-proxy-server.conf"))
    uid, gid = server["server"]["squash_uid"], server["server"]["squash_gid"]
    assert "Squash = All_Squash;" in ganesha
    assert "Anonymous_Uid = %s;" % uid in ganesha
    assert "Anonymous_Gid = %s;" % gid in ganesha
    assert "No_Root_Squash" not in ganesha


def test_glance_gets_the_gvfs_store_as_default(devstack):
    devstack.stack()
    env = devstack.env
    glance = _ini(env["GLANCE_API_CONF"])
    assert glance["DEFAULT"]["enabled_backends"] == "dtn:gvfs,local:file"
    assert glance["glance_store"]["default_backend"] == "dtn"
    for stale in ("stores", "default_store", "filesystem_store_datadir"):
        assert stale not in glance["glance_store"]
    for reserved in ("os_glance_staging_store", "os_glance_tasks_store"):
        assert glance[reserved]["filesystem_store_datadir"]
    parsed = _oslo(env["GLANCE_API_CONF"],
                   [("dtn", glance_conf.OPTS)])
    assert parsed.dtn.gvfs_store_datadir == os.path.join(
        env["DATA_DIR"], "gvfs-mnt", "images")
    assert parsed.dtn.gvfs_store_mount_type == "none"
    assert parsed.dtn.gvfs_store_io_timeout == 60.0


def test_nova_gets_the_gvfs_backend(devstack):
    devstack.stack()
    env = devstack.env
    nova = _ini(env["NOVA_CPU_CONF"])
    assert nova["DEFAULT"]["compute_driver"] == "gvfs.GvfsLibvirtDriver"
    assert nova["libvirt"]["images_type"] == "qcow2"
    parsed = _oslo(env["NOVA_CPU_CONF"], nova_conf.list_opts())
    assert parsed.gvfs.mount_type == "none"
    assert parsed.gvfs.image_dir == os.path.join(env["DATA_DIR"],
                                                 "gvfs-mnt", "images")
    assert parsed.gvfs.glance_stores == ["dtn"]
    assert parsed.gvfs.proxy_control_socket == os.path.join(
        env["DATA_DIR"], "gvfs", "client.sock")


def test_conductor_knows_both_sites(devstack):
    devstack.stack()
    env = devstack.env
    path = devstack.conf_path("gvfs-conductor.conf")
    conf = cfg.ConfigOpts()
    migration_conf.load(conf, ["--config-file", path], "gvfs-conductor")
    assert conf.conductor.sites == ["site1", "site2"]
    assert conf.conductor.local_site == "site1"
    store = os.path.join(env["DATA_DIR"], "gvfs", "conductor.db")
    assert conf.database.connection == "sqlite:///%s" % store
    assert conf.conductor.job_store is None
    # Synced before the conductor started: at the newest revision.
    calls = devstack.calls()
    sync = "gvfs-manage --config-file %s db sync" % path
    assert calls.index(sync) < calls.index(
        "run_process gvfs-conductor %s" % devstack.running()["gvfs-conductor"])
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT version_num FROM alembic_version"
                          ).fetchall() == [(schema.head(),)]
    local, peer = conf["site:site1"], conf["site:site2"]
    assert local.gridftp_url == "gsiftp://192.0.2.10:2811"
    assert peer.gridftp_url == "gsiftp://192.0.2.20:2811"
    assert peer.ssh_host == "192.0.2.20"
    assert peer.auth_type == "password"
    # The password plugin's own options are registered only when it loads.
    raw = _ini(path)["site:site2"]
    assert raw["auth_url"] == "http://192.0.2.20/identity"
    assert raw["password"] == "secretadmin"
    assert local.dtn_export == env["GVFS_DTN_EXPORT"]
    assert local.gvfs_store == "dtn"
    assert local.nfs_uid == os.getuid()
    assert local.dtn_staging_dir == "staging"
    assert _ini(path)["DEFAULT"]["transport_url"].startswith("rabbit://")
    tests = _ini(devstack.conf_path("devstack-tests.conf"))["gvfs"]
    assert (tests["site"], tests["peer_site"]) == ("site1", "site2")


def _api_conf(path):
    """gvfs-api's configuration with its options and keystonemiddleware's."""
    conf = _oslo(path, api_conf.list_opts() + ksm_opts.list_auth_token_opts())
    ks_loading.register_auth_conf_options(conf, "keystone_authtoken")
    return conf


def test_api_is_in_the_catalog_and_checks_tokens_as_its_own_user(devstack):
    devstack.stack()
    path = devstack.conf_path("gvfs-api.conf")
    assert devstack.running()["gvfs-api"] == (
        "%s/gvfs-api --config-file %s" % (devstack.bin_dir, path))
    conf = _api_conf(path)
    assert (conf.api.host_ip, conf.api.port) == ("0.0.0.0", 9494)
    # Trusts name the user the conductor's sites log in as, from here.
    assert conf.api.trustee_user_id == "id-of-admin"
    conductor = _ini(devstack.conf_path("gvfs-conductor.conf"))
    local_site = conductor["conductor"]["local_site"]
    assert conductor["site:" + local_site]["username"] == "admin"
    authtoken = conf.keystone_authtoken
    assert authtoken.www_authenticate_uri == "http://192.0.2.10/identity"
    assert authtoken.memcached_servers == ["localhost:11211"]
    # keystoneauth reads the service user's login from the same group
    # (loading the plugin registers its options).
    auth = ks_loading.load_auth_from_conf_options(conf, "keystone_authtoken")
    assert auth.auth_url == "http://192.0.2.10/identity"
    assert (authtoken.username, authtoken.password, authtoken.project_name,
            authtoken.user_domain_name) == ("gvfs-api", "secretservice",
                                            "service", "Default")
    # The conductor's bus.
    assert _ini(path)["DEFAULT"]["transport_url"] == _ini(
        devstack.conf_path("gvfs-conductor.conf"))["DEFAULT"]["transport_url"]
    assert "oslo_middleware" not in _ini(path)
    # Its user has the service role; "openstack gvfs" finds it by type.
    assert devstack.keystone("users", "gvfs-api") == ["service"]
    assert devstack.keystone("services", "gvfs") == [
        "gvfs", "GVFS image migration"]
    assert devstack.keystone("endpoints", "gvfs", "RegionOne", "public") == [
        "http://192.0.2.10:9494"]
    calls = devstack.calls()
    wait = "wait_for_service 60 http://192.0.2.10:9494"
    assert calls.index(wait) > calls.index(
        "run_process gvfs-api %s" % devstack.running()["gvfs-api"])
    tests = _ini(devstack.conf_path("devstack-tests.conf"))["gvfs"]
    assert tests["api_url"] == "http://192.0.2.10:9494"


def _get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def test_the_api_runs_on_the_configuration_it_got(devstack, tmp_path):
    devstack.stack()
    # Only where it listens, and no memcached (nor its client) here.
    override = tmp_path / "here.conf"
    override.write_text("[api]\nhost_ip = 127.0.0.1\nport = 0\n"
                        "[keystone_authtoken]\nmemcached_servers =\n")
    log = tmp_path / "gvfs-api.log"
    with open(log, "w") as out:
        api = subprocess.Popen(
            [sys.executable, "-m", "gvfs_openstack.cmd.api",
             "--config-file", devstack.conf_path("gvfs-api.conf"),
             "--config-file", str(override)],
            stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 30
        while not (port := re.search(r"listens on 127\.0\.0\.1:(\d+)",
                                     log.read_text())):
            assert api.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        url = "http://127.0.0.1:%s" % port.group(1)
        status, _, body = _get(url + "/")
        assert status == 300
        assert b'"v1.0"' in body
        # A request without a token is refused with where to get one.
        status, headers, _ = _get(url + "/v1/migrations")
        assert status == 401
        assert headers["WWW-Authenticate"] == (
            'Keystone uri="http://192.0.2.10/identity"')
    finally:
        api.terminate()
        try:
            returncode = api.wait(timeout=30)
        except subprocess.TimeoutExpired:
            api.kill()
            api.wait()
            raise
    # SIGTERM stops it cleanly.
    assert returncode == 0, log.read_text()


def test_api_behind_devstack_tls_proxy(tmp_path):
    devstack = Devstack(tmp_path, ENABLED_SERVICES="key,g-api,n-api,n-cpu,"
                                                   "rabbit,tls-proxy")
    devstack.stack()
    path = devstack.conf_path("gvfs-api.conf")
    conf = _api_conf(path)
    assert (conf.api.host_ip, conf.api.port) == ("127.0.0.1", 19494)
    assert _ini(path)["oslo_middleware"][
        "enable_proxy_headers_parsing"] == "True"
    with open(os.path.join(devstack.state, "tls-proxy", "gvfs-api")) as f:
        assert f.read().split() == ["gvfs-api", "*", "9494", "127.0.0.1",
                                    "19494"]
    assert devstack.keystone("endpoints", "gvfs", "RegionOne", "public") == [
        "https://192.0.2.10:9494"]
    assert "wait_for_service 60 https://192.0.2.10:9494" in devstack.calls()


def test_api_without_the_conductor_stops_the_stack_before_installing(
        tmp_path):
    devstack = Devstack(tmp_path, DISABLED_SERVICES="gvfs-conductor")
    result = devstack.phase("stack", "pre-install", check=False)
    assert result.returncode != 0
    assert "gvfs-api needs gvfs-conductor" in result.stderr
    assert "disable gvfs-api" in result.stderr


def test_an_api_that_never_answers_stops_the_stack(tmp_path):
    devstack = Devstack(tmp_path, STUB_DOWN_URLS="http://192.0.2.10:9494")
    for phase in ("pre-install", "install", "post-config"):
        devstack.phase("stack", phase)
    result = devstack.phase("stack", "extra", check=False)
    assert result.returncode != 0
    assert "gvfs-api does not answer on http://192.0.2.10:9494" in \
        result.stderr


def test_unstack_undoes_stack_and_clean_removes_the_rest(devstack):
    devstack.stack()
    env = devstack.env
    devstack.phase("unstack")
    # n-cpu is devstack's own service: its unstack.sh stops it.
    assert set(devstack.running()) == {"n-cpu"}
    assert not os.path.exists(os.path.join(devstack.state, "mounted"))
    assert "fusermount3 -u %s" % os.path.join(env["DATA_DIR"], "gvfs-mnt") \
        in devstack.calls()
    devstack.phase("clean")
    for path in (env["GVFS_CONF_DIR"], env["GVFS_DTN_EXPORT"],
                 os.path.join(env["DATA_DIR"], "gvfs"),
                 os.path.join(env["DATA_DIR"], "gvfs-mnt")):
        assert not os.path.exists(path), path
    with open(os.path.join(devstack.home, ".ssh", "authorized_keys")) as f:
        assert f.read() == ""
    with open(env["GVFS_FUSE_CONF"]) as f:
        assert f.read() == "# mount_max = 1000\n"


def test_clean_keeps_an_export_it_did_not_create(tmp_path):
    export = tmp_path / "srv" / "gvfs-images"
    (export / "images").mkdir(parents=True)
    (export / "images" / "golden").write_bytes(b"an operator's image")
    devstack = Devstack(tmp_path, GVFS_DTN_EXPORT=str(export))
    devstack.stack()
    devstack.phase("unstack")
    devstack.phase("clean")
    assert (export / "images" / "golden").read_bytes() == \
        b"an operator's image"


def test_kernel_nfs_server_and_tcp_tunnel(tmp_path):
    devstack = Devstack(tmp_path, GVFS_DTN_NFS_SERVER="kernel",
                        GVFS_TUNNEL="tcp")
    devstack.stack()
    env = devstack.env
    assert "gvfs-nfs" not in devstack.running()
    with open(env["GVFS_KERNEL_EXPORTS"]) as f:
        assert f.read() == (
            "%s 127.0.0.1(rw,sync,insecure,no_subtree_check,all_squash,"
            "anonuid=%d,anongid=%d)\n" % (env["GVFS_DTN_EXPORT"],
                                          os.getuid(), os.getgid()))
    nfs = _ini(env["GVFS_KERNEL_NFS_CONF"])
    assert nfs["mountd"]["port"] == "20048"
    calls = devstack.calls()
    assert "systemctl restart nfs-server" in calls
    assert "exportfs -ra" in calls
    groups = gvfs_opts.list_proxy_opts()
    server = _oslo(devstack.conf_path("gvfs-proxy-server.conf"), groups)
    assert server.listen.host == "192.0.2.10"
    assert server.listen.allowed_peers == ["192.0.2.10/32", "127.0.0.1/32"]
    # Plain TCP off loopback: the proxy starts only where it is said to
    # be a trusted network.
    assert server.listen.trusted_network is True
    client = _oslo(devstack.conf_path("gvfs-proxy-client.conf"), groups)
    assert (client.upstream.tunnel, client.upstream.host) == ("tcp",
                                                              "192.0.2.10")
    assert client.upstream.ssh_key is None
    devstack.phase("unstack")
    assert not os.path.exists(env["GVFS_KERNEL_EXPORTS"])
    assert not os.path.exists(env["GVFS_KERNEL_NFS_CONF"])


def test_compute_only_node_runs_no_dtn(tmp_path):
    devstack = Devstack(
        tmp_path, DISABLED_SERVICES="gvfs-nfs,gvfs-gridftp,gvfs-server,"
                                    "gvfs-conductor,gvfs-api",
        GVFS_DTN_HOST="192.0.2.30")
    devstack.stack()
    assert set(devstack.running()) == {"gvfs-client", "gvfs-mount", "n-cpu"}
    # Neither the job store's libraries nor gvfs-api's.
    assert ("setup_develop %s proxy,fuse" % devstack.env["GVFS_DIR"]
            in devstack.calls())
    assert not os.path.exists(os.path.join(devstack.state, "keystone"))
    assert not os.path.exists(devstack.conf_path("gvfs-api.conf"))
    assert not os.path.exists(devstack.env["GVFS_DTN_EXPORT"])
    client = _oslo(devstack.conf_path("gvfs-proxy-client.conf"),
                   gvfs_opts.list_proxy_opts())
    assert client.upstream.ssh_host == "192.0.2.30"


@pytest.mark.parametrize("setting,value", [
    ("GVFS_DTN_NFS_SERVER", "nfsd"), ("GVFS_TUNNEL", "telnet")])
def test_a_bad_choice_stops_the_stack_with_its_name(tmp_path, setting,
                                                    value):
    devstack = Devstack(tmp_path, **{setting: value})
    result = devstack.phase("stack", "post-config", check=False)
    assert result.returncode != 0
    assert "%s must be" % setting in result.stderr
    assert value in result.stderr


def _settings_variables():
    with open(os.path.join(REPO, "devstack", "settings")) as f:
        return set(re.findall(r"^(GVFS_[A-Z_]+)=", f.read(), re.M))


#: Jobs and project templates of openstack/openstack-zuul-jobs and
#: devstack that ours build on; a name not here would not exist upstream.
UPSTREAM_JOBS = {"devstack-tox-functional", "openstack-tox"}
UPSTREAM_TEMPLATES = {"openstack-python3-jobs", "publish-openstack-docs-pti",
                      "release-notes-jobs-python3"}


def test_zuul_jobs_name_only_what_the_plugin_and_tox_define():
    with open(os.path.join(REPO, ".zuul.yaml")) as f:
        zuul = yaml.safe_load(f)
    jobs = {item["job"]["name"]: item["job"] for item in zuul
            if "job" in item}
    tox = configparser.ConfigParser(interpolation=None)
    tox.read(os.path.join(REPO, "tox.ini"))
    variables = _settings_variables()
    with open(os.path.join(REPO, "devstack", "settings")) as f:
        services = set(re.findall(r"\bgvfs-[a-z]+\b", f.read()))
    for name, job in jobs.items():
        parent = job.get("parent")
        assert parent in jobs or parent in UPSTREAM_JOBS, name
        for playbook in ("pre-run", "run", "post-run"):
            if playbook in job:
                assert os.path.isfile(os.path.join(REPO, job[playbook]))
        job_vars = dict(job.get("vars", {}))
        for group in job.get("group-vars", {}).values():
            job_vars.update(group)
        if "tox_envlist" in job_vars:
            assert tox.has_section("testenv:" + job_vars["tox_envlist"])
        for key in job_vars.get("devstack_localrc", {}):
            if key.startswith("GVFS_"):
                assert key in variables, (name, key)
        for service in job_vars.get("devstack_services", {}):
            if service.startswith("gvfs-"):
                assert service in services, (name, service)
    project = next(item["project"] for item in zuul if "project" in item)
    assert set(project.pop("templates")) <= UPSTREAM_TEMPLATES
    for pipeline in project.values():
        for job in pipeline["jobs"]:
            name = job if isinstance(job, str) else next(iter(job))
            assert name in jobs, name
