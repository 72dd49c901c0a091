# SPDX-License-Identifier: Apache-2.0
"""``openstack gvfs migrate --server``: a running server to the other site.

The DR lab's two sites each get a real Nova (their own libvirtd, stock
nova-compute and services, PostgreSQL and RabbitMQ, in the site's
region of the one Keystone), and east runs gvfs-api and the conductor.
A member of project alpha boots the lab's test guest at east, then
migrates the running server to west with ``--boot``, through the real
``openstack`` CLI with its own credentials: the snapshot, its kernel
and ramdisk, the record of the server and a server at west that boots
the guest and prints its marker.
"""

import concurrent.futures
import json
import os
import time

import pytest

from gvfs_lab import bootset
from gvfs_lab import drlab
from gvfs_lab import guest
from gvfs_lab import gvfs_api
from gvfs_lab import libvirt
from gvfs_lab import nova as nova_lab
from gvfs_lab import postgres
from gvfs_lab import process
from gvfs_lab import rabbitmq
from gvfs_openstack.osc import servers

USER = "alpha-member"
FLAVOR = "dr.tiny"
KEY = "dr-key"
MARKER_TIMEOUT = 600.0


class _Site:
    """One site's Nova and what it alone needs (stopped by PID)."""

    def __init__(self, workdir, site, keystone):
        self.parts = []
        try:
            hv = libvirt.Libvirt(os.path.join(workdir, "libvirt"),
                                 hostname="compute-" + site.name)
            self.parts.append(hv)
            db = postgres.PostgreSQL(os.path.join(workdir, "postgres"))
            self.parts.append(db)
            self.broker = rabbitmq.RabbitMQ(os.path.join(workdir,
                                                         "rabbitmq"))
            self.parts.append(self.broker)
            # The site's export as its Glance sees it: no mount.
            self.nova = nova_lab.Nova(
                os.path.join(workdir, "nova"), keystone, site.glance,
                self.broker, db, hv, {
                    "mount_type": "none", "image_dir": site.images,
                    "glance_stores": [drlab.GVFS_STORE]})
            self.parts.append(self.nova)
            self.nova.cli("flavor", "create", "--ram", "256", "--disk",
                          "1", "--vcpus", "1", "--public", FLAVOR,
                          user="admin")
        except BaseException:
            self.stop()
            raise

    def stop(self):
        for part in reversed(self.parts):
            part.stop()
        self.parts = []


@pytest.fixture(scope="module")
def sites(nova_parts, dr, keystone, tmp_path_factory):
    """East's and west's Nova, started side by side, stopped so too.

    Each is minutes of imports, schema and waits for its services on a
    slow machine; neither needs anything of the other.
    """
    workdirs = [str(tmp_path_factory.mktemp("nova-" + site.name))
                for site in (dr.east, dr.west)]
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        starting = [pool.submit(_Site, workdir, site, keystone)
                    for workdir, site in zip(workdirs, (dr.east, dr.west))]
        concurrent.futures.wait(starting)
        started = [f.result() for f in starting if f.exception() is None]
        try:
            for f in starting:
                f.result()
            yield started
        finally:
            list(pool.map(_Site.stop, started))


@pytest.fixture(scope="module")
def api(dr, keystone, sites, tmp_path_factory):
    """gvfs-conductor and gvfs-api of east, on east's broker."""
    with gvfs_api.conductor_and_api(
            dr, keystone, sites[0].broker.url,
            str(tmp_path_factory.mktemp("gvfs-api"))) as service:
        yield service


@pytest.fixture(scope="module")
def golden():
    return guest.golden(spec=guest.FUNCTIONAL)


@pytest.fixture(scope="module")
def running(sites, golden, tmp_path_factory):
    """A server of alpha at east, booted from the guest, with a record."""
    east = sites[0].nova
    uploaded = east.upload_guest(golden, "dr-guest")
    east.cli("keypair", "create", "--private-key", str(
        tmp_path_factory.mktemp("key") / "id"), KEY)
    server = east.cli("--os-compute-api-version", "2.37", "server",
                      "create", "--image", uploaded["disk"], "--flavor",
                      FLAVOR, "--nic", "none", "--key-name", KEY,
                      "--property", "role=web", "--property", "tier=1",
                      "--wait", "dr-web-1", timeout=900)
    _marker(east, server["id"])
    return dict(uploaded, server=server)


