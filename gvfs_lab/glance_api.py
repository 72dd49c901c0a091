# SPDX-License-Identifier: Apache-2.0
"""A real glance-api for the lab: PyPI ``glance`` under gunicorn.

glance 33 has no standalone ``glance-api`` program: the WSGI application
``glance.wsgi.api:application`` reads ``glance-api.conf`` from
``OS_GLANCE_CONFIG_DIR``.  The lab runs it as a deployment does, behind
``keystonemiddleware.auth_token`` (Glance's own paste pipeline, flavor
``keystone``) with the lab's real Keystone (:mod:`gvfs_lab.keystone`):
every request carries a token that Keystone issued and auth_token
validated, and Glance's policies see the user's real project and roles.
Each glance-api puts itself in Keystone's catalog in a region of its own
(several share one Keystone in a test session; the DR lab's two are its
two sites).
"""

import configparser
import contextlib
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

from gvfs_lab import keystone as keystone_lab
from gvfs_lab import process

#: Bytes per write of an upload's body (python-glanceclient's chunk).
UPLOAD_CHUNK = 64 * 1024


def _paste_ini(path):
    """Glance's shipped paste file, its healthcheck kept in the lab."""
    shipped = os.path.join(sys.prefix, "etc", "glance",
                           "glance-api-paste.ini")
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(shipped)
    if not parser.has_option("composite:api", "keystone"):
        raise process.LabError("glance's paste file with its keystone "
                               "pipeline not found at %s" % shipped)
    parser["app:healthcheck"]["disable_by_file_path"] = os.path.join(
        os.path.dirname(path), "healthcheck_disable")
    with open(path, "w") as f:
        parser.write(f)


