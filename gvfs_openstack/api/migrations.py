# SPDX-License-Identifier: Apache-2.0
"""``/v1/migrations`` and ``/v1/sites``: what each request may do, then
the conductor's answer, shaped for the user.

Policy is checked here, before the conductor is asked to act: a
migration against the owners of its images (found by the conductor in
the source Glance, which it sees whole), a job against its project.
"""

import urllib.parse

from gvfs_openstack.api import delegation
from gvfs_openstack.api import faults
from gvfs_openstack.api import params as params_mod
from gvfs_openstack.api import policies
from gvfs_openstack.api import policy
from gvfs_openstack.api import schemas
from gvfs_openstack import exceptions


def _migration(job, base_url):
    """The conductor's job view as the API shows it."""
    view = dict(job)
    view.pop("owner", None)      # The runner's lease, not the user's.
    view.pop("heartbeat", None)
    view.pop("trust_id", None)   # The conductor's to use, nobody else's.
    view.pop("notified", None)
    view["links"] = [{"rel": "self",
                      "href": "%s/v1/migrations/%s" % (base_url, job["id"])}]
    return view


def _not_found(image):
    """What a missing image named as ``image`` was named gets."""
    return exceptions.ImageNotFound(image=image["requested_as"],
                                    site=image.get("site"))


class MigrationsController:
    def __init__(self, conductor, rules, conf):
        self.conductor = conductor
        self.rules = rules
        self.conf = conf
        self.max_limit = conf.api.max_limit
        if conf.api.trusts and not conf.api.trustee_user_id:
            raise exceptions.InvalidConfig(
                option="[api] trustee_user_id",
                reason="required with [api] trusts: the Keystone id of "
                "the user gvfs-conductor authenticates as")

    def _delegate(self, request):
        """The caller's trust for the conductor, or None (trusts off).

        The trustee comes from this service's configuration, never from
        the message bus.
        """
        api = self.conf.api
        if not api.trusts:
            return None
        if not api.trustee_user_id:
            raise faults.Fault(503, "gvfs-api has no [api] "
                               "trustee_user_id to delegate to")
        return delegation.delegate(
            self.conf, request.context,
            request.environ.get("HTTP_X_AUTH_TOKEN"), api.trustee_user_id,
            api.delegated_roles)

    def create(self, request, body):
        schemas.validate(schemas.MIGRATION_CREATE, body)
        wanted = body["migration"]
        for image in self.conductor.find_images(request.context,
                                                wanted["images"]):
            policy.authorize_object(
                self.rules, policies.MIGRATION_CREATE, request.context,
                {"project_id": image["owner"]}, _not_found(image))
        trust = self._delegate(request)
        try:
            job = self.conductor.migrate(
                request.context, wanted["images"], wanted["destination"],
                wanted.get("images_in_flight"), wanted.get("pack"),
                trust_id=trust.id if trust else None,
                base=wanted.get("base"))
        except BaseException:
            if trust:
                trust.revoke()
            raise
        return 202, {"migration": _migration(job, request.application_url)}

    def index(self, request):
        params = request.params
        unknown = set(params) - {"all_projects", "project_id", "status",
                                 "limit", "marker"}
        if unknown:
            raise faults.Fault(400, "Unknown query parameter %s"
                               % sorted(unknown)[0])
        context = request.context
        project_id = context.project_id
        if params_mod.bool_param(params, "all_projects") or (
                params.get("project_id") not in (None, project_id)):
            policy.authorize(self.rules, policies.MIGRATION_LIST_ALL,
                             context, {"project_id": params.get(
                                 "project_id")})
            project_id = params.get("project_id")
        else:
            policy.authorize(self.rules, policies.MIGRATION_LIST, context,
                             {"project_id": project_id})
        states = params.getall("status") or None
        for state in states or ():
            if state not in schemas.MIGRATION_STATES:
                raise faults.Fault(400, "Invalid query parameter status: "
                                   "%r is not one of: %s" % (state, ", ".join(
                                       schemas.MIGRATION_STATES)))
        limit = min(params_mod.int_param(params, "limit", 1)
                    or self.max_limit, self.max_limit)
        # One more than asked: whether a next page exists.
        try:
            found = self.conductor.list_jobs(
                context, project_id=project_id, states=states,
                limit=limit + 1, marker=params.get("marker"))
        except exceptions.JobNotFound as e:
            raise faults.Fault(400, "Invalid query parameter marker: no "
                               "migration %s" % params["marker"]) from e
        reply = {"migrations": [_migration(job, request.application_url)
                                for job in found[:limit]]}
        if len(found) > limit:
            query = [(k, v) for k, v in params.items() if k != "marker"]
            query.append(("marker", found[limit - 1]["id"]))
            reply["migrations_links"] = [{"rel": "next", "href": "%s?%s" % (
                request.path_url, urllib.parse.urlencode(query))}]
        return 200, reply

    def _job(self, request, job_id, rule):
        job = self.conductor.show_job(request.context, job_id)
        policy.authorize_object(self.rules, rule, request.context,
                                {"project_id": job.get("project_id")},
                                exceptions.JobNotFound(job=job_id))
        return job

    def show(self, request, job_id):
        job = self._job(request, job_id, policies.MIGRATION_SHOW)
        return 200, {"migration": _migration(job, request.application_url)}

    def cancel(self, request, job_id, body):
        if body not in (None, {}):
            raise faults.Fault(400, "cancel takes no body")
        self._job(request, job_id, policies.MIGRATION_CANCEL)
        job = self.conductor.cancel_job(request.context, job_id)
        return 202, {"migration": _migration(job, request.application_url)}


class SitesController:
    def __init__(self, conductor, rules):
        self.conductor = conductor
        self.rules = rules

    def _check(self, request, rule):
        policy.authorize(self.rules, rule, request.context,
                         {"project_id": request.context.project_id})

    def index(self, request):
        self._check(request, policies.SITE_LIST)
        return 200, {"sites": self.conductor.list_sites(request.context)}

    def show(self, request, name):
        self._check(request, policies.SITE_SHOW)
        for site in self.conductor.list_sites(request.context):
            if site["name"] == name:
                return 200, {"site": site}
        raise faults.Fault(404, "No site %s" % name)