def _marker(cloud, server_id):
    found = [None]

    def marked():
        found[0] = bootset.find_marker(cloud.console_log(server_id))
        return found[0] is not None

    process.wait_until(marked, "the guest's marker in its console log",
                       MARKER_TIMEOUT, interval=2.0)
    return found[0]


@pytest.fixture(scope="module")
def migration():
    """The migration's result, once the first test made it."""
    return {}


def _migrated(api, migration):
    """``migrate --server --boot``, made by the first test that asks.

    It is what these tests check, not what they stand on: made in a
    test's call, not in a fixture's setup, it is timed as the test.
    """
    if "result" not in migration:
        started = time.monotonic()
        result = api.openstack(USER, "gvfs", "migrate", "--server",
                               "dr-web-1", "--to", "west", "--boot",
                               "--poll-interval", "1", "-f", "json",
                               timeout=1800)
        assert result.returncode == 0, result.stderr[-3000:]
        print("\nmigrate --server --boot: %.1f s"
              % (time.monotonic() - started))
        migration["result"] = json.loads(result.stdout)
    return migration["result"]


def test_the_server_boots_at_the_destination(api, migration, running,
                                             sites, golden):
    migrated = _migrated(api, migration)
    assert migrated["server"] == running["server"]["id"]
    assert migrated["state"] == "done"
    assert migrated["destination"] == "west"
    west = sites[1].nova
    booted = west.cli("server", "show", migrated["destination_server"])
    assert booted["status"] == "ACTIVE"
    assert booted["name"] == "dr-web-1"
    # The CLI shows the flavor by name (a dict from 2.47 on) and the
    # image as "name (id)" or a dict.
    assert FLAVOR in json.dumps(booted["flavor"])
    assert migrated["snapshot"] in json.dumps(booted["image"])
    assert booted["properties"] == {"role": "web", "tier": "1"}
    marker = _marker(west, booted["id"])
    assert marker.digest == golden.expected_digest


def test_the_snapshot_arrives_whole_with_the_servers_record(
        api, migration, running, dr):
    migrated = _migrated(api, migration)
    image_id = migrated["snapshot"]
    here, there = dr.east.glance.image(image_id), dr.west.glance.image(
        image_id)
    assert there["status"] == "active"
    assert there["os_hash_value"] == here["os_hash_value"]
    assert there[servers.FLAVOR] == FLAVOR
    assert there[servers.KEY_NAME] == KEY
    assert there[servers.ID] == running["server"]["id"]
    assert json.loads(there[servers.METADATA]) == {"role": "web",
                                                   "tier": "1"}
    assert json.loads(there[servers.VOLUMES]) == []
    # Its kernel and ramdisk went with it, under their own ids.
    for dependency in ("kernel", "ramdisk"):
        assert there["%s_id" % dependency] == running[dependency]
        assert dr.west.glance.image(running[dependency])["status"] == \
            "active"


def test_what_was_not_carried_is_reported(api, migration, running):
    migrated = _migrated(api, migration)
    # West has no key pair of that name: the server there has none.
    assert migrated["not_carried"] == [
        "key pair %s (site west has none of that name)" % KEY]


def test_a_server_is_refused_before_anything_is_made(api, running, sites):
    east = sites[0].nova
    before = {i["ID"] for i in east.cli("image", "list")}
    refused = api.openstack(USER, "gvfs", "migrate", "--server", "dr-web-1",
                            "--to", "west", "--boot", "--flavor-map",
                            "%s=no-such-flavor" % FLAVOR)
    assert refused.returncode != 0
    assert "site west has no flavor no-such-flavor" in refused.stderr
    missing = api.openstack(USER, "gvfs", "migrate", "--server", "nobody",
                            "--to", "west")
    assert missing.returncode != 0
    assert "no server nobody" in missing.stderr
    assert {i["ID"] for i in east.cli("image", "list")} == before
