# SPDX-License-Identifier: Apache-2.0
"""gvfs-api behind the lab's real Keystone, with policy, in front of a real
gvfs-conductor on RabbitMQ and the two-site DR lab, driven by the real
``openstack`` CLI with each user's own credentials."""

import json
import os
import socket
import threading
import time
import urllib.error

from oslo_config import cfg
import oslo_messaging as messaging
import pytest

from gvfs_lab import drlab
from gvfs_lab import gvfs_api
from gvfs_lab import process
from gvfs_lab import rabbitmq
from gvfs_openstack.api import policies
from gvfs_openstack import exceptions
from gvfs_openstack.images import golden
from gvfs_openstack.migration import rpcapi
from gvfs_openstack.migration import states

MIB = 1024 * 1024


class Notifications:
    """What arrives on the bus's ``notifications`` topic."""

    def __init__(self):
        self.received = []
        self.lock = threading.Lock()

    def info(self, ctxt, publisher_id, event_type, payload, metadata):
        with self.lock:
            self.received.append((event_type, publisher_id, ctxt, payload))

    error = info

    def of(self, job_id):
        with self.lock:
            # Glance's own arrive too (image.send, ...): only jobs'.
            return [r for r in self.received if r[3].get("id") == job_id]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    broker = rabbitmq.RabbitMQ(str(tmp_path_factory.mktemp("rabbitmq")))
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def notified(broker):
    """A listener of the conductor's notifications, there before any job."""
    transport = messaging.get_notification_transport(cfg.CONF,
                                                     url=broker.url)
    recorder = Notifications()
    listener = messaging.get_notification_listener(
        transport, [messaging.Target(topic="notifications")], [recorder],
        executor="threading")
    listener.start()
    yield recorder
    listener.stop()
    listener.wait()
    transport.cleanup()


@pytest.fixture(scope="module")
def glance_notifying(dr, broker):
    """The source Glance announces its image events on the broker."""
    with dr.east.glance.notifying(broker.url):
        yield


@pytest.fixture(scope="module")
def conductor_workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("gvfs-api")


#: Seconds between the conductor's reconciliation rounds: Glance's
#: notifications start one at once in between.
ROUNDS_EVERY = 4


@pytest.fixture(scope="module")
def api(dr, keystone, broker, notified, glance_notifying, conductor_workdir):
    """gvfs-conductor and gvfs-api on a real RabbitMQ; yields the API."""
    with gvfs_api.conductor_and_api(dr, keystone, broker.url,
                                    str(conductor_workdir), {
            "replication": {"interval": str(ROUNDS_EVERY)},
            "oslo_messaging_notifications": {"driver": "messagingv2"}}) \
            as service:
        yield service


@pytest.fixture(scope="module")
def alpha_image(dr, keystone, tmp_path_factory):
    """A private image of project alpha at the source site."""
    path = tmp_path_factory.mktemp("alpha") / "alpha.raw"
    path.write_bytes(os.urandom(8 * MIB))
    return dr.east.glance.add_image(
        "alpha-private", path, drlab.FILE_STORE, visibility="private",
        owner=keystone.project_id("alpha"), hw_disk_bus="virtio")


def _ok(result):
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout) if result.stdout.strip() else None


def _refused(result, message):
    assert result.returncode == 1, result.stdout
    assert message in result.stderr, result.stderr


#: An id nothing has (an image id as Glance's schema wants one).
NO_SUCH_ID = "00000000-0000-4000-8000-00000000dead"


def _empty_body(an_id):
    return {}


#: No body at all (GET, DELETE).
_NO_BODY = None


def _as_if_missing(api, user, method, path, real_id, body=_NO_BODY):
    """A request refused to ``user`` as if ``real_id`` named nothing.

    ``{}`` in ``path`` stands for the id. Refused on ``real_id`` exactly as
    on an id that does not exist: the same status and the same error but
    for the id, and no answer says that another project's object exists, or
    whose it is. Asked of the REST API itself: the CLI only renders these
    answers (its rendering of them is tested on the owner's side), and two
    CLI runs per refusal cost CI some 12 s each. ``body``: a function of
    the id, giving the JSON body.
    """
    token = api.keystone.token(user)

    def ask(an_id):
        data = None if body is None else json.dumps(body(an_id))
        return api.request(method, path.format(an_id), token=token,
                           body=data)
    refused, missing = ask(real_id), ask(NO_SUCH_ID)
    assert refused[0] == missing[0] and refused[0] in (400, 404), refused
    said = json.dumps(refused[1])
    assert said == json.dumps(missing[1]).replace(NO_SUCH_ID, real_id)
    assert "project" not in said.lower(), said
    return said


