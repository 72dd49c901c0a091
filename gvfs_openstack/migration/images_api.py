# SPDX-License-Identifier: Apache-2.0
"""The few Images API v2 calls a migration makes, over a keystoneauth session.

Glance's own client would do, but the conductor needs exactly these calls,
streamed, with their statuses mapped to this project's errors.  The
session logs in with the site's credentials, renews the token and finds
the Images API in the site's catalog; a login Keystone refuses or a
catalog without the Images API is a clear, final error, an unreachable
server a transient one.
"""

import itertools
import json
import re
import urllib.parse

from keystoneauth1 import adapter
from keystoneauth1 import exceptions as ks_exceptions
import tenacity

from gvfs_openstack import exceptions

CHUNK = 1024 * 1024

#: The media type of the Images API's PATCH.
JSON_PATCH = "application/openstack-images-v2.1-json-patch"

#: Image attributes Glance sets itself or that belong to one cloud only.
_NOT_COPIED = frozenset((
    "id", "status", "checksum", "os_hash_algo", "os_hash_value", "size",
    "virtual_size", "created_at", "updated_at", "file", "schema", "self",
    "direct_url", "locations", "stores", "owner", "os_glance_failed_import",
    "os_glance_importing_to_stores",
))


#: What Glance's image schema allows as an id: nothing else names an
#: image, and nothing else is ever put into a URL path as one.
_IMAGE_ID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                       r"[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def is_image_id(value):
    return isinstance(value, str) and bool(_IMAGE_ID.match(value))


def images_path(image_id, *more):
    """``/v2/images/<id>/...``, every segment quoted.

    A user's string (an image "named" ``../../v3/users``) must never
    reach another API on Glance's host with the conductor's token: the
    id must be one, and the other segments (member ids) are quoted whole
    and may not be dot segments, which HTTP libraries resolve.
    """
    if not is_image_id(image_id):
        raise ValueError("%r is not an image id" % (image_id,))
    segments = [image_id]
    for segment in more:
        if not isinstance(segment, str) or segment in ("", ".", ".."):
            raise ValueError("%r is not a path segment" % (segment,))
        segments.append(urllib.parse.quote(segment, safe=""))
    return "/v2/images/" + "/".join(segments)


#: Attributes every image has, which a patch may change but not remove.
_BUILT_IN = frozenset((
    "name", "disk_format", "container_format", "visibility", "protected",
    "min_disk", "min_ram", "tags", "os_hidden"))


def attribute_patch(source, copy):
    """JSON-patch operations that give ``copy`` the source's attributes.

    What :func:`copied_attributes` keeps of ``source``, added or
    replaced; what the copy has beyond them, and that a user set,
    removed.
    """
    wanted = copied_attributes(source)
    have = copied_attributes(copy)
    operations = [{"op": "replace" if key in have else "add",
                   "path": "/" + key, "value": value}
                  for key, value in sorted(wanted.items())
                  if have.get(key) != value]
    operations += [{"op": "remove", "path": "/" + key}
                   for key in sorted(set(have) - set(wanted))
                   if key not in _BUILT_IN]
    return operations


def copied_attributes(image):
    """The attributes of ``image`` a copy in another cloud keeps.

    Everything a user set -- formats, min_disk/min_ram, visibility, tags,
    ``hw_*``/``os_*`` and other properties -- but not what Glance computes
    or what names this cloud (owner, locations, ``os_glance_*``).
    """
    return {key: value for key, value in image.items()
            if key not in _NOT_COPIED and not key.startswith("os_glance_")
            and value is not None}


class _Api:
    """The Images API of one site, over its keystoneauth session.

    Failing to log in, to find the API or to reach it is StageFailed.
    """

    def __init__(self, session, site):
        self.site = site
        self.adapter = adapter.Adapter(
            session, service_type="image", interface=site.glance_interface,
            region_name=site.glance_region,
            endpoint_override=site.glance_endpoint, raise_exc=False)

    def _failed(self, what, image_id, reason, transient):
        return exceptions.StageFailed(
            stage=what, image=image_id, transient=transient,
            reason="site %s: %s" % (self.site.name, reason))

    def request(self, method, path, image_id, what, **kwargs):
        try:
            return self.adapter.request(path, method, **kwargs)
        except ks_exceptions.Unauthorized as e:
            raise self._failed(what, image_id, "its Keystone refused the "
                               "conductor's credentials (%s)" % e,
                               False) from e
        except (ks_exceptions.EndpointNotFound,
                ks_exceptions.EmptyCatalog) as e:
            raise self._failed(what, image_id, "no Images API in its "
                               "catalog for region %s, interface %s (%s)"
                               % (self.site.glance_region,
                                  self.site.glance_interface, e),
                               False) from e
        except ks_exceptions.MissingAuthPlugin as e:
            raise self._failed(what, image_id, "no credentials and no "
                               "glance_endpoint (%s)" % e, False) from e
        except ks_exceptions.ConnectionError as e:
            raise self._failed(what, image_id, "cannot reach Glance or "
                               "Keystone (%s)" % e, True) from e


