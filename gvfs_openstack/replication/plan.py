# SPDX-License-Identifier: Apache-2.0
"""What a replication policy asks for, given what the source shows and
what was done: pure decisions, so that every case is a unit test.

A policy selects images of its project by a tag, a property or a list of
ids.  Glance's images do not change their bytes: a new version is a new
image, so an image is copied once, and after that only its properties
and its deletion can follow.  Each image the policy has seen has a record
(:mod:`gvfs_openstack.migration.jobs` ``REPLICATED_IMAGES``) whose
``state`` says where it is:

* ``pending`` -- seen, no job yet;
* ``copying`` -- a migration job is moving it (``job_id``);
* ``in_sync`` -- the destination has it, with the properties of
  ``synced_properties``;
* ``failed`` -- its job failed (``error``); tried again when the policy
  is resumed.
"""

import dataclasses
import hashlib
import json

from gvfs_openstack.migration import images_api

PENDING = "pending"
COPYING = "copying"
IN_SYNC = "in_sync"
FAILED = "failed"
STATES = (PENDING, COPYING, IN_SYNC, FAILED)

#: How a policy selects images.
SELECTORS = ("tag", "property", "images")


def matches(policy, image):
    """Whether ``image`` (as the Images API shows it) is the policy's."""
    if image.get("owner") != policy["project_id"]:
        return False
    selector = policy["selector"]
    if policy["selector_kind"] == "tag":
        return selector["tag"] in (image.get("tags") or ())
    if policy["selector_kind"] == "property":
        return str(image.get(selector["key"])) == selector["value"] \
            if selector["key"] in image else False
    return image["id"] in selector["images"]


def properties_digest(image):
    """A digest of what a copy keeps of ``image``'s attributes.

    A change of it at the source (a property set or removed) is what the
    copy must follow.
    """
    return hashlib.sha256(json.dumps(
        images_api.copied_attributes(image), sort_keys=True,
        default=str).encode()).hexdigest()


@dataclasses.dataclass(frozen=True)
class Copy:
    """Start a migration job for the image."""
    image_id: str


@dataclasses.dataclass(frozen=True)
class FollowProperties:
    """Set the copy's attributes to the source's (``image``)."""
    image_id: str
    image: dict = dataclasses.field(compare=False, hash=False)


@dataclasses.dataclass(frozen=True)
class DeleteCopy:
    """The source image was deleted: delete the copy (``delete_follows``)."""
    image_id: str


@dataclasses.dataclass(frozen=True)
class Forget:
    """Drop the record: the image left the policy, the copy stays."""
    image_id: str


def plan(policy, selected, records, gone):
    """The actions that bring the destination to the policy's selection.

    ``selected``: the active images the policy selects now, by id (as the
    Images API shows them); ``records``: the policy's records, by image
    id; ``gone``: ids of recorded images that the source no longer has
    (deleted), as opposed to images that only stopped matching.
    """
    actions = []
    for image_id, image in sorted(selected.items()):
        record = records.get(image_id)
        if record is None or record["state"] == PENDING:
            actions.append(Copy(image_id))
        elif record["state"] == IN_SYNC and record.get(
                "synced_properties") != properties_digest(image):
            actions.append(FollowProperties(image_id, image))
    for image_id, record in sorted(records.items()):
        if image_id in selected or record["state"] == COPYING:
            continue
        if image_id in gone and policy["delete_follows"] and \
                record["state"] == IN_SYNC:
            actions.append(DeleteCopy(image_id))
        else:
            actions.append(Forget(image_id))
    return actions


def recovery_point(records, now):
    """Seconds since the oldest change not yet at the destination.

    A change is an image that became active (``changed_at``) or whose
    properties changed; 0 when every one arrived.
    """
    waiting = [record["changed_at"] for record in records
               if record["state"] != IN_SYNC]
    if not waiting:
        return 0.0
    return max(0.0, (now - min(waiting)).total_seconds())