@pytest.fixture(scope="module")
def alpha_job(api, alpha_image):
    """alpha's member migrates its own private image, and waits."""
    return _ok(api.openstack(
        "alpha-member", "gvfs", "migrate", alpha_image["id"], "--to",
        "west", "--wait", "--poll-interval", "0.2", "-f", "json"))


def test_a_member_migrates_its_own_private_image(dr, keystone, alpha_image,
                                                 alpha_job):
    assert alpha_job["state"] == states.DONE
    assert alpha_job["project_id"] == keystone.project_id("alpha")
    assert alpha_job["user_id"] == keystone.client().users.find(
        name="alpha-member").id
    # -f json keeps the images' structure.
    [image] = alpha_job["images"]
    assert image["image_id"] == alpha_image["id"]
    copy = dr.west.glance.image(alpha_image["id"])
    assert copy["owner"] == keystone.project_id("alpha")
    assert copy["visibility"] == "private"
    assert copy["hw_disk_bus"] == "virtio"
    assert (copy["os_hash_algo"], copy["os_hash_value"]) == (
        alpha_image["os_hash_algo"], alpha_image["os_hash_value"])


def test_a_shared_image_stays_shared_with_the_same_projects(
        api, dr, keystone, tmp_path):
    """Members follow the image, each with its status."""
    path = tmp_path / "shared.raw"
    path.write_bytes(os.urandom(4 * MIB))
    image = dr.east.glance.add_image(
        "alpha-shared", path, drlab.FILE_STORE, visibility="shared",
        owner=keystone.project_id("alpha"))
    beta = keystone.project_id("beta")
    dr.east.glance.share(image["id"], beta, "accepted")
    job = _ok(api.openstack(
        "alpha-member", "gvfs", "migrate", image["id"], "--to", "west",
        "--wait", "--poll-interval", "0.2", "-f", "json"))
    assert job["state"] == states.DONE, job
    copy = dr.west.glance.image(image["id"])
    assert (copy["visibility"], copy["owner"]) == (
        "shared", keystone.project_id("alpha"))
    assert dr.west.glance.members(image["id"]) == [(beta, "accepted")]
    # So beta's member sees the copy, as it saw the source.
    assert dr.west.glance.image(image["id"], user="beta-member")[
        "os_hash_value"] == image["os_hash_value"]


def _trusts_of(keystone, user):
    """The trusts ``user`` has delegated, as the admin sees them."""
    admin = keystone.session("admin")
    user_id = keystone.session(user).get_user_id()
    reply = admin.get("/OS-TRUST/trusts", endpoint_filter={
        "service_type": "identity", "interface": "public"})
    return [t for t in reply.json()["trusts"]
            if t["trustor_user_id"] == user_id]


def test_the_conductor_read_as_the_user_and_forgot_the_trust(
        api, keystone, alpha_job):
    with open(api.log) as f:
        assert "refused a trust" not in f.read()
    process.wait_until(lambda: not _trusts_of(keystone, "alpha-member"),
                       "the job's trust deleted", 60)


def test_the_bus_cannot_start_a_migration_for_another_project(
        api, broker, keystone, alpha_image, alpha_job):
    """A client on the message bus names alpha's project: refused.

    Without a trust, or with one that is not the named user's, the
    conductor would read alpha's images with its own authority.
    """
    transport = rpcapi.get_transport(cfg.CONF, url=broker.url)
    try:
        conductor = rpcapi.ConductorAPI(transport, timeout=30)
        beta = keystone.session("beta-member").get_user_id()
        forged = {"project_id": keystone.project_id("alpha"),
                  "user_id": beta}
        # Beta's own token, in beta's project: no trust, or not its own.
        as_beta = {"project_id": keystone.project_id("beta"),
                   "user_id": beta,
                   "auth_token": keystone.new_token("beta-member")}
        for trust_id in (None, "0123456789abcdef0123456789abcdef"):
            with pytest.raises(exceptions.CallerRefused):
                conductor.migrate(forged, [alpha_image["id"]], "west",
                                  trust_id=trust_id)
            with pytest.raises(exceptions.TrustRefused):
                conductor.migrate(as_beta, [alpha_image["id"]], "west",
                                  trust_id=trust_id)
    finally:
        transport.cleanup()
    status, listed = api.request("GET", "/v1/migrations?all_projects=1",
                                 token=keystone.token("admin"))
    assert status == 200
    assert not [job for job in listed["migrations"]
                if job.get("user_id") == beta]


