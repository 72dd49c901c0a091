# SPDX-License-Identifier: Apache-2.0
"""Whole servers for ``openstack gvfs migrate --server``: what is carried.

A server reaches the recovery site as a snapshot image, which Nova makes
with the user's token (``createImage``: Nova pauses nothing for it, and
quiesces the guest's file systems where the image asks for the QEMU
guest agent).  What the disk alone does not hold -- the server's flavor,
key pair name, metadata and attached volumes -- is recorded as
properties of that image (:func:`record`), which the migration copies
with it, so that the image is a complete record at the destination
whether or not a server is booted from it there at once
(:func:`boot_request`).

What cannot be carried is named, never dropped silently: networks and
security groups (their ports belong to the source's Neutron), volumes
(their data is in the source's Cinder, not on the DTN) and a key pair
the destination does not have.

The REST calls are here too (:class:`Cloud`), on the user's keystoneauth
session, one region at a time.
"""

import json
import time

from keystoneauth1 import adapter
from keystoneauth1 import exceptions as ks_exceptions
from osc_lib import exceptions as osc_exceptions

#: 2.47: a server shows its flavor by name; 2.45: ``createImage`` answers
#: the image's id; 2.37: a server may be made without networks.
COMPUTE_MICROVERSION = "2.47"
#: Properties of the snapshot image that hold the server's record.
PREFIX = "gvfs_server_"
ID, NAME, FLAVOR, KEY_NAME, METADATA, VOLUMES = (
    PREFIX + field for field in (
        "id", "name", "flavor", "key_name", "metadata", "volumes"))
#: Server states a consistent snapshot can be taken in.
_SNAPSHOT_STATES = ("ACTIVE", "SHUTOFF", "PAUSED", "SUSPENDED")


def record(server):
    """``(image properties, what is not carried)`` of a server.

    ``server`` is the body of ``GET /servers/{id}`` at
    :data:`COMPUTE_MICROVERSION`.  Raises CommandError for a server
    whose disk is not an image (booted from a volume) or that is in no
    state to be snapshotted.
    """
    name = server.get("name") or server["id"]
    if not server.get("image"):
        raise osc_exceptions.CommandError(
            "server %s boots from a volume: its disk is in the Block "
            "Storage service, not on the DTN; migrate images only" % name)
    if server.get("status") not in _SNAPSHOT_STATES:
        raise osc_exceptions.CommandError(
            "server %s is %s: a snapshot needs it %s" % (
                name, server.get("status"), " or ".join(_SNAPSHOT_STATES)))
    volumes = [{"id": v["id"]} for v in
               server.get("os-extended-volumes:volumes_attached") or []]
    properties = {
        ID: server["id"],
        NAME: name,
        FLAVOR: server["flavor"]["original_name"],
        METADATA: json.dumps(server.get("metadata") or {}, sort_keys=True),
        VOLUMES: json.dumps(volumes),
    }
    if server.get("key_name"):
        properties[KEY_NAME] = server["key_name"]
    not_carried = ["network %s (%s)" % (network, ", ".join(
        a.get("addr", "?") for a in addresses))
        for network, addresses in sorted(
            (server.get("addresses") or {}).items())]
    not_carried += ["security group %s" % g["name"] for g in
                    server.get("security_groups") or []]
    not_carried += ["volume %s" % v["id"] for v in volumes]
    return properties, not_carried


def dependencies(image):
    """Images ``image`` boots with: its kernel and ramdisk, if it has them.

    A snapshot of a server booted from a kernel and a ramdisk image
    (``aki``/``ari``) names them as Nova does the server's; the copy
    boots at the destination only if they are there too.
    """
    return [image[key] for key in ("kernel_id", "ramdisk_id")
            if image.get(key)]


def parse_flavor_map(pairs):
    """``{source flavor: destination flavor}`` of ``--flavor-map A=B``."""
    mapped = {}
    for pair in pairs or ():
        source, sep, destination = pair.partition("=")
        if not sep or not source or not destination:
            raise osc_exceptions.CommandError(
                "--flavor-map wants SOURCE=DESTINATION, not %r" % pair)
        mapped[source] = destination
    return mapped


def boot_request(image, flavor_id, key_name=None):
    """The body of ``POST /servers`` at the destination.

    ``image`` is the migrated image (its properties hold the record);
    ``key_name`` the key pair to give it, if the destination has it.
    """
    server = {
        "name": image.get(NAME) or image["id"],
        "imageRef": image["id"],
        "flavorRef": flavor_id,
        "metadata": json.loads(image.get(METADATA) or "{}"),
        # Ports stay at the source: the server starts without any.
        "networks": "none",
    }
    if key_name:
        server["key_name"] = key_name
    return {"server": server}


