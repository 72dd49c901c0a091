# SPDX-License-Identifier: Apache-2.0
"""The OSC plugin's client of gvfs-api: the REST calls, user-facing errors.

It reaches gvfs-api through the Keystone catalog (service type
:data:`SERVICE_TYPE`) with the user's own session, as every other
client does: nothing of the message bus or the conductor's
configuration is needed on the user's side.
"""

import json

from keystoneauth1 import adapter
from keystoneauth1 import exceptions as ks_exceptions
from osc_lib import exceptions as osc_exceptions

#: gvfs-api's service type in the catalog.
SERVICE_TYPE = "gvfs"


def _message(reply):
    """The fault's message of an error reply (or its status line)."""
    try:
        document = reply.json()
        [(_, fault)] = document.items()
        return fault["message"]
    except (ValueError, TypeError, KeyError, AttributeError):
        return "gvfs-api answered %d %s" % (reply.status_code, reply.reason)


class ApiClient:
    def __init__(self, session, region_name=None, interface=None,
                 endpoint_override=None, timeout=60.0):
        self.api = adapter.Adapter(
            session, service_type=SERVICE_TYPE, region_name=region_name,
            interface=interface, endpoint_override=endpoint_override)
        self.timeout = timeout

    def _call(self, method, path, body=None, params=None):
        try:
            reply = self.api.request(
                path, method, raise_exc=False,
                data=None if body is None else json.dumps(body),
                headers={"Content-Type": "application/json",
                         "Accept": "application/json"},
                params=params, timeout=self.timeout)
        except ks_exceptions.EndpointNotFound as e:
            raise osc_exceptions.CommandError(
                "gvfs-api is not in the catalog (service type %s) of this "
                "cloud or region" % SERVICE_TYPE) from e
        except ks_exceptions.ConnectFailure as e:
            raise osc_exceptions.CommandError(
                "gvfs-api cannot be reached: %s" % e) from e
        if reply.status_code >= 400:
            raise osc_exceptions.CommandError(_message(reply))
        return reply.json() if reply.content else None

    def migrate(self, images, destination, images_in_flight=None,
                pack=None, base=None):
        migration = {"images": list(images), "destination": destination}
        if images_in_flight is not None:
            migration["images_in_flight"] = images_in_flight
        if pack is not None:
            migration["pack"] = pack
        if base is not None:
            migration["base"] = base
        return self._call("POST", "/v1/migrations",
                          {"migration": migration})["migration"]

    def list_jobs(self, project_id=None, all_projects=False, status=None,
                  limit=None, marker=None):
        """One page of migrations (``limit``), or all of them."""
        params = {"project_id": project_id, "status": status,
                  "marker": marker}
        if all_projects:
            params["all_projects"] = "true"
        if limit is not None:
            params["limit"] = limit
        found = []
        while True:
            page = self._call("GET", "/v1/migrations", params={
                k: v for k, v in params.items() if v is not None})
            found += page["migrations"]
            if limit is not None or not page.get("migrations_links") \
                    or not page["migrations"]:
                return found
            params["marker"] = page["migrations"][-1]["id"]

    def show_job(self, job_id):
        return self._call("GET", "/v1/migrations/%s" % job_id)["migration"]

    def cancel_job(self, job_id):
        return self._call("POST", "/v1/migrations/%s/cancel"
                          % job_id)["migration"]

    def golden_references(self, image):
        return self._call("GET", "/v1/golden-images/%s/references"
                          % image)["references"]

    def list_sites(self):
        return self._call("GET", "/v1/sites")["sites"]

    def show_site(self, name):
        return self._call("GET", "/v1/sites/%s" % name)["site"]

    def create_replication(self, destination, selector_kind, selector,
                           delete_follows=False, name=None):
        """``selector``: the tag, the (key, value) or the image list."""
        replication = {"destination": destination,
                       "delete_follows": delete_follows}
        if selector_kind == "property":
            key, value = selector
            replication["property"] = {"key": key, "value": value}
        else:
            replication[selector_kind] = selector
        if name is not None:
            replication["name"] = name
        return self._call("POST", "/v1/replications",
                          {"replication": replication})["replication"]

    def list_replications(self, all_projects=False):
        params = {"all_projects": "true"} if all_projects else None
        return self._call("GET", "/v1/replications",
                          params=params)["replications"]

    def show_replication(self, policy_id):
        return self._call("GET", "/v1/replications/%s"
                          % policy_id)["replication"]

    def pause_replication(self, policy_id, paused):
        return self._call("POST", "/v1/replications/%s/%s" % (
            policy_id, "pause" if paused else "resume"))["replication"]

    def delete_replication(self, policy_id):
        self._call("DELETE", "/v1/replications/%s" % policy_id)