def test_the_bus_cannot_read_or_cancel_another_projects_jobs(
        api, broker, keystone, alpha_job):
    """A client on the bus names alpha's project, or all of them.

    Without a token, with beta's own (valid) token, or with a made-up
    one, it reads nothing of alpha's and cancels nothing; Keystone
    decides who calls, not the context.
    """
    transport = rpcapi.get_transport(cfg.CONF, url=broker.url)
    alpha = keystone.session("alpha-member")
    beta = keystone.session("beta-member")
    beta_token = keystone.new_token("beta-member")
    as_alpha = {"project_id": keystone.project_id("alpha"),
                "user_id": alpha.get_user_id()}
    as_beta = {"project_id": keystone.project_id("beta"),
               "user_id": beta.get_user_id(), "auth_token": beta_token,
               "roles": ["admin"]}
    try:
        conductor = rpcapi.ConductorAPI(transport, timeout=30)
        for forged in (as_alpha, dict(as_alpha, auth_token=beta_token),
                       dict(as_alpha, auth_token="0" * 32)):
            for call in (conductor.show_job, conductor.cancel_job):
                with pytest.raises(exceptions.CallerRefused):
                    call(forged, alpha_job["id"])
            with pytest.raises(exceptions.CallerRefused):
                conductor.list_jobs(forged)
        # Beta's own token, its own project: alpha's job is missing and
        # every project's list needs the admin role the token lacks,
        # whatever roles the context claims.
        for call in (conductor.show_job, conductor.cancel_job):
            with pytest.raises(exceptions.JobNotFound):
                call(as_beta, alpha_job["id"])
        for project_id in (None, as_alpha["project_id"]):
            with pytest.raises(exceptions.CallerRefused,
                               match="admin role"):
                conductor.list_jobs(as_beta, project_id=project_id)
        assert conductor.list_jobs(
            as_beta, project_id=as_beta["project_id"]) == []
    finally:
        transport.cleanup()
    status, shown = api.request("GET", "/v1/migrations/%s" % alpha_job["id"],
                                token=keystone.token("alpha-member"))
    assert status == 200
    assert shown["migration"]["cancel_requested"] is False


def test_a_permissive_policy_still_cannot_read_another_projects_image(
        dr, keystone, broker, api, alpha_image, tmp_path):
    """Policy let through, Glance itself refuses the user's trust."""
    lax = gvfs_api.GvfsApi(str(tmp_path / "lax"), keystone, broker.url,
                           "lax-" + dr.east.glance.region,
                           policy={policies.MIGRATION_CREATE: ""})
    lax.start()
    try:
        status, fault = lax.request(
            "POST", "/v1/migrations", token=keystone.new_token(
                "beta-member"), body=json.dumps({"migration": {
                    "images": [alpha_image["id"]], "destination": "west"}}))
    finally:
        assert lax.stop() == 0
    assert status == 400, fault
    assert fault["badRequest"]["message"] == \
        "Image %s not found at site east" % alpha_image["id"]
    assert _trusts_of(keystone, "beta-member") == []


def test_the_job_is_announced_when_it_starts_and_ends(
        keystone, alpha_job, notified):
    process.wait_until(lambda: len(notified.of(alpha_job["id"])) == 2,
                       "the job's two notifications", 60)
    (start, publisher, ctxt, payload), end = notified.of(alpha_job["id"])
    assert start == "gvfs.migration.start"
    assert publisher == "gvfs-conductor.conductor-1"
    assert ctxt["project_id"] == keystone.project_id("alpha")
    assert end[0] == "gvfs.migration.end" and end[3]["state"] == states.DONE


