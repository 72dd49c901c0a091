# SPDX-License-Identifier: Apache-2.0
"""gvfs-api's router, policy and schemas, behind the headers
keystonemiddleware sets, with a conductor that records its calls (the
real one, on RabbitMQ with Keystone, is in tests/functional/test_gvfs_api.py).
"""

import io
import json

from oslo_config import cfg
from oslo_config import fixture as config_fixture
import oslo_messaging as messaging
import pytest
import webob

from gvfs_openstack.api import app
from gvfs_openstack.api import policies
from gvfs_openstack.conf import api as api_conf
from gvfs_openstack import exceptions
from tests import metrics_samples

ALPHA, BETA = "a" * 32, "b" * 32
#: A migration id nobody made.
UNKNOWN = "0f0f0f0f-0000-4000-8000-000000000000"


class Conductor:
    """The conductor's RPC API as gvfs-api calls it, over a dict of jobs."""

    def __init__(self):
        self.images = {"img-a": {"id": "img-a", "owner": ALPHA},
                       "img-b": {"id": "img-b", "owner": BETA}}
        self.jobs = []
        self.calls = []
        self.replications = []
        self.bases = []
        #: Images whose DTN references were looked for.
        self.walked = []

    def find_images(self, context, image_ids):
        try:
            return [dict(self.images[i], requested_as=i, site="east")
                    for i in image_ids]
        except KeyError as e:
            raise exceptions.ImageNotFound(image=e.args[0],
                                           site="east") from e

    def migrate(self, context, image_ids, destination, images_in_flight,
                pack, trust_id=None, base=None):
        self.calls.append(("migrate", context.project_id, image_ids))
        self.bases.append(base)
        job = {"id": "job-%d" % len(self.jobs), "state": "queued",
               "project_id": context.project_id, "images": [],
               "owner": "runner-lease"}
        self.jobs.append(job)
        return job

    def list_jobs(self, context, project_id=None, states=None, limit=None,
                  marker=None):
        found = [j for j in self.jobs
                 if project_id in (None, j["project_id"])]
        if marker is not None:
            ids = [j["id"] for j in found]
            if marker not in ids:
                raise exceptions.JobNotFound(job=marker)
            found = found[ids.index(marker) + 1:]
        return found[:limit]

    def show_job(self, context, job_id):
        for job in self.jobs:
            if job["id"] == job_id:
                return job
        raise exceptions.JobNotFound(job=job_id)

    def cancel_job(self, context, job_id):
        self.calls.append(("cancel", job_id))
        return self.show_job(context, job_id)

    def golden_references(self, context, image_id):
        self.walked.append(image_id)
        if image_id not in self.images:
            raise exceptions.ImageNotFound(image=image_id, site="east")
        return {"image_id": image_id,
                "owner": self.images[image_id]["owner"],
                "references": [
                    {"holder": "cn-1~uuid-1~disk~" + ALPHA, "host": "cn-1",
                     "instance_id": "uuid-1", "disk": "disk",
                     "project_id": ALPHA},
                    {"holder": "cn-2~uuid-2~disk~" + BETA, "host": "cn-2",
                     "instance_id": "uuid-2", "disk": "disk",
                     "project_id": BETA},
                    # Made before references named their project.
                    {"holder": "cn-2~uuid-3~disk", "host": "cn-2",
                     "instance_id": "uuid-3", "disk": "disk",
                     "project_id": None}]}

    def create_replication(self, context, destination, selector_kind,
                           selector, delete_follows=False, name=None):
        policy = {"id": "r-%d" % len(self.replications),
                  "project_id": context.project_id, "destination":
                  destination, "selector_kind": selector_kind,
                  "selector": selector, "delete_follows": delete_follows,
                  "name": name, "paused": False, "images": []}
        self.replications.append(policy)
        return policy

    def list_replications(self, context, project_id=None):
        return [p for p in self.replications
                if project_id in (None, p["project_id"])]

    def show_replication(self, context, policy_id):
        for policy in self.replications:
            if policy["id"] == policy_id:
                return policy
        raise exceptions.ReplicationNotFound(policy=policy_id)

    def pause_replication(self, context, policy_id, paused):
        policy = self.show_replication(context, policy_id)
        policy["paused"] = paused
        return policy

    def delete_replication(self, context, policy_id):
        self.replications.remove(self.show_replication(context, policy_id))

    def list_sites(self, context):
        return [{"name": "east", "local": True, "destination": False},
                {"name": "west", "local": False, "destination": True}]


