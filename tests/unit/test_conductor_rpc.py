# SPDX-License-Identifier: Apache-2.0
"""The conductor's RPC API over oslo.messaging's in-process fake driver:
calls reach the manager, the user's errors come back as themselves, and
Glance's notifications wake the replication round."""

import threading
import time

from oslo_config import cfg
from oslo_context import context
import oslo_messaging as messaging
import pytest

from gvfs_openstack.conductor import callers
from gvfs_openstack.conductor import service
from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration import manager as manager_mod
from gvfs_openstack.migration import rpcapi
from gvfs_openstack.migration import states
from gvfs_openstack.replication import listener
from gvfs_openstack.replication import manager as replication_manager

#: A caller of every project's objects.
ADMIN = {"project_id": "p0", "user_id": "u0", "roles": ["admin"]}


@pytest.fixture
def conductor(tmp_path):
    conf = cfg.CONF
    migration_conf.register_opts(conf)
    # No Keystone here: calls without a trust (gvfs-api's trusts off),
    # callers as their contexts name them; the trust and token checks
    # themselves are tests/functional/test_gvfs_api.py's.
    overrides = {"sites": ["east", "west"], "local_site": "east",
                 "host": "conductor-1", "lease_seconds": 3,
                 "require_trust": False, "verify_callers": False}
    for name, value in overrides.items():
        conf.set_override(name, value, "conductor")
    conf.set_override("connection", "sqlite:///%s" % (
        tmp_path / "jobs.sqlite"), "database")
    conf.set_override("glance_notifications", False, "replication")
    migration_conf.register_sites(conf)
    manager = manager_mod.ConductorManager(conf, config_args=[])
    transport = rpcapi.get_transport(conf, url="fake://")
    conductor = service.ConductorService(conf, manager, transport)
    conductor.start()
    yield manager, rpcapi.ConductorAPI(transport, timeout=10)
    conductor.stop()
    transport.cleanup()
    for name in overrides:
        conf.clear_override(name, "conductor")
    conf.clear_override("glance_notifications", "replication")


def test_calls_reach_the_manager(conductor):
    manager, api = conductor
    ctxt = ADMIN
    assert api.list_jobs(ctxt) == []
    job_id = manager.store.create_job("east", "west", [{
        "id": "i0", "name": "n", "size": 1, "os_hash_algo": "sha512",
        "os_hash_value": "h"}], 1)
    [listed] = api.list_jobs(ctxt)
    assert listed["id"] == job_id and listed["state"] == states.QUEUED
    shown = api.show_job(ctxt, job_id)
    assert [i["image_id"] for i in shown["images"]] == ["i0"]
    assert isinstance(shown["created_at"], str)


def test_user_errors_cross_rpc_as_themselves(conductor):
    manager, api = conductor
    with pytest.raises(exceptions.JobNotFound, match="No migration job x"):
        api.show_job({}, "x")
    with pytest.raises(exceptions.UnknownSite,
                       match="Unknown site north.*east, west"):
        api.migrate({}, ["image"], "north")
    with pytest.raises(exceptions.ImageNotMigratable,
                       match="no image was named"):
        api.migrate({}, [], "west")
    with pytest.raises(exceptions.InvalidConfig,
                       match="'zip' is not one of: tar"):
        api.migrate({}, ["image"], "west", pack="zip")
    job_id = manager.store.create_job("east", "west", [], 1)
    manager.store.set_job(job_id, state=states.DONE)
    with pytest.raises(exceptions.JobFinished, match="is done already"):
        api.cancel_job({}, job_id)


def test_a_migration_without_a_trust_is_refused_where_one_is_required(
        conductor):
    manager, api = conductor
    cfg.CONF.set_override("require_trust", True, "conductor")
    try:
        with pytest.raises(exceptions.TrustRefused,
                           match="carries none"):
            api.migrate({"project_id": "p1", "user_id": "u1"}, ["image"],
                        "west")
    finally:
        cfg.CONF.set_override("require_trust", False, "conductor")
    assert manager.store.jobs() == []


def test_jobs_are_listed_by_project_in_pages(conductor):
    manager, api = conductor
    made = [manager.store.create_job("east", "west", [], 1,
                                     project_id=project)
            for project in ("p1", "p2", "p1", "p1")]
    mine = [job["id"] for job in api.list_jobs(ADMIN, project_id="p1")]
    assert mine == [made[0], made[2], made[3]]
    page = api.list_jobs(ADMIN, project_id="p1", limit=1, marker=made[0])
    assert [job["id"] for job in page] == [made[2]]
    assert [job["id"] for job in api.list_jobs(ADMIN,
                                               states=["done"])] == []
    with pytest.raises(exceptions.JobNotFound):
        api.list_jobs(ADMIN, marker="nope")