def test_the_project_reads_its_jobs_and_others_are_refused(api, alpha_job):
    job_id = alpha_job["id"]
    shown = _ok(api.openstack("alpha-reader", "gvfs", "migration", "show",
                              job_id, "-f", "json"))
    assert shown["state"] == states.DONE
    listed = _ok(api.openstack("alpha-reader", "gvfs", "migration", "list",
                               "-f", "json"))
    assert job_id in [job["ID"] for job in listed]
    for action in ("show", "cancel"):
        method, path = {"show": ("GET", "/v1/migrations/{}"),
                        "cancel": ("POST", "/v1/migrations/{}/cancel")}[
                            action]
        said = _as_if_missing(
            api, "beta-member", method, path, job_id,
            body=_NO_BODY if method == "GET" else _empty_body)
        assert "No migration job %s" % job_id in said
    theirs = _ok(api.openstack("beta-member", "gvfs", "migration", "list",
                               "-f", "json"))
    assert job_id not in [job["ID"] for job in theirs]


def test_another_project_cannot_migrate_a_private_image(
        api, keystone, alpha_image):
    """Answered as a missing image, and no trust is made for it.

    The conductor answers beta's lookup of alpha's private image as a
    missing one (it holds calls to the token's project) before
    gvfs-api's policy is asked.
    """
    said = _as_if_missing(
        api, "beta-member", "POST", "/v1/migrations", alpha_image["id"],
        body=lambda an_id: {"migration": {"images": [an_id],
                                          "destination": "west"}})
    assert "Image %s not found" % alpha_image["id"] in said
    assert _trusts_of(keystone, "beta-member") == []


def test_a_reader_lists_but_cannot_migrate(api, alpha_image):
    _refused(api.openstack("alpha-reader", "gvfs", "migrate",
                           alpha_image["id"], "--to", "west"),
             "Policy does not allow gvfs:migration:create")
    _ok(api.openstack("alpha-reader", "gvfs", "migration", "list",
                      "-f", "json"))
    sites = _ok(api.openstack("alpha-reader", "gvfs", "site", "list",
                              "-f", "json"))
    assert {(s["Name"], s["Destination"]) for s in sites} == {
        ("east", False), ("west", True)}
    west = _ok(api.openstack("alpha-reader", "gvfs", "site", "show", "west",
                             "-f", "json"))
    assert (west["name"], west["local"], west["destination"]) == (
        "west", False, True)


def test_admin_sees_every_project_and_pages(api, keystone, alpha_job):
    everything = _ok(api.openstack("admin", "gvfs", "migration", "list",
                                   "--all-projects", "--long", "-f", "json"))
    assert alpha_job["id"] in [job["ID"] for job in everything]
    alpha = _ok(api.openstack("admin", "gvfs", "migration", "list",
                              "--project", keystone.project_id("alpha"),
                              "--long", "-f", "json"))
    assert {job["Project ID"] for job in alpha} == {
        keystone.project_id("alpha")}
    _refused(api.openstack("beta-member", "gvfs", "migration", "list",
                           "--all-projects"),
             "Policy does not allow gvfs:migration:list:all_projects")
    first = _ok(api.openstack("admin", "gvfs", "migration", "list",
                              "--all-projects", "--limit", "1", "-f",
                              "json"))
    assert len(first) == 1


def test_who_holds_a_golden_image_is_shown_to_its_project(
        api, dr, keystone, tmp_path):
    path = tmp_path / "golden.raw"
    path.write_bytes(os.urandom(4 * MIB))
    image = dr.east.glance.add_image(
        "alpha-golden", path, drlab.GVFS_STORE,
        owner=keystone.project_id("alpha"))
    instance = "6f1c2d9e-0b7a-4c1e-9a51-3d2f8e7c4b10"
    # Beta's instance on the same golden image (say, a public one).
    beta_instance = "0d3e5a7c-9b1f-4e2d-8c6a-5f4b3a2e1d0c"
    # What the Nova backend writes for an instance disk cloned from it.
    for server, project, host in (
            (instance, "alpha", "compute-7"),
            (beta_instance, "beta", "compute-8")):
        golden.hold(dr.east.images, image["id"], golden.holder_name(
            server, "disk", host=host,
            project_id=keystone.project_id(project)))
    refusal = dr.east.glance.openstack("image", "delete", image["id"],
                                       user="admin")
    assert refusal.returncode != 0
    seen = _ok(api.openstack("alpha-reader", "gvfs", "golden", "reference",
                             "list", image["id"], "-f", "json"))
    # Alpha learns that another disk holds it, not whose.
    assert sorted(seen, key=str) == sorted([
        {"Instance ID": instance, "Disk": "disk"},
        {"Instance ID": None, "Disk": None}], key=str)
    seen = _ok(api.openstack("admin", "gvfs", "golden", "reference", "list",
                             image["id"], "-f", "json"))
    assert sorted(seen, key=str) == sorted([
        {"Instance ID": instance, "Disk": "disk", "Host": "compute-7"},
        {"Instance ID": beta_instance, "Disk": "disk",
         "Host": "compute-8"}], key=str)
    said = _as_if_missing(api, "beta-member", "GET",
                          "/v1/golden-images/{}/references", image["id"])
    assert "Image %s not found" % image["id"] in said