@pytest.fixture
def api():
    fixture = config_fixture.Config(cfg.ConfigOpts())
    fixture.setUp()
    api_conf.register_opts(fixture.conf)
    fixture.conf([], project="gvfs")
    # No Keystone here to make trusts with: functional tests do.
    fixture.config(group="api", max_limit=2, trusts=False)
    conductor = Conductor()
    application = app.Application(fixture.conf, conductor)

    def call(method, path, project=ALPHA, roles="member,reader", body=None):
        request = webob.Request.blank(path, method=method, headers={
            "X-Project-Id": project, "X-User-Id": "u-" + project[:1],
            "X-Roles": roles, "X-Identity-Status": "Confirmed"})
        if body is not None:
            request.body = json.dumps(body).encode()
            request.content_type = "application/json"
        reply = request.get_response(application)
        return reply.status_int, json.loads(reply.body) if reply.body \
            else None

    call.conductor = conductor
    call.application = application
    yield call
    fixture.cleanUp()


def test_a_migration_names_the_base_its_deltas_go_against(api):
    conductor = api.conductor
    status, _ = api("POST", "/v1/migrations", body={"migration": {
        "images": ["img-a"], "destination": "west", "base": "golden-1"}})
    assert status == 202 and conductor.bases == ["golden-1"]
    status, fault = api("POST", "/v1/migrations", body={"migration": {
        "images": ["img-a"], "destination": "west", "base": 7}})
    assert status == 400 and "base" in json.dumps(fault)
    assert conductor.bases == ["golden-1"]


def _migrate(images, destination="west"):
    return {"migration": {"images": images, "destination": destination}}


def test_a_member_migrates_its_projects_images_only(api):
    status, reply = api("POST", "/v1/migrations", body=_migrate(["img-a"]))
    assert status == 202
    assert reply["migration"]["project_id"] == ALPHA
    assert "owner" not in reply["migration"]    # The runner's lease.
    # Another project's image is answered as a missing one: the answer
    # says neither that it exists nor whose it is.
    refused = api("POST", "/v1/migrations", body=_migrate(["img-a",
                                                           "img-b"]))
    missing = api("POST", "/v1/migrations", body=_migrate(["img-a",
                                                           "img-z"]))
    assert refused[0] == missing[0] == 400
    assert refused[1] == _renamed(missing[1], "img-z", "img-b")
    assert BETA not in json.dumps(refused[1])
    assert api.conductor.calls == [("migrate", ALPHA, ["img-a"])]


def _renamed(document, old, new):
    """``document`` with every ``old`` in its strings made ``new``."""
    return json.loads(json.dumps(document).replace(old, new))


def test_a_reader_cannot_migrate_and_admin_can_anything(api):
    status, fault = api("POST", "/v1/migrations", body=_migrate(["img-a"]),
                        roles="reader")
    # Its own project's image: refused, naming only the rule.
    assert (status, fault["forbidden"]["message"]) == (
        403, "Policy does not allow %s" % policies.MIGRATION_CREATE)
    status, _ = api("POST", "/v1/migrations", body=_migrate(["img-b"]),
                    roles="admin,member,reader")
    assert status == 202