def test_calls_are_held_to_the_callers_project(conductor):
    """Another project's job is missing to a caller; listing it refused.

    The callers' tokens as Keystone would answer for them (its real
    answers: tests/functional/test_gvfs_api.py).
    """
    manager, trusting = conductor
    later = time.time() + 3600
    tokens = {"tok-%s" % name: (callers.Caller(user, project,
                                               frozenset({role})), later)
              for name, user, project, role in (
                  ("alpha", "u1", "p1", "member"),
                  ("beta", "u2", "p2", "member"),
                  ("admin", "u0", "p0", "admin"))}

    def validate(token):
        if token not in tokens:
            raise exceptions.CallerRefused(reason="its token is not valid")
        return tokens[token]

    alpha = {"project_id": "p1", "user_id": "u1", "auth_token": "tok-alpha"}
    beta = {"project_id": "p2", "user_id": "u2", "auth_token": "tok-beta",
            "roles": ["admin"]}     # Claimed, not in the token.
    admin = {"project_id": "p0", "user_id": "u0", "auth_token": "tok-admin"}
    transport = rpcapi.get_transport(cfg.CONF, url="fake://")
    server = messaging.get_rpc_server(
        transport, messaging.Target(topic="checked", server="c"),
        [service.ConductorEndpoint(
            manager, replication_manager.ReplicationManager(manager.conf,
                                                            manager),
            callers.Callers(validate))])
    server.start()
    try:
        api = rpcapi.ConductorAPI(transport, timeout=10)
        api.client = api.client.prepare(topic="checked")
        job_id = manager.store.create_job("east", "west", [], 1,
                                          project_id="p1")
        assert api.show_job(alpha, job_id)["id"] == job_id
        for call in (api.show_job, api.cancel_job):
            with pytest.raises(exceptions.JobNotFound):
                call(beta, job_id)
        for project_id in (None, "p1"):
            for listing in (api.list_jobs, api.list_replications):
                with pytest.raises(exceptions.CallerRefused,
                                   match="admin role"):
                    listing(beta, project_id=project_id)
        assert api.list_jobs(beta, project_id="p2") == []
        with pytest.raises(exceptions.CallerRefused, match="another"):
            api.show_job(dict(beta, project_id="p1"), job_id)
        assert manager.store.job(job_id)["cancel_requested"] is False
        assert [j["id"] for j in api.list_jobs(admin)] == [job_id]
        assert api.cancel_job(admin, job_id)["id"] == job_id
    finally:
        server.stop()
        server.wait()
        transport.cleanup()
    # A conductor that trusts its bus reaches every project, as before.
    assert trusting.show_job(beta, job_id)["id"] == job_id


def test_sites_say_which_are_destinations(conductor):
    manager, api = conductor
    conf = manager.conf
    for site in ("east", "west"):
        conf.set_override("glance_region", site.upper(), "site:" + site)
    try:
        assert api.list_sites({}) == [
            {"name": "east", "local": True, "destination": False,
             "glance_region": "EAST"},
            {"name": "west", "local": False, "destination": True,
             "glance_region": "WEST"}]
    finally:
        for site in ("east", "west"):
            conf.clear_override("glance_region", "site:" + site)


def test_a_glance_notification_starts_a_round_at_once(tmp_path, monkeypatch):
    """The interval is long; Glance's notification wakes the round."""
    conf = cfg.ConfigOpts()
    migration_conf.register_opts(conf)
    conf([], project="gvfs")
    for name, value in {"sites": ["east", "west"], "local_site": "east",
                        "host": "conductor-1",
                        "verify_callers": False}.items():
        conf.set_override(name, value, "conductor")
    conf.set_override("connection", "sqlite:///%s" % (
        tmp_path / "jobs.sqlite"), "database")
    conf.set_override("interval", 600, "replication")
    migration_conf.register_sites(conf)
    bus = messaging.get_notification_transport(conf, url="fake://")
    # The listener's transport and the notifier's: one fake bus.
    monkeypatch.setattr(listener.messaging, "get_notification_transport",
                        lambda conf, url=None: bus)
    transport = rpcapi.get_transport(conf, url="fake://")
    conductor = service.ConductorService(
        conf, manager_mod.ConductorManager(conf, config_args=[]), transport)
    rounds = threading.Event()
    conductor.replications.reconcile = rounds.set
    conductor.start()
    try:
        glance = messaging.Notifier(bus, publisher_id="image.localhost",
                                    driver="messaging",
                                    topics=["notifications"])
        glance.info({}, "compute.instance.create.end", {"id": "vm"})
        assert not rounds.wait(1.0)
        glance.info({}, "image.activate", {"id": "i1"})
        assert rounds.wait(10.0)
    finally:
        conductor.stop()
        transport.cleanup()
        bus.cleanup()


def test_verifying_callers_needs_keystone_credentials(tmp_path):
    conf = cfg.ConfigOpts()
    migration_conf.register_opts(conf)
    conf([], project="gvfs")
    for name, value in {"sites": ["east", "west"], "local_site": "east",
                        "host": "conductor-1"}.items():
        conf.set_override(name, value, "conductor")
    conf.set_override("connection", "sqlite:///%s" % (
        tmp_path / "jobs.sqlite"), "database")
    migration_conf.register_sites(conf)
    transport = rpcapi.get_transport(conf, url="fake://")
    try:
        with pytest.raises(exceptions.InvalidConfig,
                           match=r"verify_callers.*\[site:east\] has no "
                                 "Keystone credentials"):
            service.ConductorService(
                conf, manager_mod.ConductorManager(conf, config_args=[]),
                transport)
    finally:
        transport.cleanup()