class GlanceApi:
    """glance-api on ``127.0.0.1:port`` with ``backends``, behind Keystone.

    ``backends`` maps a store name to ``(type, {option: value})``, e.g.
    ``{"dtn": ("gvfs", {"gvfs_store_datadir": ...}), "local": ("file",
    {...})}``; the first is the default.  ``database`` is an SQLAlchemy
    URL (default: sqlite in ``workdir``, which serialises badly when
    several image imports run at once).

    ``keystone``: a started :class:`gvfs_lab.keystone.Keystone`; without
    one, this glance-api starts its own in ``workdir`` and stops it with
    itself.  Its endpoint goes into the catalog in ``region`` (default:
    a region named after its port).  ``user`` is the lab user whose
    token the helper calls below send (:meth:`create_image`,
    :meth:`upload`, :meth:`image`, ...); :meth:`openstack` runs the CLI
    as any user.
    """

    def __init__(self, workdir, backends, keystone=None, workers=2,
                 database=None, region=None, user="alpha-member"):
        self.workdir = workdir
        self.port = process.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.region = region or "glance-%d" % self.port
        self.user = user
        os.makedirs(workdir, exist_ok=True)
        self._own_keystone = keystone is None
        self.keystone = keystone or keystone_lab.Keystone(
            os.path.join(workdir, "keystone")).start()
        self._endpoints = []
        self.process = None
        try:
            self.config_dir = os.path.join(workdir, "etc")
            os.makedirs(self.config_dir, exist_ok=True)
            self._write_config(backends, database or "sqlite:///%s" % (
                os.path.join(workdir, "glance.sqlite")))
            self._db_sync()
            self.workers = workers
            self._start()
            self._endpoints = self.keystone.add_endpoint(
                "image", "glance", self.url, self.region)
            self._wait_healthy()
        except BaseException:
            self.stop()
            raise

    def _start(self):
        gunicorn = shutil.which("gunicorn") or os.path.join(
            os.path.dirname(sys.executable), "gunicorn")
        env = dict(os.environ, OS_GLANCE_CONFIG_DIR=self.config_dir)
        self.process = process.ManagedProcess(
            "glance-api", [gunicorn, "--bind", "127.0.0.1:%d" % self.port,
                           "--workers", str(self.workers), "--timeout", "600",
                           "--worker-class", "gthread", "--threads", "4",
                           "--keep-alive",
                           str(process.HTTP_KEEPALIVE_SECONDS),
                           "--control-socket",
                           os.path.join(self.workdir, "gunicorn.ctl"),
                           "glance.wsgi.api:application"],
            os.path.join(self.workdir, "glance-api.log"), env=env)

    def notifying(self, transport_url):
        """glance-api announcing its image events on ``transport_url``.

        As a deployment sets it (``[oslo_messaging_notifications] driver =
        messagingv2``); off again on the way out, before the bus it names
        goes away (a notifier whose broker is gone would hold up every
        request).
        """
        return self.reconfigured("oslo_messaging_notifications",
                                 driver="messagingv2",
                                 transport_url=transport_url)

    @contextlib.contextmanager
    def reconfigured(self, section, **options):
        """glance-api restarted with ``options`` set in ``section``.

        Restarted with its configuration as it was on the way out.
        """
        with open(self.config_file) as f:
            before = f.read()
        conf = configparser.ConfigParser(interpolation=None)
        conf.read_string(before)
        if section != "DEFAULT" and not conf.has_section(section):
            conf.add_section(section)
        for name, value in options.items():
            conf[section][name] = str(value)
        self._restart(conf)
        try:
            yield self
        finally:
            conf = configparser.ConfigParser(interpolation=None)
            conf.read_string(before)
            self._restart(conf)

    def _restart(self, conf):
        with open(self.config_file, "w") as f:
            conf.write(f)
        self.process.stop(timeout=30.0)
        self._start()
        self._wait_healthy()

    def _write_config(self, backends, database):
        names = list(backends)
        conf = configparser.ConfigParser(interpolation=None)
        conf["DEFAULT"] = {
            "enabled_backends": ",".join(
                "%s:%s" % (name, backends[name][0]) for name in names),
            "worker_self_reference_url": self.url,
            "enabled_import_methods":
                "[glance-direct,copy-image,glance-download]",
            "log_file": os.path.join(self.workdir, "glance.log"),
        }
        conf["glance_store"] = {"default_backend": names[0]}
        for name in names:
            conf[name] = {k: str(v) for k, v in backends[name][1].items()}
        for reserved in ("os_glance_staging_store", "os_glance_tasks_store"):
            path = os.path.join(self.workdir, reserved)
            os.makedirs(path, exist_ok=True)
            conf[reserved] = {"filesystem_store_datadir": path}
        conf["database"] = {"connection": database}
        paste = os.path.join(self.config_dir, "glance-api-paste.ini")
        _paste_ini(paste)
        conf["paste_deploy"] = {"config_file": paste, "flavor": "keystone"}
        conf["keystone_authtoken"] = self._authtoken()
        conf["oslo_policy"] = {"enforce_new_defaults": "true"}
        # Import and location-import tasks take external locks.
        conf["oslo_concurrency"] = {"lock_path": os.path.join(self.workdir,
                                                              "locks")}
        self.config_file = os.path.join(self.config_dir, "glance-api.conf")
        with open(self.config_file, "w") as f:
            conf.write(f)

    def _authtoken(self):
        """``[keystone_authtoken]``: the ``glance`` service user's.

        Tokens are validated with Keystone and cached in each worker's
        memory (no memcached); a service token (``X-Service-Token``, as
        Nova sends with a snapshot's location) must carry ``service``.
        """
        options = self.keystone.auth_options("glance")
        options.update({
            "www_authenticate_uri": self.keystone.auth_url,
            "service_token_roles": "service",
            "service_token_roles_required": "true",
            "region_name": keystone_lab.REGION,
        })
        return options

    def _db_sync(self):
        manage = shutil.which("glance-manage") or os.path.join(
            os.path.dirname(sys.executable), "glance-manage")
        result = subprocess.run(
            [manage, "--config-file", self.config_file, "db_sync"],
            capture_output=True, text=True, timeout=300)
        if result.returncode:
            raise process.LabError("glance-manage db_sync failed: %s"
                                   % result.stderr[-2000:])

    def _wait_healthy(self, timeout=120.0):
        def healthy():
            try:
                with urllib.request.urlopen(self.url + "/healthcheck",
                                            timeout=5) as reply:
                    return reply.status == 200
            except OSError:
                return False

        process.wait_until(healthy, "answering its healthcheck", timeout,
                           self.process, 0.2)

    def credentials(self, user=None):
        """The openrc (``OS_*``) of ``user`` for this glance-api's region."""
        return self.keystone.credentials(user or self.user, self.region)

    def token(self, user=None):
        """A Keystone token of ``user`` (default: :attr:`user`)."""
        return self.keystone.token(user or self.user)

    def openstack(self, *args, user=None, timeout=600):
        """Run the real ``openstack`` CLI as ``user``.

        The CLI logs in with the user's password and finds this
        glance-api in the catalog, by its region.
        """
        program = shutil.which("openstack") or os.path.join(
            os.path.dirname(sys.executable), "openstack")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("OS_")}
        env.update(self.credentials(user), OS_IMAGE_API_VERSION="2")
        return subprocess.run([program] + list(args), capture_output=True,
                              text=True, timeout=timeout, env=env)

    # --- the Images API v2, as its clients send it -------------------------

    def _request(self, path, method="GET", body=None, headers=None,
                 timeout=600, user=None, token=None):
        """urllib's answer, with ``user``'s token (HTTPError on >= 400)."""
        headers = dict(headers or {}, **{
            "X-Auth-Token": token or self.token(user)})
        return urllib.request.urlopen(urllib.request.Request(
            self.url + path, data=body, method=method, headers=headers),
            timeout=timeout)

    def create_image(self, name, disk_format="raw", user=None,
                     **attributes):
        """A queued image (with any other ``attributes``); its id."""
        body = json.dumps(dict({"name": name, "disk_format": disk_format,
                                "container_format": "bare"},
                               **attributes)).encode()
        with self._request("/v2/images", "POST", body, {
                "Content-Type": "application/json"}, user=user) as reply:
            return json.loads(reply.read())["id"]

    def import_from_glance(self, name, region, image_id, user=None):
        """Start Glance's ``glance-download`` of another Glance's image.

        A new image here that this glance-api fills by downloading
        ``image_id`` from the Glance of ``region`` (found in the caller's
        catalog); returns its id at once, as the API does.  The request
        carries a token issued now: its catalog (which the task reads) has
        the endpoints added since the session's token was checked.
        """
        new = self.create_image(name, user=user)
        body = json.dumps({"method": {
            "name": "glance-download", "glance_image_id": image_id,
            "glance_region": region,
            "glance_service_interface": "public"}}).encode()
        self._request("/v2/images/%s/import" % new, "POST", body, {
            "Content-Type": "application/json"},
            token=self.keystone.new_token(user or self.user)).close()
        return new

    def failed_import(self, image_id, user=None):
        """Why the image's last import task failed, or None."""
        with self._request("/v2/images/%s/tasks" % image_id,
                           user=user) as reply:
            tasks = json.loads(reply.read())["tasks"]
        failed = [t for t in tasks if t["status"] == "failure"]
        return failed[-1]["message"] if failed else None

    def image(self, image_id, user=None):
        """The image as the API returns it (hashes and stores included)."""
        with self._request("/v2/images/%s" % image_id, user=user) as reply:
            return json.loads(reply.read())

    def update(self, image_id, operations, user=None):
        """PATCH the image's attributes with JSON-patch ``operations``."""
        self._request("/v2/images/%s" % image_id, "PATCH",
                      json.dumps(operations).encode(), {
                          "Content-Type": "application/"
                          "openstack-images-v2.1-json-patch"},
                      user=user).close()

    def delete(self, image_id, user=None):
        self._request("/v2/images/%s" % image_id, "DELETE",
                      user=user).close()

    def members(self, image_id, user=None):
        """(member id, status) of each project the image is shared with."""
        with self._request("/v2/images/%s/members" % image_id,
                           user=user) as reply:
            return sorted((m["member_id"], m["status"])
                          for m in json.loads(reply.read())["members"])

    def share(self, image_id, member_id, status=None, user=None):
        """Share the image with project ``member_id``.

        And set its status: the admin may, for any member.
        """
        json_type = {"Content-Type": "application/json"}
        self._request("/v2/images/%s/members" % image_id, "POST",
                      json.dumps({"member": member_id}).encode(), json_type,
                      user=user).close()
        if status:
            self._request("/v2/images/%s/members/%s" % (image_id, member_id),
                          "PUT", json.dumps({"status": status}).encode(),
                          json_type, user=user).close()

    def upload(self, image_id, path, store=None, user=None):
        """PUT the file's bytes; the HTTP status, or the URLError.

        An HTTPError, or a reset when the server gave up mid-body.
        """
        headers = {"Content-Type": "application/octet-stream",
                   "Content-Length": str(os.path.getsize(path))}
        if store:
            headers["X-Image-Meta-Store"] = store
        with open(path, "rb") as f:
            # In 64 KiB chunks, as python-glanceclient sends a file: a
            # file object would go in urllib's 8 KiB blocks, which cost
            # this end some seconds of CPU a GiB.
            chunks = iter(lambda: f.read(UPLOAD_CHUNK), b"")
            try:
                with self._request("/v2/images/%s/file" % image_id, "PUT",
                                   chunks, headers, user=user) as reply:
                    return reply.status
            except urllib.error.URLError as e:
                return e

    def add_image(self, name, path, store=None, user=None, **attributes):
        """Create an image, upload ``path`` into it; the active image."""
        image_id = self.create_image(name, user=user, **attributes)
        status = self.upload(image_id, path, store=store, user=user)
        image = self.image(image_id, user=user)
        if status != 204 or image["status"] != "active":
            raise process.LabError("upload of %s into %s ended %s, the "
                                   "image is %s" % (path, store, status,
                                                    image["status"]))
        return image

    def download(self, image_id, chunk=1024 * 1024):
        """Read the image's bytes and drop them; how many there were."""
        size = 0
        with self._request("/v2/images/%s/file" % image_id) as reply:
            while data := reply.read(chunk):
                size += len(data)
        return size

    def stop(self):
        """Stop glance-api, take it out of the catalog; its exit status."""
        status = None
        if self.process is not None:
            status, self.process = self.process.stop(timeout=30.0), None
        if self._endpoints:
            self.keystone.remove_endpoints(self._endpoints)
            self._endpoints = []
        if self._own_keystone:
            self.keystone.stop()
        return status