def test_jobs_are_seen_and_cancelled_by_their_project(api):
    api("POST", "/v1/migrations", body=_migrate(["img-a"]))
    assert api("GET", "/v1/migrations/job-0", roles="reader")[0] == 200
    for method, path in (("GET", "/v1/migrations/%s"),
                         ("POST", "/v1/migrations/%s/cancel")):
        refused = api(method, path % "job-0", project=BETA)
        missing = api(method, path % "job-9", project=BETA)
        assert refused[0] == missing[0] == 404
        assert refused[1] == _renamed(missing[1], "job-9", "job-0")
    assert api("POST", "/v1/migrations/job-0/cancel",
               roles="reader")[0] == 403
    assert api("POST", "/v1/migrations/job-0/cancel")[0] == 202
    assert api("GET", "/v1/migrations", project=BETA)[1] == \
        {"migrations": []}


def test_listing_pages_and_all_projects_is_admins(api):
    for _ in range(3):
        api("POST", "/v1/migrations", body=_migrate(["img-a"]))
    status, page = api("GET", "/v1/migrations?limit=5")
    assert status == 200    # Lowered to max_limit, with a next link.
    assert [j["id"] for j in page["migrations"]] == ["job-0", "job-1"]
    [link] = page["migrations_links"]
    assert link["href"].endswith("/v1/migrations?limit=5&marker=job-1")
    status, page = api("GET", "/v1/migrations?marker=job-1")
    assert [j["id"] for j in page["migrations"]] == ["job-2"]
    assert "migrations_links" not in page
    assert api("GET", "/v1/migrations?marker=nope")[0] == 400
    assert api("GET", "/v1/migrations?all_projects=1")[0] == 403
    assert api("GET", "/v1/migrations?project_id=%s" % BETA)[0] == 403
    assert api("GET", "/v1/migrations?all_projects=1",
               roles="admin,member,reader")[0] == 200


@pytest.mark.parametrize("query,message", [
    ("limit=0", "limit"), ("limit=x", "limit"), ("status=lost", "status"),
    ("colour=red", "Unknown query parameter colour"),
    ("all_projects=maybe", "all_projects"),
])
def test_bad_queries_are_400_naming_the_parameter(api, query, message):
    status, fault = api("GET", "/v1/migrations?" + query)
    assert status == 400
    assert message in fault["badRequest"]["message"]


def test_conductor_errors_keep_their_message_and_get_a_status(api):
    status, fault = api("POST", "/v1/migrations", body=_migrate(["nope"]))
    assert (status, fault["badRequest"]["message"]) == (
        400, "Image nope not found at site east")
    status, fault = api("GET", "/v1/migrations/nope")
    assert (status, fault["itemNotFound"]["message"]) == (
        404, "No migration job nope")


def test_a_request_a_conductor_rejects_for_its_version_is_409(
        api, monkeypatch):
    """As a conductor of an older release answers a newer call."""
    def older(context):
        raise messaging.UnsupportedVersion("1.4")
    monkeypatch.setattr(api.conductor, "list_sites", older)
    status, fault = api("GET", "/v1/sites")
    assert (status, fault["conflictingRequest"]["message"]) == (
        409, "gvfs-conductor does not serve this request yet: it is being "
        "upgraded")


def test_unknown_paths_and_methods(api):
    assert api("GET", "/v1/nothing")[0] == 404
    status, fault = api("DELETE", "/v1/migrations")
    assert status == 405 and "allowed: POST, GET" in \
        fault["badMethod"]["message"]


def test_sites_are_readable_by_readers(api):
    status, reply = api("GET", "/v1/sites", roles="reader")
    assert status == 200 and [s["name"] for s in reply["sites"]] == \
        ["east", "west"]
    assert api("GET", "/v1/sites/west", roles="reader")[1]["site"][
        "destination"] is True
    assert api("GET", "/v1/sites/north")[0] == 404