def test_a_name_says_nothing_of_other_projects_images(api, dr, keystone,
                                                      tmp_path):
    """A name means the images the caller's project may see.

    Looked up with the conductor's own credentials, a name that an image
    of another project shares was answered "several images have this
    name": an oracle of other projects' image names.
    """
    path = tmp_path / "twin.raw"
    path.write_bytes(os.urandom(MIB))
    beta = keystone.project_id("beta")
    for name in ("dr-twin", "dr-beta-only"):
        dr.east.glance.add_image(name, path, drlab.GVFS_STORE, owner=beta,
                                 visibility="private")
    mine = dr.east.glance.add_image("dr-twin", path, drlab.GVFS_STORE,
                                    owner=keystone.project_id("alpha"))
    token = api.keystone.token("alpha-member")
    status, found = api.request(
        "GET", "/v1/golden-images/dr-twin/references", token=token)
    assert (status, found["image_id"]) == (200, mine["id"]), found
    said = _as_if_missing(api, "alpha-member", "GET",
                          "/v1/golden-images/{}/references", "dr-beta-only")
    assert "Image dr-beta-only not found" in said


def test_tokens_are_required_and_checked(api):
    assert api.request("GET", "/v1/migrations")[0] == 401
    assert api.request("GET", "/v1/migrations",
                       token="gAAAAAno-such-token")[0] == 401
    status, versions = api.request("GET", "/")
    assert status == 300 and versions["versions"][0]["id"] == "v1.0"
    assert api.request("GET", "/healthcheck")[0] == 200


@pytest.mark.parametrize("body,content_type,status,message", [
    ('{"migration": {"images": "x", "destination": "west"}}',
     "application/json", 400, "Invalid field migration.images"),
    ('{"migration": {"images": ["x"]}}', "application/json", 400,
     "Missing field migration.destination"),
    ('{"migration": {"images": ["x"], "destination": "west", "to": 1}}',
     "application/json", 400, "Unknown field migration.to"),
    ('{"migration": {"images": [], "destination": "west"}}',
     "application/json", 400, "Invalid field migration.images"),
    ('{"migration": {"images": ["x"], "destination": "west", '
     '"images_in_flight": 0}}', "application/json", 400,
     "Invalid field migration.images_in_flight"),
    ("{not json", "application/json", 400, "The body is not JSON"),
    ('{"migration": {}}', "text/plain", 415, "must be application/json"),
])
def test_malformed_bodies_are_refused_naming_the_field(
        api, keystone, body, content_type, status, message):
    got, fault = api.request("POST", "/v1/migrations",
                             token=keystone.token("alpha-member"),
                             body=body, content_type=content_type)
    assert got == status, fault
    [(_, detail)] = fault.items()
    assert detail["code"] == status
    assert message in detail["message"]


def test_a_body_claimed_too_large_is_refused_before_it_is_sent(
        api, keystone):
    """A client that says 1 GiB and sends nothing is answered at once.

    Before, gvfs-api read the whole body before it looked at its size:
    such a client held a thread, and the bytes it did send were held in
    memory, for as long as it liked.
    """
    request = ("POST /v1/migrations HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               "X-Auth-Token: %s\r\nContent-Type: application/json\r\n"
               "Content-Length: %d\r\n\r\n" % (
                   keystone.token("alpha-member"), 1 << 30))
    with socket.create_connection(("127.0.0.1", api.port),
                                  timeout=20) as conn:
        conn.sendall(request.encode())
        pieces = []
        while True:     # The server closes once it has answered.
            piece = conn.recv(65536)
            if not piece:
                break
            pieces.append(piece)
        reply = b"".join(pieces).decode(errors="replace")
    assert reply.startswith("HTTP/1.") and " 413 " in reply.split(
        "\r\n")[0], reply[:500]
    assert "The body is larger than" in reply


