# SPDX-License-Identifier: Apache-2.0
"""What the conductor's Images API client puts into a URL path.

A user names the images to migrate; a name that is a path (``../..``)
must not reach another API on Glance's host with the conductor's token.
The functional suite performs the attack through gvfs-api against a real
Glance (``tests/functional/test_gvfs_api.py``).
"""

import types

from keystoneauth1 import session
import pytest

from gvfs_openstack import exceptions
from gvfs_openstack.migration import images_api as glance_api

IMAGE = "0f4a8c2e-7d3b-4e8a-9c6f-0b1d2e3f4a5b"


def test_paths_of_an_image_and_its_members():
    assert glance_api.images_path(IMAGE) == "/v2/images/" + IMAGE
    assert glance_api.images_path(IMAGE, "members", "p/q?r#s%") == \
        "/v2/images/%s/members/p%%2Fq%%3Fr%%23s%%25" % IMAGE


@pytest.mark.parametrize("image_id", [
    "../../v3/users", "..", ".", "", IMAGE + "/..", IMAGE + "/file",
    IMAGE.upper() + "x", "%2e%2e", None, 7])
def test_only_an_image_id_is_a_path_to_an_image(image_id):
    with pytest.raises(ValueError):
        glance_api.images_path(image_id)


@pytest.mark.parametrize("segment", ["..", ".", "", None])
def test_a_member_segment_is_never_a_dot_segment(segment):
    with pytest.raises(ValueError):
        glance_api.images_path(IMAGE, "members", segment)


def _client():
    # An endpoint nothing listens on: a request would fail as transient.
    site = types.SimpleNamespace(
        name="east", glance_endpoint="http://127.0.0.1:9",
        glance_interface="public", glance_region=None)
    return glance_api.GlanceClient(session.Session(), site)


def test_a_name_is_never_asked_for_as_an_id():
    with pytest.raises(exceptions.ImageNotFound) as raised:
        _client().image("../../v3/users")
    assert "../../v3/users" in str(raised.value)


@pytest.mark.parametrize("call", [
    lambda client: client.patch("../../v3/users", []),
    lambda client: list(client.data("..")),
    lambda client: client.share(IMAGE + "/..", "project", "accepted"),
    lambda client: client.share(IMAGE, "..", "accepted"),
    lambda client: client.delete("../../v3/users/x"),
])
def test_calls_on_something_not_an_id_fail_before_any_request(call):
    # Final, not the transient failure of asking the closed port.
    with pytest.raises(exceptions.StageFailed) as raised:
        call(_client())
    assert not raised.value.transient
    assert "not " in str(raised.value)