class GlanceClient:
    def __init__(self, session, site, timeout=600.0):
        self.site = site.name
        self._api = _Api(session, site)
        self.timeout = timeout

    def _check(self, reply, image_id, what):
        if reply.status_code == 404:
            raise exceptions.ImageNotFound(image=image_id, site=self.site)
        if reply.status_code >= 400:
            raise exceptions.StageFailed(
                stage=what, image=image_id,
                reason="Glance of site %s answered %d" % (
                    self.site, reply.status_code),
                detail=reply.text[:500],
                transient=reply.status_code >= 500)
        return reply

    def _path(self, what, image_id, *more):
        try:
            return images_path(image_id, *more)
        except ValueError as e:
            raise exceptions.StageFailed(stage=what, image=image_id,
                                         reason=str(e),
                                         transient=False) from e

    def image(self, image_id):
        what = "reading the image"
        if not is_image_id(image_id):
            # What Glance answers for it, without asking.
            raise exceptions.ImageNotFound(image=image_id, site=self.site)
        return self._check(self._api.request(
            "GET", images_path(image_id), image_id, what),
            image_id, what).json()

    def find(self, name_or_id, visible_to=None):
        """The image with this id, or else the one image with this name.

        ``visible_to``: a project id, when this client's credentials see
        every project's images (the conductor's own).  A name then means
        only the images that project may see -- its own, public and
        community ones, those shared with it -- so that the answer says
        nothing of other projects' images, such as that one of them has
        the same name.  An id is looked up whatever it names: the caller
        checks policy on what is found.
        """
        try:
            return self.image(name_or_id)
        except exceptions.ImageNotFound:
            pass
        if visible_to is None:
            what = "finding the image"
            found = self._check(self._api.request(
                "GET", "/v2/images", name_or_id, what,
                params={"name": name_or_id, "limit": 2}), name_or_id,
                what).json()["images"]
        else:
            found = list(itertools.islice((
                image for image in self.images(name=name_or_id)
                if self._visible(image, visible_to)), 2))
        if not found:
            raise exceptions.ImageNotFound(image=name_or_id, site=self.site)
        if len(found) > 1:
            raise exceptions.ImageNotMigratable(
                image=name_or_id, reason="several images at site %s have "
                "this name; name it by its id" % self.site)
        return found[0]

    def _visible(self, image, project_id):
        """Whether ``project_id`` may see ``image`` (as Glance decides)."""
        if image.get("owner") == project_id or image.get("visibility") in (
                "public", "community"):
            return True
        if image.get("visibility") != "shared":
            return False
        what = "reading the image's members"
        reply = self._api.request(
            "GET", self._path(what, image["id"], "members", project_id),
            image["id"], what)
        if reply.status_code == 404:
            return False
        self._check(reply, image["id"], what)
        return True

    def images(self, **filters):
        """Yield every image the Images API lists with ``filters``.

        ``filters``: its query parameters (``owner``, ``status``, ``tag``,
        a property), page after page.
        """
        what = "listing images"
        params = dict(filters, limit=200)
        while True:
            reply = self._check(self._api.request(
                "GET", "/v2/images", "-", what, params=params), "-", what)
            page = reply.json()
            yield from page["images"]
            if not page.get("next") or not page["images"]:
                return
            params["marker"] = page["images"][-1]["id"]

    def patch(self, image_id, operations):
        """Apply JSON-patch ``operations`` to the image's attributes."""
        what = "updating the image"
        self._check(self._api.request(
            "PATCH", self._path(what, image_id), image_id, what,
            data=json.dumps(operations),
            headers={"Content-Type": JSON_PATCH}), image_id, what)

    def data(self, image_id, offset=0):
        """Yield the image's bytes from ``offset``, CHUNK at a time."""
        headers = {"Range": "bytes=%d-" % offset} if offset else {}
        reply = self._check(self._api.request(
            "GET", self._path("download", image_id, "file"), image_id,
            "download", headers=headers, stream=True), image_id, "download")
        if offset and reply.status_code != 206:
            raise exceptions.StageFailed(
                stage="download", image=image_id,
                reason="Glance of site %s ignored the range request"
                       % self.site)
        try:
            yield from reply.iter_content(CHUNK)
        finally:
            reply.close()

    def create(self, attributes):
        """A queued image with ``attributes`` (an ``id`` among them)."""
        reply = self._api.request("POST", "/v2/images",
                                  attributes.get("id"), "creating the image",
                                  json=attributes)
        if reply.status_code == 409:
            raise exceptions.ImageNotMigratable(
                image=attributes.get("id"),
                reason="an image with this id exists (or existed) at site "
                       "%s" % self.site)
        return self._check(reply, attributes.get("id"),
                           "creating the image").json()

    def members(self, image_id):
        """The projects a shared image is shared with.

        (member id, status) pairs.
        """
        what = "reading the image's members"
        reply = self._check(self._api.request(
            "GET", self._path(what, image_id, "members"), image_id, what),
            image_id, what)
        return [(m["member_id"], m["status"])
                for m in reply.json()["members"]]

    def share(self, image_id, member_id, status):
        """Share the image with project ``member_id``, in ``status``.

        A project it is shared with already keeps its place; its status
        is set again.  Setting another project's status takes ``admin``
        (Glance's ``modify_member``), as the conductor has.
        """
        what = "sharing the image"
        members = self._path(what, image_id, "members")
        member = self._path(what, image_id, "members", member_id)
        reply = self._api.request("POST", members, image_id, what,
                                  json={"member": member_id})
        if reply.status_code != 409:    # 409: a member already.
            self._check(reply, image_id, what)
        if status != "pending":
            self._check(self._api.request(
                "PUT", member, image_id, what, json={"status": status}),
                image_id, what)

    def upload(self, image_id, chunks):
        """PUT the bytes of the iterable ``chunks``.

        If the iterable raises, the body is cut short and Glance leaves
        the image queued: nothing half-written is ever activated.
        """
        self._check(self._api.request(
            "PUT", self._path("upload", image_id, "file"), image_id,
            "upload", data=chunks,
            headers={"Content-Type": "application/octet-stream"}),
            image_id, "upload")

    def add_location(self, image_id, url, algo, digest):
        """Register ``url`` for a queued image, to be checked by Glance.

        Glance reads the data from its store, computes the hashes and
        activates the image only if its ``algo`` digest equals ``digest``.
        Needs the ``service`` role.
        """
        what = "registering the location"
        self._check(self._api.request(
            "POST", self._path(what, image_id, "locations"), image_id, what,
            data=json.dumps({"url": url, "validation_data": {
                "os_hash_algo": algo, "os_hash_value": digest}}),
            headers={"Content-Type": "application/json"}),
            image_id, what)

    def wait_active(self, image_id, expected_digest, timeout=None):
        """Wait until Glance has hashed the image; it must be active.

        Returns the image.  A location import that failed sends the image
        back to ``queued``: StageFailed.  Asked again after 0.1 s, then
        twice as long each time up to 0.5 s, for ``timeout`` seconds.
        """
        timeout = timeout or self.timeout

        def still_waiting(state):
            raise exceptions.StageFailed(
                stage="registration", image=image_id, transient=True,
                reason="still %s after %.0fs" % (
                    state.outcome.result()["status"], timeout))

        image = tenacity.Retrying(
            retry=tenacity.retry_if_result(
                lambda image: image["status"] != "active"),
            wait=tenacity.wait_exponential(multiplier=0.1, max=0.5),
            stop=tenacity.stop_after_delay(timeout),
            retry_error_callback=still_waiting)(self._importing, image_id)
        if image.get("os_hash_value") != expected_digest:
            raise exceptions.ChecksumMismatch(
                stage="registration", image=image_id,
                algo=image.get("os_hash_algo"),
                actual=image.get("os_hash_value"),
                expected=expected_digest)
        return image

    def _importing(self, image_id):
        """The image, unless Glance gave up importing it: StageFailed."""
        image = self.image(image_id)
        if image["status"] in ("queued", "killed", "deleted") and \
                not image.get("os_glance_import_task"):
            # Glance's task says only "Internal Error", whether the hash
            # differed or its database failed: the caller checks the data
            # itself.
            raise exceptions.StageFailed(
                stage="registration", image=image_id, transient=True,
                reason="Glance of site %s did not import it (status "
                       "%s)" % (self.site, image["status"]))
        return image

    def delete(self, image_id, patience=30.0):
        """Delete the image; gone already is fine.

        Right after a failed location import Glance may still be winding
        the import down and refuse (409, 400): asked again every second
        for up to ``patience`` seconds.
        """
        what = "deleting the image"
        path = self._path(what, image_id)
        reply = tenacity.Retrying(
            retry=tenacity.retry_if_result(
                lambda reply: reply.status_code in (400, 409)),
            wait=tenacity.wait_fixed(1.0),
            stop=tenacity.stop_after_delay(patience),
            retry_error_callback=lambda state: state.outcome.result())(
                self._api.request, "DELETE", path, image_id, what)
        if reply.status_code not in (204, 404):
            self._check(reply, image_id, what)