@pytest.mark.parametrize("args,message", [
    (["gvfs", "migrate", "alpha-private", "--to", "north"],
     "Unknown site north (configured sites: east, west)"),
    (["gvfs", "migrate", "no-such-image", "--to", "west"],
     "Image no-such-image not found at site east"),
    # Names that are paths reach no other API on Glance's host.
    (["gvfs", "migrate", "../../v3/users", "--to", "west"],
     "Image ../../v3/users not found at site east"),
    (["gvfs", "migrate", "../../healthcheck", "--to", "west"],
     "Image ../../healthcheck not found at site east"),
    (["gvfs", "migrate", "%2e%2e/%2e%2e/versions", "--to", "west"],
     "Image %2e%2e/%2e%2e/versions not found at site east"),
    (["gvfs", "migration", "show", "no-such-job"],
     "No migration job no-such-job"),
    (["gvfs", "migration", "cancel", "no-such-job"],
     "No migration job no-such-job"),
    (["gvfs", "site", "show", "north"], "No site north"),
])
def test_user_errors_are_one_clear_line(api, alpha_image, args, message):
    result = api.openstack("alpha-member", *args)
    assert result.returncode == 1
    assert result.stderr.strip() == message


def _capped_at_the_previous_version(api, image):
    token = api.keystone.token("alpha-member")
    status, listed = api.request("GET", "/v1/replications", token=token)
    assert status == 200, listed
    body = json.dumps({"migration": {"images": [image["id"]],
                                     "destination": "west",
                                     "base": image["id"]}})
    status, refused = api.request("POST", "/v1/migrations", token=token,
                                  body=body)
    assert status == 409, refused
    assert refused["conflictingRequest"]["message"] == (
        "A migration against a named base needs gvfs-conductor RPC 1.4; "
        "gvfs-api sends at most 1.3 ([upgrade_levels] conductor) while "
        "conductors are upgraded")


def test_restarting_gvfs_api_mid_job_loses_nothing(api, dr, keystone,
                                                   tmp_path):
    """gvfs-api restarted capped at the previous RPC version, mid-job.

    As in a rolling upgrade whose conductors are not all upgraded yet:
    the job goes on, calls the previous version carries are answered,
    and one that needs this release's is refused with the reason.
    """
    path = tmp_path / "restart.raw"
    path.write_bytes(os.urandom(64 * MIB))
    image = dr.east.glance.add_image(
        "alpha-restart", path, drlab.FILE_STORE,
        owner=keystone.project_id("alpha"))
    job = _ok(api.openstack("alpha-member", "gvfs", "migrate", image["id"],
                            "--to", "west", "-f", "json"))
    assert job["state"] not in states.FINISHED
    api.restart({"upgrade_levels": {"conductor": "1.3"}})
    try:
        _capped_at_the_previous_version(api, image)
    finally:
        api.restart({})
    token = api.keystone.token("alpha-member")

    def finished():
        status, body = api.request("GET", "/v1/migrations/%s" % job["id"],
                                   token=token)
        return status == 200 and body["migration"]["state"] in \
            states.FINISHED
    process.wait_until(finished, "the job's end", 300, interval=0.5)
    waited = _ok(api.openstack("alpha-member", "gvfs", "migration", "show",
                               job["id"], "-f", "json"))
    assert waited["state"] == states.DONE, waited
    assert dr.west.glance.image(image["id"])["os_hash_value"] == \
        image["os_hash_value"]


