# SPDX-License-Identifier: Apache-2.0
"""A real glance-api for the lab: PyPI ``glance`` under gunicorn.

glance 33 has no standalone ``glance-api`` program: the WSGI application
``glance.wsgi.api:application`` reads ``glance-api.conf`` from
``OS_GLANCE_CONFIG_DIR``.  The lab runs it with a sqlite database and
without Keystone.  Glance's own unauthenticated pipeline gives requests
no project, which image import tasks need, so the lab's pipeline puts a
fixed identity (one project, admin and member roles, and the ``service``
role of a service token, which Nova's snapshots by location need) in
front of Glance's regular ``context`` filter instead -- the headers
keystonemiddleware would set after checking the tokens.
"""

import configparser
import json
import os
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

from tests.lab import process

PROJECT_ID = "0a1b2c3d4e5f40718293a4b5c6d7e8f9"
USER_ID = "9f8e7d6c5b4a40392817f6e5d4c3b2a1"
#: Bytes per write of an upload's body (python-glanceclient's chunk).
UPLOAD_CHUNK = 64 * 1024

_IDENTITY = {
    "HTTP_X_IDENTITY_STATUS": "Confirmed",
    "HTTP_X_PROJECT_ID": PROJECT_ID,
    "HTTP_X_USER_ID": USER_ID,
    "HTTP_X_ROLES": "admin,member,reader",
    "HTTP_X_SERVICE_ROLES": "service",
}


def fixed_identity_factory(global_conf, **local_conf):
    """Paste filter: every request is the lab's admin user."""

    def wrap(app):
        def middleware(environ, start_response):
            environ.update(_IDENTITY)
            return app(environ, start_response)
        return middleware
    return wrap


_PIPELINE = ("cors http_proxy_to_wsgi versionnegotiation fixedidentity "
             "context rootapp")


def _paste_ini(path):
    """Glance's shipped paste file with the lab's pipeline."""
    shipped = os.path.join(sys.prefix, "etc", "glance",
                           "glance-api-paste.ini")
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read(shipped)
    if not parser.has_section("composite:api"):
        raise process.LabError("glance's paste file not found at %s"
                               % shipped)
    parser["composite:api"]["default"] = _PIPELINE
    parser["filter:fixedidentity"] = {
        "paste.filter_factory": __name__ + ":fixed_identity_factory"}
    parser["app:healthcheck"]["disable_by_file_path"] = os.path.join(
        os.path.dirname(path), "healthcheck_disable")
    with open(path, "w") as f:
        parser.write(f)


class GlanceApi:
    """glance-api on ``127.0.0.1:port`` with ``backends``.

    ``backends`` maps a store name to ``(type, {option: value})``, e.g.
    ``{"dtn": ("gvfs", {"gvfs_store_datadir": ...}), "local": ("file",
    {...})}``; the first is the default.  ``database`` is an SQLAlchemy
    URL (default: sqlite in ``workdir``, which serialises badly when
    several image imports run at once).
    """

    def __init__(self, workdir, backends, workers=2, database=None):
        self.workdir = workdir
        self.port = process.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        os.makedirs(workdir, exist_ok=True)
        self.config_dir = os.path.join(workdir, "etc")
        os.makedirs(self.config_dir, exist_ok=True)
        self._write_config(backends, database or "sqlite:///%s" % (
            os.path.join(workdir, "glance.sqlite")))
        self._db_sync()
        gunicorn = shutil.which("gunicorn") or os.path.join(
            os.path.dirname(sys.executable), "gunicorn")
        env = dict(os.environ, OS_GLANCE_CONFIG_DIR=self.config_dir)
        self.process = process.ManagedProcess(
            "glance-api", [gunicorn, "--bind", "127.0.0.1:%d" % self.port,
                           "--workers", str(workers), "--timeout", "600",
                           "--worker-class", "gthread", "--threads", "4",
                           "--control-socket",
                           os.path.join(workdir, "gunicorn.ctl"),
                           "glance.wsgi.api:application"],
            os.path.join(workdir, "glance-api.log"), env=env)
        try:
            self._wait_healthy()
        except process.LabError:
            self.stop()
            raise

    def _write_config(self, backends, database):
        names = list(backends)
        conf = configparser.ConfigParser(interpolation=None)
        conf["DEFAULT"] = {
            "enabled_backends": ",".join(
                "%s:%s" % (name, backends[name][0]) for name in names),
            "worker_self_reference_url": self.url,
            "enabled_import_methods": "[glance-direct,copy-image]",
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
        conf["paste_deploy"] = {"config_file": paste}
        conf["oslo_policy"] = {"enforce_new_defaults": "true"}
        # Import and location-import tasks take external locks.
        conf["oslo_concurrency"] = {"lock_path": os.path.join(self.workdir,
                                                              "locks")}
        self.config_file = os.path.join(self.config_dir, "glance-api.conf")
        with open(self.config_file, "w") as f:
            conf.write(f)

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

    def openstack(self, *args, timeout=600):
        """Run the real ``openstack`` CLI against this glance-api."""
        program = shutil.which("openstack") or os.path.join(
            os.path.dirname(sys.executable), "openstack")
        return subprocess.run(
            [program, "--os-auth-type", "none", "--os-endpoint", self.url,
             "--os-image-api-version", "2"] + list(args),
            capture_output=True, text=True, timeout=timeout)

    # --- the Images API v2, as its clients send it -------------------------

    def _request(self, path, method="GET", body=None, headers=None,
                 timeout=600):
        return urllib.request.urlopen(urllib.request.Request(
            self.url + path, data=body, method=method,
            headers=headers or {}), timeout=timeout)

    def create_image(self, name, disk_format="raw", **attributes):
        """A queued image (with any other ``attributes``); its id."""
        body = json.dumps(dict({"name": name, "disk_format": disk_format,
                                "container_format": "bare"},
                               **attributes)).encode()
        with self._request("/v2/images", "POST", body, {
                "Content-Type": "application/json"}) as reply:
            return json.loads(reply.read())["id"]

    def image(self, image_id):
        """The image as the API returns it (hashes and stores included)."""
        with self._request("/v2/images/%s" % image_id) as reply:
            return json.loads(reply.read())

    def upload(self, image_id, path, store=None):
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
                                   chunks, headers) as reply:
                    return reply.status
            except urllib.error.URLError as e:
                return e

    def add_image(self, name, path, store=None, **attributes):
        """Create an image, upload ``path`` into it; the active image."""
        image_id = self.create_image(name, **attributes)
        status = self.upload(image_id, path, store=store)
        image = self.image(image_id)
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
        return self.process.stop(timeout=30.0)