def test_golden_references_are_the_owners_to_see_hosts_admins(api):
    path = "/v1/golden-images/img-a/references"
    status, reply = api("GET", path, roles="reader")
    assert status == 200
    # The owner sees its own instance; of other projects' (a public
    # golden image), and of references that do not say, only that they
    # hold it.
    assert reply == {"image_id": "img-a", "references": [
        {"instance_id": "uuid-1", "disk": "disk"},
        {"instance_id": None, "disk": None},
        {"instance_id": None, "disk": None}]}
    walked = list(api.conductor.walked)
    refused = api("GET", path, project=BETA)
    missing = api("GET", "/v1/golden-images/img-z/references",
                  project=BETA)
    assert refused[0] == missing[0] == 404
    assert refused[1] == _renamed(missing[1], "img-z", "img-a")
    # Nobody made the conductor walk the DTN for an image they may not
    # see.
    assert api.conductor.walked == walked
    status, reply = api("GET", path, project=BETA,
                        roles="admin,member,reader")
    assert [(r["host"], r["instance_id"], r["project_id"])
            for r in reply["references"]] == [
        ("cn-1", "uuid-1", ALPHA), ("cn-2", "uuid-2", BETA),
        ("cn-2", "uuid-3", None)]
    assert api("GET", "/v1/golden-images/nope/references")[0] == 404


def test_the_policy_sample_lists_every_rule():
    names = {rule.name for rule in policies.list_rules()}
    assert {policies.MIGRATION_CREATE, policies.MIGRATION_LIST,
            policies.MIGRATION_LIST_ALL, policies.MIGRATION_SHOW,
            policies.MIGRATION_CANCEL, policies.SITE_LIST,
            policies.SITE_SHOW, policies.GOLDEN_REFERENCES,
            policies.GOLDEN_REFERENCE_HOSTS, policies.REPLICATION_CREATE,
            policies.REPLICATION_LIST, policies.REPLICATION_LIST_ALL,
            policies.REPLICATION_SHOW, policies.REPLICATION_UPDATE,
            policies.REPLICATION_DELETE} <= names


def _replicate(**fields):
    return {"replication": dict({"destination": "west"}, **fields)}


def test_a_member_makes_a_replication_policy_of_its_project(api):
    status, reply = api("POST", "/v1/replications",
                        body=_replicate(tag="golden", delete_follows=True))
    assert status == 201
    policy = reply["replication"]
    assert (policy["project_id"], policy["selector_kind"],
            policy["selector"], policy["delete_follows"]) == (
        ALPHA, "tag", {"tag": "golden"}, True)
    assert policy["links"][0]["href"].endswith(
        "/v1/replications/%s" % policy["id"])
    status, reply = api("POST", "/v1/replications", body=_replicate(
        property={"key": "os_distro", "value": "debian"}), project=BETA)
    assert reply["replication"]["selector"] == {"key": "os_distro",
                                                "value": "debian"}
    assert api("POST", "/v1/replications", body=_replicate(tag="x"),
               roles="reader")[0] == 403


@pytest.mark.parametrize("body,message", [
    (_replicate(), "Name exactly one of replication.tag, "
                   "replication.property, replication.images"),
    (_replicate(tag="a", images=["i"]), "Name exactly one of"),
    (_replicate(property={"key": "k"}),
     "Missing field replication.property.value"),
    (_replicate(tag="a", delete_follows="yes"),
     "Invalid field replication.delete_follows"),
    (_replicate(tag="a", every="1h"), "Unknown field replication.every"),
])
def test_bad_replication_bodies_are_400_naming_the_field(api, body,
                                                         message):
    status, fault = api("POST", "/v1/replications", body=body)
    assert status == 400
    assert fault["badRequest"]["message"].startswith(message)