def test_gvfs_api_tells_systemd_and_rereads_its_configuration(
        dr, keystone, broker, api, tmp_path):
    """Under oslo.service's launcher: READY=1 on NOTIFY_SOCKET, SIGHUP."""
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.bind(str(tmp_path / "notify"))
    notify.settimeout(60)
    second = gvfs_api.GvfsApi(
        str(tmp_path / "second"), keystone, broker.url,
        "second-" + dr.east.glance.region, debug=False,
        env={"NOTIFY_SOCKET": str(tmp_path / "notify")})
    second.start()
    try:
        assert notify.recv(256) == b"READY=1"
        token = keystone.new_token("admin")

        def answers():
            try:   # The worker restarts with the new file: a moment down.
                return second.request("GET", "/v1/sites",
                                      token=token)[0] == 200
            except OSError:
                return False

        def logs_debug():
            with open(second.log) as f:
                return " DEBUG " in f.read()

        assert answers() and not logs_debug()
        second.reload(debug=True)
        process.wait_until(logs_debug, "debug logging after SIGHUP", 60)
        process.wait_until(answers, "the restarted worker answering", 60)
    finally:
        notify.close()
        assert second.stop() == 0


# --- replication policies ----------------------------------------------------

def _replicated(api, user, policy_id, done, what, timeout=300):
    """Wait until ``done(view)`` of the policy as ``user`` sees it.

    Asked of the REST API, whose view ``replication show -f json`` prints
    (the tests run that too): a CLI run costs seconds of start-up on CI's
    two cores, and a wait polls many times.
    """
    token = api.keystone.token(user)
    found = [None]

    def view():
        status, body = api.request("GET", "/v1/replications/%s" % policy_id,
                                   token=token)
        assert status == 200, body
        found[0] = body["replication"]
        return done(found[0])

    process.wait_until(view, what, timeout, interval=0.5)
    return found[0]


def _gone(glance, image_id):
    try:
        glance.image(image_id)
    except urllib.error.HTTPError as e:
        return e.code == 404
    return False


def test_a_tag_policy_copies_new_images_follows_properties_and_deletes(
        api, dr, keystone, tmp_path):
    policy = _ok(api.openstack(
        "alpha-member", "gvfs", "replication", "create", "--to", "west",
        "--tag", "dr-nightly", "--delete-follows", "--name", "nightly",
        "-f", "json"))
    assert (policy["selector"], policy["delete_follows"],
            policy["project_id"]) == ({"tag": "dr-nightly"}, True,
                                      keystone.project_id("alpha"))
    alpha = keystone.project_id("alpha")
    path = tmp_path / "nightly.raw"
    path.write_bytes(os.urandom(4 * MIB))
    # Made after the policy: one with the tag, one without.
    tagged = dr.east.glance.add_image(
        "nightly-1", path, drlab.FILE_STORE, owner=alpha,
        tags=["dr-nightly"], os_version="1")
    untagged = dr.east.glance.add_image("nightly-untagged", path,
                                        drlab.FILE_STORE, owner=alpha)
    view = _replicated(api, "alpha-member", policy["id"],
                       lambda v: v["images_in_sync"] == 1,
                       "the tagged image at west")
    assert view["recovery_point_seconds"] == 0
    assert view["bytes_moved"] == 4 * MIB
    assert [i["image_id"] for i in view["images"]] == [tagged["id"]]
    copy = dr.west.glance.image(tagged["id"])
    assert (copy["owner"], copy["os_hash_value"], copy["os_version"]) == (
        alpha, tagged["os_hash_value"], "1")
    assert _gone(dr.west.glance, untagged["id"])

    # A property change at the source follows.
    dr.east.glance.update(tagged["id"], [
        {"op": "replace", "path": "/os_version", "value": "2"}])
    process.wait_until(lambda: dr.west.glance.image(tagged["id"]).get(
        "os_version") == "2", "the property change at west", 60)

    # Paused, a new tagged image waits; resumed, it is copied.
    _ok(api.openstack("alpha-member", "gvfs", "replication", "pause",
                      policy["id"], "-f", "json"))
    later = dr.east.glance.add_image(
        "nightly-2", path, drlab.FILE_STORE, owner=alpha,
        tags=["dr-nightly"])
    time.sleep(ROUNDS_EVERY + 1)   # Its notification and a round.
    assert _gone(dr.west.glance, later["id"])
    _ok(api.openstack("alpha-member", "gvfs", "replication", "resume",
                      policy["id"], "-f", "json"))
    _replicated(api, "alpha-member", policy["id"],
                lambda v: v["images_in_sync"] == 2, "the second image")

    # A delete at the source follows (--delete-follows).
    dr.east.glance.delete(tagged["id"])
    process.wait_until(lambda: _gone(dr.west.glance, tagged["id"]),
                       "the copy's delete", 60)

    # Others neither see nor change the policy: to another project it
    # does not exist, its own reader may not pause it.
    for action in ("show", "pause", "delete"):
        method, path = {
            "show": ("GET", "/v1/replications/{}"),
            "pause": ("POST", "/v1/replications/{}/pause"),
            "delete": ("DELETE", "/v1/replications/{}")}[action]
        said = _as_if_missing(
            api, "beta-member", method, path, policy["id"],
            body=_empty_body if method == "POST" else _NO_BODY)
        assert "No replication policy %s" % policy["id"] in said
    _refused(api.openstack("alpha-reader", "gvfs", "replication", "pause",
                           policy["id"]), "not allow")
    listed = _ok(api.openstack("beta-member", "gvfs", "replication", "list",
                               "-f", "json"))
    assert policy["id"] not in [p["ID"] for p in listed]
    assert api.openstack("alpha-member", "gvfs", "replication", "delete",
                         policy["id"]).returncode == 0
    _refused(api.openstack("alpha-member", "gvfs", "replication", "show",
                           policy["id"]), "No replication policy")
    # The copies stay.
    assert dr.west.glance.image(later["id"])["status"] == "active"


