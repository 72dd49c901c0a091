# SPDX-License-Identifier: Apache-2.0
"""Replication policies: the decisions (no I/O), the attribute patch that
makes a copy follow its source, and the records in a real sqlite store
that keep two conductors from copying one image twice."""

import datetime
import threading

import pytest

from gvfs_openstack import exceptions
from gvfs_openstack.migration import images_api
from gvfs_openstack.migration import jobs
from gvfs_openstack.replication import plan
from gvfs_openstack.replication import store as store_mod

NOW = datetime.datetime(2026, 11, 24, 12, 0, 0)

POLICY = {"id": "p1", "project_id": "alpha", "selector_kind": "tag",
          "selector": {"tag": "golden"}, "delete_follows": True}


def _image(image_id, owner="alpha", tags=("golden",), **attributes):
    return dict({"id": image_id, "owner": owner, "tags": list(tags),
                 "name": image_id, "disk_format": "raw",
                 "container_format": "bare", "visibility": "private",
                 "status": "active", "os_hash_value": "h-" + image_id},
                **attributes)


def _record(state, **values):
    return dict({"state": state, "changed_at": NOW,
                 "synced_properties": None}, **values)


# --- which images a policy selects -------------------------------------------

def test_a_policy_selects_its_own_projects_images_only():
    assert plan.matches(POLICY, _image("a"))
    assert not plan.matches(POLICY, _image("a", owner="beta"))
    assert not plan.matches(POLICY, _image("a", tags=("other",)))


def test_property_and_image_list_selectors():
    by_property = dict(POLICY, selector_kind="property",
                       selector={"key": "os_distro", "value": "debian"})
    assert plan.matches(by_property, _image("a", os_distro="debian"))
    assert not plan.matches(by_property, _image("a", os_distro="ubuntu"))
    assert not plan.matches(by_property, _image("a"))
    by_id = dict(POLICY, selector_kind="images",
                 selector={"images": ["a", "b"]})
    assert plan.matches(by_id, _image("b", tags=()))
    assert not plan.matches(by_id, _image("c"))


# --- what a round does -------------------------------------------------------

def test_new_and_pending_images_are_copied_once():
    selected = {"a": _image("a"), "b": _image("b"), "c": _image("c")}
    records = {"b": _record(plan.PENDING), "c": _record(plan.COPYING,
                                                        job_id="j")}
    assert plan.plan(POLICY, selected, records, set()) == [
        plan.Copy("a"), plan.Copy("b")]


def test_a_copy_follows_its_sources_properties():
    image = _image("a", os_version="12")
    in_sync = _record(plan.IN_SYNC,
                      synced_properties=plan.properties_digest(image))
    assert plan.plan(POLICY, {"a": image}, {"a": in_sync}, set()) == []
    changed = _image("a", os_version="13")
    assert plan.plan(POLICY, {"a": changed}, {"a": in_sync}, set()) == [
        plan.FollowProperties("a", changed)]


def test_a_deleted_source_deletes_the_copy_only_with_delete_follows():
    records = {"a": _record(plan.IN_SYNC), "b": _record(plan.IN_SYNC)}
    # a was deleted; b only lost its tag.
    assert plan.plan(POLICY, {}, records, {"a"}) == [
        plan.DeleteCopy("a"), plan.Forget("b")]
    keep = dict(POLICY, delete_follows=False)
    assert plan.plan(keep, {}, records, {"a"}) == [
        plan.Forget("a"), plan.Forget("b")]


def test_an_image_being_copied_is_left_to_its_job():
    records = {"a": _record(plan.COPYING, job_id="j")}
    assert plan.plan(POLICY, {}, records, {"a"}) == []


def test_a_failed_image_waits_for_resume():
    records = {"a": _record(plan.FAILED, error="boom")}
    assert plan.plan(POLICY, {"a": _image("a")}, records, set()) == []


def test_the_recovery_point_is_the_oldest_change_not_arrived():
    records = [_record(plan.IN_SYNC, changed_at=NOW - datetime.timedelta(
                   hours=5)),
               _record(plan.COPYING, changed_at=NOW - datetime.timedelta(
                   seconds=90)),
               _record(plan.PENDING, changed_at=NOW - datetime.timedelta(
                   seconds=30))]
    assert plan.recovery_point(records, NOW) == 90.0
    assert plan.recovery_point(records[:1], NOW) == 0.0
    assert plan.recovery_point([], NOW) == 0.0