def test_a_policy_is_its_projects_to_see_pause_and_delete(api):
    _, reply = api("POST", "/v1/replications", body=_replicate(tag="g"))
    path = "/v1/replications/%s" % reply["replication"]["id"]
    other = path.rsplit("/", 1)[0] + "/r-missing"
    for method, suffix in (("GET", ""), ("POST", "/pause"),
                           ("DELETE", "")):
        refused = api(method, path + suffix, project=BETA)
        missing = api(method, other + suffix, project=BETA)
        assert refused[0] == missing[0] == 404
        assert refused[1] == _renamed(missing[1], "r-missing",
                                      path.rsplit("/", 1)[1])
    assert api("GET", "/v1/replications", project=BETA)[1] == \
        {"replications": []}
    assert api("POST", path + "/pause", roles="reader")[0] == 403
    status, reply = api("POST", path + "/pause")
    assert (status, reply["replication"]["paused"]) == (200, True)
    status, reply = api("POST", path + "/resume")
    assert (status, reply["replication"]["paused"]) == (200, False)
    assert len(api("GET", "/v1/replications?all_projects=1",
                   project=BETA, roles="admin,member,reader")[1][
        "replications"]) == 1
    assert api("GET", "/v1/replications?all_projects=1")[0] == 403
    assert api("DELETE", path) == (204, None)
    status, fault = api("GET", path)
    assert (status, fault["itemNotFound"]["message"]) == (
        404, "No replication policy %s" % path.rsplit("/", 1)[1])


class _Trickle(io.RawIOBase):
    """A request body that is never all there: counts what was read."""

    def __init__(self, data):
        self.data = data
        self.read_bytes = 0

    def readable(self):
        return True

    def readinto(self, buffer):
        piece = self.data[self.read_bytes:self.read_bytes + len(buffer)]
        buffer[:len(piece)] = piece
        self.read_bytes += len(piece)
        return len(piece)


@pytest.mark.parametrize("headers", [
    {"Content-Length": str(1 << 30)},
    {"Transfer-Encoding": "chunked"},
])
def test_a_body_over_the_limit_is_refused_without_reading_it(api, headers):
    body = _Trickle(b"{" + b" " * (2 * app.MAX_BODY))
    request = webob.Request.blank("/v1/migrations", method="POST",
                                  headers=dict(headers, **{
                                      "X-Project-Id": ALPHA,
                                      "X-User-Id": "u-a", "X-Roles": "member",
                                      "X-Identity-Status": "Confirmed",
                                      "Content-Type": "application/json"}))
    request.environ["wsgi.input"] = body
    if "Content-Length" not in headers:
        request.environ.pop("CONTENT_LENGTH", None)
    reply = request.get_response(api.application)
    assert reply.status_int == 413
    assert json.loads(reply.body)["overLimit"]["message"] == (
        "The body is larger than %d bytes" % app.MAX_BODY)
    assert body.read_bytes <= app.MAX_BODY + 1
    assert api.conductor.calls == []


def test_requests_are_counted_and_timed_by_route(api):
    """The route label is the pattern, never an id from the path."""
    from prometheus_client import exposition

    from gvfs_openstack.api import metrics as api_metrics

    measured = api_metrics.RequestMetrics(api.application.router.route_of)
    wrapped = measured.wrap(api.application)
    for path in ("/v1/migrations", "/v1/migrations/%s" % UNKNOWN,
                 "/v1/no-such-thing"):
        request = webob.Request.blank(path, headers={
            "X-Project-Id": ALPHA, "X-User-Id": "u-a",
            "X-Roles": "member,reader", "X-Identity-Status": "Confirmed"})
        request.get_response(wrapped)
    text = exposition.generate_latest(measured.registry).decode()
    samples = metrics_samples.samples(text)
    assert samples[("gvfs_api_requests_total", (
        ("code", "200"), ("method", "GET"),
        ("route", "/v1/migrations")))] == 1
    assert samples[("gvfs_api_requests_total", (
        ("code", "404"), ("method", "GET"),
        ("route", "/v1/migrations/{id}")))] == 1
    assert samples[("gvfs_api_requests_total", (
        ("code", "404"), ("method", "GET"), ("route", "other")))] == 1
    assert samples[("gvfs_api_request_duration_seconds_count", (
        ("method", "GET"), ("route", "/v1/migrations")))] == 1
    assert UNKNOWN not in text