def _heard(conductor_workdir, event, image_id):
    with open(conductor_workdir / "conductor.log") as f:
        return "%s of image %s" % (event, image_id) in f.read()


def test_glance_notifications_are_heard_and_a_lost_one_is_made_up_for(
        api, dr, keystone, conductor_workdir, tmp_path):
    policy = _ok(api.openstack(
        "alpha-member", "gvfs", "replication", "create", "--to", "west",
        "--tag", "dr-heard", "-f", "json"))
    alpha = keystone.project_id("alpha")
    path = tmp_path / "heard.raw"
    path.write_bytes(os.urandom(MIB))
    heard = dr.east.glance.add_image("heard", path, drlab.FILE_STORE,
                                     owner=alpha, tags=["dr-heard"])
    _replicated(api, "alpha-member", policy["id"],
                lambda v: v["images_in_sync"] == 1, "the first image")
    # Glance's own announcement reached the conductor (on Glance's
    # exchange, in the conductor's pool).
    assert _heard(conductor_workdir, "image.activate", heard["id"])

    # This one's announcement is lost (Glance does not send it).
    with dr.east.glance.reconfigured(
            "DEFAULT", disabled_notifications="image.activate"):
        lost = dr.east.glance.add_image("lost", path, drlab.FILE_STORE,
                                        owner=alpha, tags=["dr-heard"])
        # The next round finds it anyway.
        _replicated(api, "alpha-member", policy["id"],
                    lambda v: v["images_in_sync"] == 2, "the second image",
                    timeout=ROUNDS_EVERY * 3 + 120)
    assert not _heard(conductor_workdir, "image.activate", lost["id"])
    assert dr.west.glance.image(lost["id"])["os_hash_value"] == \
        lost["os_hash_value"]
    view = _ok(api.openstack("alpha-member", "gvfs", "replication", "show",
                             policy["id"], "-f", "json"))
    assert [i["sent_bytes"] for i in view["images"]] == [MIB, MIB]
    assert view["bytes_moved"] == 2 * MIB

    # Without --delete-follows a delete at the source stays there, however
    # many rounds pass.
    dr.east.glance.delete(heard["id"])
    process.wait_until(lambda: _heard(conductor_workdir, "image.delete",
                                      heard["id"]),
                       "the delete's notification", 60)
    before = _ok(api.openstack("alpha-member", "gvfs", "replication", "show",
                               policy["id"], "-f", "json"))["reconciled_at"]
    _replicated(api, "alpha-member", policy["id"],
                lambda v: v["reconciled_at"] != before, "another round",
                timeout=ROUNDS_EVERY * 3 + 60)
    assert dr.west.glance.image(heard["id"])["status"] == "active"
    # The policy forgot it; the copy is the recovery site's now.
    view = _ok(api.openstack("alpha-member", "gvfs", "replication", "show",
                             policy["id"], "-f", "json"))
    assert [i["image_id"] for i in view["images"]] == [lost["id"]]