class Cloud:
    """Nova and Glance of one region, with the user's session."""

    def __init__(self, session, region_name=None, interface=None,
                 timeout=60.0):
        self.compute = adapter.Adapter(
            session, service_type="compute", region_name=region_name,
            interface=interface,
            default_microversion=COMPUTE_MICROVERSION)
        self.image = adapter.Adapter(
            session, service_type="image", region_name=region_name,
            interface=interface)
        self.region_name = region_name
        self.timeout = timeout

    def _call(self, api, method, path, body=None, ok=(200, 201, 202, 204),
              headers=None):
        try:
            reply = api.request(
                path, method, raise_exc=False, json=body,
                headers=headers, timeout=self.timeout)
        except ks_exceptions.EndpointNotFound as e:
            raise osc_exceptions.CommandError(
                "no %s endpoint in region %s of the catalog"
                % (api.service_type, self.region_name)) from e
        except ks_exceptions.ConnectFailure as e:
            raise osc_exceptions.CommandError(
                "the %s service of region %s cannot be reached: %s"
                % (api.service_type, self.region_name, e)) from e
        if reply.status_code == 404 and 404 not in ok:
            raise osc_exceptions.CommandError(
                "%s %s: not found in region %s"
                % (api.service_type, path, self.region_name))
        if reply.status_code not in ok:
            raise osc_exceptions.CommandError(
                "%s %s %s answered %d: %s" % (
                    api.service_type, method, path, reply.status_code,
                    reply.text[:500]))
        return reply

    # --- Compute --------------------------------------------------------

    def find_server(self, name_or_id):
        """The server's body; by id, else by exact name (one only)."""
        reply = self._call(self.compute, "GET", "/servers/%s" % name_or_id,
                           ok=(200, 404))
        if reply.status_code == 200:
            return reply.json()["server"]
        found = self._call(self.compute, "GET",
                           "/servers/detail").json()["servers"]
        named = [s for s in found if s.get("name") == name_or_id]
        if not named:
            raise osc_exceptions.CommandError(
                "no server %s in region %s" % (name_or_id, self.region_name))
        if len(named) > 1:
            raise osc_exceptions.CommandError(
                "%d servers are named %s: name one by its ID"
                % (len(named), name_or_id))
        return named[0]

    def snapshot(self, server_id, name):
        """Ask Nova for a snapshot of the server; the new image's id."""
        reply = self._call(self.compute, "POST", "/servers/%s/action"
                           % server_id, {"createImage": {"name": name}})
        return reply.json()["image_id"]

    def flavor_id(self, name):
        """The id of the flavor called ``name``, or None."""
        for flavor in self._call(self.compute, "GET",
                                 "/flavors/detail").json()["flavors"]:
            if flavor["name"] == name:
                return flavor["id"]
        return None

    def has_keypair(self, name):
        return self._call(self.compute, "GET", "/os-keypairs/%s" % name,
                          ok=(200, 404)).status_code == 200

    def create_server(self, body):
        return self._call(self.compute, "POST", "/servers",
                          body).json()["server"]["id"]

    def show_server(self, server_id):
        return self._call(self.compute, "GET",
                          "/servers/%s" % server_id).json()["server"]

    # --- Image ----------------------------------------------------------

    def show_image(self, image_id, missing_ok=False):
        """The image's body; None if it is not there and ``missing_ok``."""
        reply = self._call(self.image, "GET", "/v2/images/%s" % image_id,
                           ok=(200, 404) if missing_ok else (200,))
        return reply.json() if reply.status_code == 200 else None

    def add_properties(self, image_id, properties):
        """Record ``properties`` on the image (JSON patch, one call)."""
        self._call(self.image, "PATCH", "/v2/images/%s" % image_id, [
            {"op": "add", "path": "/%s" % key, "value": value}
            for key, value in sorted(properties.items())],
            headers={"Content-Type":
                     "application/openstack-images-v2.1-json-patch"})


def wait_for(fetch, done, failed, what, timeout, interval=2.0,
             clock=time.monotonic, sleep=time.sleep):
    """``fetch()`` until ``done(it)``; CommandError if failed or late."""
    deadline = clock() + timeout
    while True:
        found = fetch()
        if done(found):
            return found
        reason = failed(found)
        if reason:
            raise osc_exceptions.CommandError("%s: %s" % (what, reason))
        if clock() > deadline:
            raise osc_exceptions.CommandError(
                "%s: not done after %d s" % (what, timeout))
        sleep(interval)