def test_the_callers_user_is_read_from_its_request_context():
    """As a real bus delivers gvfs-api's: a RequestContext's dict."""
    ctxt = context.RequestContext(user_id="u1", project_id="p1").to_dict()
    assert callers._user(ctxt) == "u1"
    assert callers._user({"user_id": "u2"}) == "u2"
    assert callers._user({}) is None


# --- rolling upgrades --------------------------------------------------------

def _sent(monkeypatch):
    """The (method, version) of every call the clients prepare."""
    sent = []
    real = messaging.RPCClient.prepare

    def prepare(self, **kwargs):
        prepared = real(self, **kwargs)
        call = prepared.call

        def recorded(ctxt, method, **args):
            sent.append((method, kwargs.get("version"), sorted(args)))
            return call(ctxt, method, **args)
        prepared.call = recorded
        return prepared
    monkeypatch.setattr(messaging.RPCClient, "prepare", prepare)
    return sent


def test_each_call_is_sent_with_the_oldest_version_that_carries_it(
        conductor, monkeypatch):
    manager, api = conductor
    sent = _sent(monkeypatch)
    api.list_jobs(ADMIN)
    api.list_jobs(ADMIN, project_id="p1")
    api.list_replications(ADMIN, project_id="p1")
    with pytest.raises(exceptions.UnknownSite):
        api.migrate({}, ["image"], "north")
    with pytest.raises(exceptions.UnknownSite):
        api.migrate({}, ["image"], "north", pack="tar")
    with pytest.raises(exceptions.UnknownSite):
        api.migrate({}, ["image"], "north", base="v1")
    assert sent == [
        ("list_jobs", "1.0", []),
        ("list_jobs", "1.2", ["project_id"]),
        ("list_replications", "1.3", ["project_id"]),
        ("migrate", "1.0", ["destination", "image_ids",
                            "images_in_flight"]),
        ("migrate", "1.1", ["destination", "image_ids", "images_in_flight",
                            "pack"]),
        ("migrate", "1.4", ["base", "destination", "image_ids",
                            "images_in_flight"])]


def test_a_capped_caller_refuses_what_the_cap_cannot_carry(conductor):
    """Nothing that needs a newer version reaches the conductor."""
    manager, _ = conductor
    transport = rpcapi.get_transport(cfg.CONF, url="fake://")
    capped = rpcapi.ConductorAPI(transport, timeout=10, version_cap="1.1")
    ctxt = {"project_id": "p1", "user_id": "u1"}
    assert capped.list_jobs(ADMIN) == []
    with pytest.raises(exceptions.ConductorTooOld, match=(
            r"^A migration against a named base needs gvfs-conductor RPC "
            r"1\.4; gvfs-api sends at most 1\.1 \(\[upgrade_levels\] "
            r"conductor\) while conductors are upgraded$")):
        capped.migrate(ctxt, ["image"], "west", trust_id="t", base="v1")
    with pytest.raises(exceptions.ConductorTooOld,
                       match="^A replication policy needs .* RPC 1.3;"):
        capped.create_replication(ctxt, "west", "tag", {"tag": "t"})
    with pytest.raises(exceptions.ConductorTooOld,
                       match="^Listing jobs needs .* RPC 1.2;"):
        capped.list_jobs(ctxt, project_id="p1")
    assert manager.store.jobs() == []


def test_a_conductor_of_the_previous_release_serves_a_capped_caller(
        conductor):
    """Why the cap: a 1.3 conductor rejects a 1.4 call it is sent."""
    manager, _ = conductor
    transport = rpcapi.get_transport(cfg.CONF, url="fake://")

    class PreviousRelease(service.ConductorEndpoint):
        target = messaging.Target(version="1.3")

    server = messaging.get_rpc_server(
        transport, messaging.Target(topic="previous", server="old"),
        [PreviousRelease(manager, None, callers.Trusting())])
    server.start()
    try:
        def client(cap):
            api = rpcapi.ConductorAPI(transport, timeout=10,
                                      version_cap=cap)
            api.client = api.client.prepare(topic="previous")
            return api
        ctxt = {"project_id": "p1", "user_id": "u1"}
        with pytest.raises(messaging.UnsupportedVersion):
            client(None).migrate(ctxt, ["image"], "north", base="v1")
        capped = client("1.3")
        with pytest.raises(exceptions.UnknownSite):
            capped.migrate(ctxt, ["image"], "north", trust_id=None)
        assert capped.list_jobs(ctxt, project_id="p1") == []
        with pytest.raises(exceptions.ConductorTooOld):
            capped.migrate(ctxt, ["image"], "north", base="v1")
    finally:
        server.stop()
        server.wait()
        transport.cleanup()