# --- the copy's attributes ---------------------------------------------------

def test_the_attribute_patch_adds_replaces_and_removes_user_properties():
    source = _image("a", os_version="13", hw_disk_bus="virtio",
                    checksum="x", size=10)
    copy = _image("a", os_version="12", old_note="gone", owner="mapped",
                  checksum="y", size=10)
    assert images_api.attribute_patch(source, copy) == [
        {"op": "add", "path": "/hw_disk_bus", "value": "virtio"},
        {"op": "replace", "path": "/os_version", "value": "13"},
        {"op": "remove", "path": "/old_note"}]
    assert images_api.attribute_patch(source, source) == []


# --- the records in the job store --------------------------------------------

@pytest.fixture
def replications(tmp_path):
    store = jobs.JobStore("sqlite:///%s" % (tmp_path / "jobs.sqlite"))
    yield store_mod.ReplicationStore(store)
    store.dispose()


def test_a_policy_is_made_listed_paused_and_deleted(replications):
    made = replications.create_policy("alpha", "u1", "east", "west",
                                      "tag", {"tag": "golden"}, name="dr")
    other = replications.create_policy("beta", "u2", "east", "west",
                                       "images", {"images": ["x"]})
    policy = replications.policy(made)
    assert (policy["selector"], policy["paused"], policy["name"]) == (
        {"tag": "golden"}, False, "dr")
    assert [p["id"] for p in replications.policies(project_id="alpha")] == \
        [made]
    assert [p["id"] for p in replications.policies()] == [made, other]
    assert replications.policies(source="west") == []
    assert policy["source"] == "east"
    replications.set_paused(made, True)
    assert [p["id"] for p in replications.policies(paused=False)] == [other]
    replications.delete_policy(made)
    with pytest.raises(exceptions.ReplicationNotFound):
        replications.policy(made)
    with pytest.raises(exceptions.ReplicationNotFound):
        replications.delete_policy(made)


def test_of_two_conductors_one_records_and_one_claims(replications, tmp_path):
    """Two engines on one store, as two conductors on two hosts."""
    other_store = jobs.JobStore("sqlite:///%s" % (tmp_path / "jobs.sqlite"))
    other = store_mod.ReplicationStore(other_store)
    try:
        policy = replications.create_policy("alpha", "u1", "east", "west",
                                            "tag", {"tag": "golden"})
        for n in range(10):
            image = _image("i%d" % n)
            barrier = threading.Barrier(2)
            results = {}

            def one(name, store):
                barrier.wait()
                added = store.add(policy, image, NOW)
                results[name] = (added, store.claim(policy, image["id"]))

            threads = [threading.Thread(target=one, args=(name, store))
                       for name, store in (("a", replications),
                                           ("b", other))]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert sorted(added for added, _ in results.values()) == \
                [False, True]
            assert sorted(won for _, won in results.values()) == \
                [False, True]
    finally:
        other_store.dispose()


def test_resuming_tries_the_failed_images_again(replications):
    policy = replications.create_policy("alpha", "u1", "east", "west",
                                        "tag", {"tag": "golden"})
    replications.add(policy, _image("a"), NOW)
    assert replications.claim(policy, "a")
    replications.update(policy, "a", state=plan.FAILED, error="boom")
    replications.set_paused(policy, True)
    replications.set_paused(policy, False)
    record = replications.records(policy)["a"]
    assert (record["state"], record["error"]) == (plan.PENDING, None)


def test_a_record_carries_what_its_job_sent(replications, tmp_path):
    """What bytes_moved sums: a delta counts its own bytes, not the image's."""
    jobs_store = jobs.JobStore("sqlite:///%s" % (tmp_path / "jobs.sqlite"))
    try:
        policy = replications.create_policy("alpha", "u1", "east", "west",
                                            "tag", {"tag": "golden"})
        for image_id in ("sent", "waiting"):
            replications.add(policy, _image(image_id, size=1000), NOW)
            job_id = jobs_store.create_job("east", "west",
                                           [_image(image_id, size=1000)], 1)
            replications.update(policy, image_id, job_id=job_id)
            if image_id == "sent":
                jobs_store.set_image(job_id, 0, sent_bytes=31)
        records = replications.records(policy)
        assert records["sent"]["sent_bytes"] == 31
        assert records["waiting"]["sent_bytes"] is None
    finally:
        jobs_store.dispose()
