# SPDX-License-Identifier: Apache-2.0
"""gvfs-api for the lab: the ``gvfs-api`` program with the lab's Keystone.

It validates tokens with :mod:`gvfs_lab.keystone` (its own service user
``gvfs-api``), calls the conductor over the lab's RabbitMQ, and puts
itself in the catalog under service type ``gvfs`` in ``region``, where
the ``openstack`` CLI finds it with a user's credentials.
"""

import configparser
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request

from gvfs_lab import keystone as keystone_lab
from gvfs_lab import process

SERVICE_TYPE = "gvfs"
#: The Keystone user the lab's gvfs-conductor authenticates as
#: (``drlab.CONDUCTOR``): whom users' trusts name.
TRUSTEE = "gvfs-conductor"


def _program(name):
    return os.path.join(os.path.dirname(sys.executable), name)


class GvfsApi:
    """``gvfs-api`` on ``127.0.0.1``, a free port; ``start()``/``stop()``."""

    def __init__(self, workdir, keystone, transport_url, region,
                 policy=None, env=None, debug=True):
        self.workdir = workdir
        self.keystone = keystone
        self.transport_url = transport_url
        self.region = region
        self.policy = policy
        self.env = env
        self.debug = debug
        #: More sections of the configuration, ``{section: {option:
        #: value}}`` (``[upgrade_levels]``).
        self.sections = {}
        self.port = process.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.config_file = os.path.join(workdir, "gvfs-api.conf")
        self.log = os.path.join(workdir, "gvfs-api.log")
        self.process = None
        self._endpoints = []
        os.makedirs(workdir, exist_ok=True)

    def _write_config(self):
        conf = configparser.ConfigParser(interpolation=None)
        conf["DEFAULT"] = {"transport_url": self.transport_url,
                           "debug": str(self.debug).lower()}
        conf["api"] = {"host_ip": "127.0.0.1", "port": str(self.port),
                       "rpc_timeout": "30",
                       "trustee_user_id": self.keystone.session(
                           TRUSTEE).get_user_id()}
        authtoken = self.keystone.auth_options("gvfs-api")
        authtoken.update({"www_authenticate_uri": self.keystone.auth_url,
                          "region_name": keystone_lab.REGION})
        conf["keystone_authtoken"] = authtoken
        conf["oslo_policy"] = {"enforce_scope": "true",
                               "enforce_new_defaults": "true"}
        if self.policy:
            path = os.path.join(self.workdir, "policy.yaml")
            with open(path, "w") as f:
                f.writelines('"%s": "%s"\n' % rule
                             for rule in self.policy.items())
            conf["oslo_policy"]["policy_file"] = path
        for section, options in self.sections.items():
            conf[section] = options
        with open(self.config_file, "w") as f:
            conf.write(f)

    def start(self):
        self._write_config()
        self.process = process.ManagedProcess(
            "gvfs-api", [_program("gvfs-api"), "--config-file",
                         self.config_file], self.log, env=self.env)
        process.wait_until(self._healthy, "gvfs-api answering", 60,
                           self.process, 0.1)
        if not self._endpoints:
            self._endpoints = self.keystone.add_endpoint(
                SERVICE_TYPE, "gvfs", self.url, self.region)
        return self

    def _healthy(self):
        try:
            with urllib.request.urlopen(self.url + "/healthcheck",
                                        timeout=5) as reply:
                return reply.status == 200
        except OSError:
            return False

    def reload(self, debug):
        """Change ``[DEFAULT] debug`` in the file and SIGHUP gvfs-api."""
        self.debug = debug
        self._write_config()
        self.process.signal(signal.SIGHUP)

    def restart(self, sections=None):
        """Stop gvfs-api and start it again on the same port.

        ``sections``: its configuration's further sections from now on.
        """
        self.process.stop(timeout=30)
        if sections is not None:
            self.sections = sections
        self.start()

    def openstack(self, user, *args, timeout=300):
        """The real ``openstack`` CLI as ``user``, in this API's region."""
        program = shutil.which("openstack") or _program("openstack")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("OS_")}
        env.update(self.keystone.credentials(user, self.region))
        return subprocess.run([program] + list(args), capture_output=True,
                              text=True, timeout=timeout, env=env)

    def request(self, method, path, token=None, body=None,
                content_type="application/json"):
        """(status, parsed JSON) of a raw request with ``token``."""
        headers = {"Content-Type": content_type}
        if token:
            headers["X-Auth-Token"] = token
        data = body if isinstance(body, (bytes, type(None))) else \
            body.encode()
        request = urllib.request.Request(self.url + path, data=data,
                                         method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                return reply.status, _json(reply.read())
        except urllib.error.HTTPError as e:
            return e.code, _json(e.read())

    def stop(self):
        status = None
        if self.process is not None:
            status, self.process = self.process.stop(timeout=30), None
        if self._endpoints:
            self.keystone.remove_endpoints(self._endpoints)
            self._endpoints = []
        return status


class Conductor:
    """``gvfs-conductor`` of a :class:`gvfs_lab.drlab.DrLab`'s sites.

    Its jobs in sqlite in ``workdir``, on the broker at
    ``transport_url``; ``sections``: more of its configuration,
    ``{section: {option: value}}``.
    """

    def __init__(self, dr, workdir, transport_url, sections=None):
        self.config_file = dr.conductor_config(
            os.path.join(workdir, "conductor.conf"),
            "sqlite:///%s" % os.path.join(workdir, "jobs.sqlite"),
            transport_url=transport_url, host="conductor-1")
        conf = configparser.ConfigParser(interpolation=None)
        conf.read(self.config_file)
        for section, options in (sections or {}).items():
            conf[section] = options
        with open(self.config_file, "w") as f:
            conf.write(f)
        self.log = os.path.join(workdir, "conductor.log")
        # As a deployment does: the conductor refuses an unsynced store.
        synced = subprocess.run(
            [_program("gvfs-manage"), "--config-file", self.config_file,
             "db", "sync"], capture_output=True, text=True, timeout=300)
        if synced.returncode:
            raise process.LabError("gvfs-manage db sync failed: %s"
                                   % synced.stderr[-2000:])
        self.process = process.ManagedProcess(
            "gvfs-conductor", [_program("gvfs-conductor"), "--config-file",
                               self.config_file], self.log)

    def stop(self):
        """Its exit status (idle, its listener polls every 5 s)."""
        return self.process.stop(timeout=60)


@contextlib.contextmanager
def conductor_and_api(dr, keystone, transport_url, workdir, sections=None,
                      api_sections=None):
    """The conductor of ``dr``'s sites and gvfs-api of east; the API.

    ``sections`` and ``api_sections``: more of their configurations.
    Both stopped at the end, each required to exit cleanly.
    """
    conductor = Conductor(dr, workdir, transport_url, sections)
    service = GvfsApi(os.path.join(workdir, "api"), keystone,
                      transport_url, dr.east.glance.region)
    service.sections = dict(api_sections or {})
    try:
        yield service.start()
    finally:
        stopped = service.stop(), conductor.stop()
        if stopped != (0, 0):
            raise process.LabError(
                "gvfs-api and gvfs-conductor exited %s and %s, not cleanly"
                % stopped)


def _json(data):
    try:
        return json.loads(data)
    except ValueError:
        return data.decode(errors="replace")
