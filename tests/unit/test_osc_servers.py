# SPDX-License-Identifier: Apache-2.0
"""What ``openstack gvfs migrate --server`` records, carries and refuses."""

import json

from osc_lib import exceptions as osc_exceptions
import pytest

from gvfs_openstack.osc import servers
from gvfs_openstack.osc.v1 import migration


def _server(**changes):
    """A server as ``GET /servers/{id}`` shows it at 2.47."""
    server = {
        "id": "5c3b2a0e-0000-4000-8000-000000000001", "name": "web-1",
        "status": "ACTIVE", "image": {"id": "golden-id"},
        "flavor": {"original_name": "m1.small", "vcpus": 1, "ram": 512},
        "key_name": "ops", "metadata": {"role": "web", "tier": "1"},
        "addresses": {}, "os-extended-volumes:volumes_attached": []}
    server.update(changes)
    return server


def test_the_record_holds_flavor_key_metadata_and_volumes():
    properties, not_carried = servers.record(_server())
    assert properties == {
        servers.ID: "5c3b2a0e-0000-4000-8000-000000000001",
        servers.NAME: "web-1", servers.FLAVOR: "m1.small",
        servers.KEY_NAME: "ops",
        servers.METADATA: '{"role": "web", "tier": "1"}',
        servers.VOLUMES: "[]"}
    assert not_carried == []
    # Glance property values are strings.
    assert all(isinstance(v, str) for v in properties.values())


def test_what_cannot_be_carried_is_named():
    properties, not_carried = servers.record(_server(
        key_name=None, addresses={
            "private": [{"addr": "10.0.0.5"}, {"addr": "fd00::5"}],
            "admin": [{"addr": "192.168.1.9"}]},
        security_groups=[{"name": "default"}],
        **{"os-extended-volumes:volumes_attached": [
            {"id": "vol-1", "delete_on_termination": False}]}))
    assert servers.KEY_NAME not in properties
    assert json.loads(properties[servers.VOLUMES]) == [{"id": "vol-1"}]
    assert not_carried == ["network admin (192.168.1.9)",
                           "network private (10.0.0.5, fd00::5)",
                           "security group default", "volume vol-1"]


@pytest.mark.parametrize("changes, reason", [
    ({"image": ""}, "boots from a volume"),
    ({"status": "ERROR"}, "is ERROR"),
    ({"status": "BUILD"}, "a snapshot needs it ACTIVE"),
])
def test_a_server_that_cannot_be_snapshotted_is_refused(changes, reason):
    with pytest.raises(osc_exceptions.CommandError, match=reason):
        servers.record(_server(**changes))


def test_the_boot_request_rebuilds_the_server_without_networks():
    image = {"id": "snap-id", servers.NAME: "web-1",
             servers.METADATA: '{"role": "web"}'}
    assert servers.boot_request(image, "flavor-2", "ops") == {"server": {
        "name": "web-1", "imageRef": "snap-id", "flavorRef": "flavor-2",
        "metadata": {"role": "web"}, "networks": "none", "key_name": "ops"}}
    assert "key_name" not in servers.boot_request(image, "f", None)["server"]


def test_flavor_maps_are_pairs():
    assert servers.parse_flavor_map(["m1.small=dr.small", "a=b=c"]) == {
        "m1.small": "dr.small", "a": "b=c"}
    for bad in ("m1.small", "=x", "x="):
        with pytest.raises(osc_exceptions.CommandError, match="SOURCE="):
            servers.parse_flavor_map([bad])


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_waiting_ends_done_failed_or_late():
    clock = _Clock()
    states = iter(["BUILD", "BUILD", "ACTIVE"])

    def wait(fetch, timeout=60):
        return servers.wait_for(fetch, lambda s: s == "ACTIVE",
                                lambda s: s == "ERROR" and "it failed",
                                "server x", timeout, 2.0, clock, clock.sleep)

    assert wait(lambda: next(states)) == "ACTIVE"
    assert clock.now == 4.0
    with pytest.raises(osc_exceptions.CommandError,
                       match="server x: it failed"):
        wait(lambda: "ERROR")
    with pytest.raises(osc_exceptions.CommandError,
                       match="not done after 10 s"):
        wait(lambda: "BUILD", timeout=10)


def _parse(argv):
    return migration.Migrate(None, None).get_parser("openstack").parse_args(
        argv)


def test_migrate_takes_a_server_and_its_boot_options():
    args = _parse(["--server", "web-1", "--to", "west", "--boot",
                   "--flavor-map", "a=b", "--flavor-map", "c=d"])
    assert (args.images, args.server, args.boot, args.flavor_map) == (
        [], "web-1", True, ["a=b", "c=d"])


@pytest.mark.parametrize("argv, message", [
    (["img", "--server", "s", "--to", "west"], "--server takes no images"),
    (["--server", "s", "--base", "b", "--to", "west"], "takes no images"),
    (["--to", "west"], "name the images to migrate, or a --server"),
    (["img", "--to", "west", "--boot"], "go with --server"),
])
def test_migrate_refuses_mixed_or_missing_subjects(argv, message):
    command = migration.Migrate(None, None)
    with pytest.raises(osc_exceptions.CommandError, match=message):
        command.take_action(_parse(argv))


def test_a_snapshot_depends_on_its_kernel_and_ramdisk():
    assert servers.dependencies({"id": "s", "kernel_id": "k",
                                 "ramdisk_id": "r"}) == ["k", "r"]
    assert servers.dependencies({"id": "s", "kernel_id": None}) == []
