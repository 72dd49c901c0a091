# SPDX-License-Identifier: Apache-2.0
"""``/v1/replications``: replication policies, checked against the
project they belong to.

A policy belongs to the project of the user who made it and selects only
that project's images; the conductor copies them with its own
credentials, as it reconciles the policy long after the request.
"""

from gvfs_openstack.api import faults
from gvfs_openstack.api import params as params_mod
from gvfs_openstack.api import policies
from gvfs_openstack.api import policy
from gvfs_openstack.api import schemas
from gvfs_openstack import exceptions


def _replication(view, base_url):
    view = dict(view)
    view["links"] = [{"rel": "self", "href": "%s/v1/replications/%s" % (
        base_url, view["id"])}]
    return view


def _selector(wanted):
    """(kind, selector) of the one selecting field of the body."""
    named = [kind for kind in schemas.REPLICATION_SELECTORS
             if kind in wanted]
    if len(named) != 1:
        raise faults.Fault(400, "Name exactly one of %s" % ", ".join(
            "replication.%s" % kind
            for kind in schemas.REPLICATION_SELECTORS))
    kind = named[0]
    # The schema admits only {"key", "value"} as a property.
    return kind, (wanted[kind] if kind == "property"
                  else {kind: wanted[kind]})


class ReplicationsController:
    def __init__(self, conductor, rules):
        self.conductor = conductor
        self.rules = rules

    def create(self, request, body):
        schemas.validate(schemas.REPLICATION_CREATE, body)
        wanted = body["replication"]
        kind, selector = _selector(wanted)
        policy.authorize(self.rules, policies.REPLICATION_CREATE,
                         request.context,
                         {"project_id": request.context.project_id})
        view = self.conductor.create_replication(
            request.context, wanted["destination"], kind, selector,
            delete_follows=wanted.get("delete_follows", False),
            name=wanted.get("name"))
        return 201, {"replication": _replication(
            view, request.application_url)}

    def index(self, request):
        params = request.params
        unknown = set(params) - {"all_projects"}
        if unknown:
            raise faults.Fault(400, "Unknown query parameter %s"
                               % sorted(unknown)[0])
        context = request.context
        if params_mod.bool_param(params, "all_projects"):
            policy.authorize(self.rules, policies.REPLICATION_LIST_ALL,
                             context, {"project_id": None})
            project_id = None
        else:
            project_id = context.project_id
            policy.authorize(self.rules, policies.REPLICATION_LIST, context,
                             {"project_id": project_id})
        found = self.conductor.list_replications(context,
                                                 project_id=project_id)
        return 200, {"replications": [
            _replication(view, request.application_url) for view in found]}

    def _policy(self, request, policy_id, rule):
        view = self.conductor.show_replication(request.context, policy_id)
        policy.authorize_object(
            self.rules, rule, request.context,
            {"project_id": view["project_id"]},
            exceptions.ReplicationNotFound(policy=policy_id))
        return view

    def show(self, request, policy_id):
        view = self._policy(request, policy_id, policies.REPLICATION_SHOW)
        return 200, {"replication": _replication(
            view, request.application_url)}

    def _pause(self, request, policy_id, body, paused):
        if body not in (None, {}):
            raise faults.Fault(400, "%s takes no body"
                               % ("pause" if paused else "resume"))
        self._policy(request, policy_id, policies.REPLICATION_UPDATE)
        view = self.conductor.pause_replication(request.context, policy_id,
                                                paused)
        return 200, {"replication": _replication(
            view, request.application_url)}

    def pause(self, request, policy_id, body):
        return self._pause(request, policy_id, body, True)

    def resume(self, request, policy_id, body):
        return self._pause(request, policy_id, body, False)

    def delete(self, request, policy_id):
        self._policy(request, policy_id, policies.REPLICATION_DELETE)
        self.conductor.delete_replication(request.context, policy_id)
        return 204, None
