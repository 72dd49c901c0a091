# SPDX-License-Identifier: Apache-2.0
"""Job changes announced once each, whichever conductor sees them, through
oslo.messaging's in-process ``test`` notification driver (the real bus is
in tests/functional/test_gvfs_api.py)."""

from oslo_config import cfg
from oslo_config import fixture as config_fixture
import oslo_messaging as messaging
from oslo_messaging.notify import _impl_test
import pytest

from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import manager as manager_mod
from gvfs_openstack.migration import notifications
from gvfs_openstack.migration import states

IMAGE = {"id": "i0", "name": "golden", "size": 1, "os_hash_algo": "sha512",
         "os_hash_value": "h"}


@pytest.fixture
def conductors(tmp_path):
    """Two conductors' notifiers on one job store."""
    fixture = config_fixture.Config(cfg.CONF)
    fixture.setUp()
    migration_conf.register_opts(cfg.CONF)
    transport = messaging.get_notification_transport(cfg.CONF,
                                                     url="fake://")
    fixture.config(group="oslo_messaging_notifications", driver=["test"])
    store = jobs.JobStore("sqlite:///%s" % (tmp_path / "jobs.sqlite"))
    _impl_test.reset()
    made = []
    for host in ("conductor-a", "conductor-b"):
        fixture.config(group="conductor", host=host)
        made.append(notifications.JobNotifier(
            cfg.CONF, store, manager_mod._job_view, transport=transport))
    yield store, made
    store.dispose()
    transport.cleanup()
    fixture.cleanUp()


def _messages():
    return [message for _, message, _, _ in _impl_test.NOTIFICATIONS]


def _sent():
    return [(ctxt.project_id, m["event_type"], m["priority"],
             m["payload"]["state"])
            for ctxt, m, _, _ in _impl_test.NOTIFICATIONS]


def test_a_job_is_announced_when_it_starts_and_when_it_ends(conductors):
    store, (a, b) = conductors
    job_id = store.create_job("east", "west", [IMAGE], 1, project_id="p1",
                              user_id="u1")
    a.announce()
    b.announce()
    assert _sent() == [("p1", notifications.START, "INFO", states.QUEUED)]
    [start] = _messages()
    assert start["publisher_id"] == "gvfs-conductor.conductor-a"
    assert [i["image_id"] for i in start["payload"]["images"]] == ["i0"]
    assert "owner" not in start["payload"]     # The runner's lease.
    store.set_job(job_id, state=states.RUNNING)
    a.announce()
    assert len(_sent()) == 1                   # Running is no news.
    store.set_job(job_id, state=states.DONE)
    b.announce()
    a.announce()
    assert _sent()[1:] == [("p1", notifications.END, "INFO", states.DONE)]


def test_a_failed_job_is_an_error_and_a_job_seen_only_ended_is_too(
        conductors):
    store, (a, _) = conductors
    failed = store.create_job("east", "west", [IMAGE], 1)
    store.set_job(failed, state=states.FAILED, error="checksum")
    a.announce()   # Never announced started: only its end is news now.
    assert _sent() == [(None, notifications.ERROR, "ERROR", states.FAILED)]
    assert _messages()[0]["payload"]["error"] == "checksum"
    a.announce()
    assert len(_sent()) == 1


def test_without_a_driver_changes_are_marked_and_nothing_is_sent(
        conductors):
    store, _ = conductors
    cfg.CONF.set_override("driver", [], "oslo_messaging_notifications")
    silent = notifications.JobNotifier(
        cfg.CONF, store, manager_mod._job_view,
        transport=messaging.get_notification_transport(cfg.CONF,
                                                       url="fake://"))
    job_id = store.create_job("east", "west", [IMAGE], 1)
    silent.announce()
    assert _sent() == []
    assert store.job(job_id)["notified"] == jobs.NOTIFIED_START
