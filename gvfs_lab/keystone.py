# SPDX-License-Identifier: Apache-2.0
"""A real Keystone for the lab: PyPI ``keystone`` under gunicorn.

Glance checks every request's token with it (keystonemiddleware), the
``openstack`` CLI and the migration conductor get their tokens and the
Images API's address from it, as in a deployed cloud.  Everything it
writes -- its database, its fernet and credential key repositories, its
configuration and logs -- stays in its own directory:
``keystone-manage fernet_setup`` has been seen writing its first key
under ``/etc/keystone`` when the configuration did not reach it, so the
lab checks where the keys went.

Who is in it (:data:`USERS`): the cloud ``admin`` (``keystone-manage
bootstrap``), two projects ``alpha`` and ``beta`` each with a ``member``
and a ``reader`` user, and the ``service`` project with the services'
own users: ``glance`` (its ``auth_token`` middleware validates tokens
with it), ``nova`` (its service token goes beside users' tokens, as
Glance's location API requires of snapshots) and ``gvfs-conductor``
(the migration conductor; ``admin`` to read any project's image and to
make public ones at the destination, ``service`` for Glance's location
API).  Services register their
endpoints (:meth:`Keystone.add_endpoint`), each in a region of its own
when several of a type share one Keystone.

Start-up costs seconds: the database migration and the key
repositories are made by concurrent ``keystone-manage`` runs, and the
password hashes use bcrypt's fewest rounds (a lab has no passwords to
protect; the default rounds cost a quarter of a second per login).
"""

import configparser
import dataclasses
import grp
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import threading
import urllib.request

from keystoneauth1.identity import v3
from keystoneauth1 import session as ks_session
from keystoneclient.v3 import client as ks_client

from gvfs_lab import postgres
from gvfs_lab import process

DOMAIN = "Default"
#: The region of ``keystone-manage bootstrap``'s identity endpoint.
REGION = "RegionOne"


@dataclasses.dataclass(frozen=True)
class User:
    """A user of the lab's Keystone and the roles it has in its project."""

    name: str
    project: str
    roles: tuple


#: Everyone the lab's Keystone knows, by the name tests use.
USERS = {
    "admin": User("admin", "admin", ("admin",)),
    "alpha-member": User("alpha-member", "alpha", ("member",)),
    "alpha-reader": User("alpha-reader", "alpha", ("reader",)),
    "beta-member": User("beta-member", "beta", ("member",)),
    "beta-reader": User("beta-reader", "beta", ("reader",)),
    "glance": User("glance", "service", ("service",)),
    "nova": User("nova", "service", ("service",)),
    "gvfs-conductor": User("gvfs-conductor", "service",
                           ("admin", "service")),
    # gvfs-api's auth_token middleware validates tokens with it.
    "gvfs-api": User("gvfs-api", "service", ("service",)),
}


def _program(name):
    """A console script of this Python environment (or on the PATH)."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    return local if os.path.exists(local) else shutil.which(name) or local


class Keystone:
    """Keystone on ``127.0.0.1``, a free port, with :data:`USERS`.

    ``start()`` and ``stop()``, or use it as a context manager.  Once
    started: :attr:`auth_url`, :meth:`credentials` (the ``OS_*``
    variables of a user's openrc), :meth:`session` (a keystoneauth
    session of a user) and :meth:`add_endpoint`.
    """

    def __init__(self, workdir, workers=2):
        self.workdir = os.path.abspath(workdir)
        #: Its database server: a PostgreSQL of its own.  Keystone writes
        #: at every user's first login of a day (``last_active_at``), in
        #: a transaction that read first; two such logins at once on
        #: sqlite fail one of them at once with "database is locked",
        #: whatever the journal mode.
        self._postgres = None
        self.workers = workers
        self.port = None
        self.process = None
        # One password per user, new for every lab.
        self.passwords = {name: secrets.token_urlsafe(16) for name in USERS}
        #: Passwords of the service users the lab's clouds made (see
        #: :func:`gvfs_lab.openstack_service.service_user`).
        self.service_passwords = {}
        #: Held while a user, region or service is found or made: two
        #: clouds starting side by side (the DR lab's sites) would both
        #: find it missing and make it twice.
        self.catalog_lock = threading.RLock()
        self._sessions = {}

    @property
    def url(self):
        return "http://127.0.0.1:%d" % self.port

    @property
    def auth_url(self):
        """The Identity API v3 (``OS_AUTH_URL``)."""
        return self.url + "/v3"

    # --- lifecycle --------------------------------------------------------

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        self.port = process.free_port()
        self._postgres = postgres.PostgreSQL(
            os.path.join(self.workdir, "postgres"))
        try:
            self.config_file = self._write_config(
                self._postgres.database("keystone"))
            self._manage_concurrently(
                ["db_sync"], self._key_setup("fernet_setup"),
                self._key_setup("credential_setup"))
            self._check_keys()
            # Keystone parses the process's command line as its own (it
            # expects mod_wsgi or uwsgi): gunicorn's options come from a
            # configuration file named in the environment, not from argv.
            self.process = process.ManagedProcess(
                "keystone", [_program("gunicorn")],
                os.path.join(self.workdir, "gunicorn.log"),
                env=dict(os.environ,
                         OS_KEYSTONE_CONFIG_FILES=self.config_file,
                         GUNICORN_CMD_ARGS="--config %s"
                         % self._gunicorn_conf()))
            # The workers load while bootstrap fills the database.
            self._manage_concurrently(self._bootstrap())
            process.wait_until(self._answers, "answering on /v3", 120,
                               self.process, 0.1)
            self._populate()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        """Stop gunicorn and its workers (by the arbiter's PID).

        Then its database.
        """
        status = None
        if self.process is not None:
            for sess in self._sessions.values():
                sess.session.close()
            self._sessions.clear()
            status, self.process = self.process.stop(timeout=30.0), None
        if self._postgres is not None:
            self._postgres.stop()
            self._postgres = None
        return status

    # --- setting up -------------------------------------------------------

    def _write_config(self, database_url):
        conf = configparser.ConfigParser(interpolation=None)
        conf["DEFAULT"] = {
            "log_file": os.path.join(self.workdir, "keystone.log"),
        }
        conf["database"] = {"connection": database_url}
        conf["token"] = {"provider": "fernet",
                         # Benchmarks run for hours; clients re-authenticate
                         # when a token nears its end anyway.
                         "expiration": str(8 * 3600)}
        for group, directory in (("fernet_tokens", "fernet-keys"),
                                 ("fernet_receipts", "fernet-keys"),
                                 ("credential", "credential-keys")):
            conf[group] = {"key_repository": os.path.join(self.workdir,
                                                          directory)}
        conf["identity"] = {"password_hash_rounds": "4"}
        path = os.path.join(self.workdir, "keystone.conf")
        with open(path, "w") as f:
            conf.write(f)
        return path

    def _gunicorn_conf(self):
        path = os.path.join(self.workdir, "gunicorn.conf.py")
        with open(path, "w") as f:
            f.write("wsgi_app = %r\nbind = %r\nworkers = %d\n"
                    "worker_class = 'gthread'\nthreads = 4\ntimeout = 120\n"
                    "keepalive = %d\n"
                    % ("keystone.wsgi.api:application",
                       "127.0.0.1:%d" % self.port, self.workers,
                       process.HTTP_KEEPALIVE_SECONDS))
        return path

    def _key_setup(self, command):
        """``fernet_setup`` or ``credential_setup`` as the current user."""
        return [command,
                "--keystone-user", pwd.getpwuid(os.getuid()).pw_name,
                "--keystone-group", grp.getgrgid(os.getgid()).gr_name]

    def _bootstrap(self):
        return ["bootstrap",
                "--bootstrap-username", "admin",
                "--bootstrap-project-name", "admin",
                "--bootstrap-role-name", "admin",
                "--bootstrap-region-id", REGION,
                "--bootstrap-admin-url", self.auth_url,
                "--bootstrap-internal-url", self.auth_url,
                "--bootstrap-public-url", self.auth_url]

    def _manage_concurrently(self, *commands):
        """Run ``keystone-manage`` commands at once; LabError if one fails.

        The bootstrap password goes in the environment, not the argv.
        """
        env = dict(os.environ, OS_BOOTSTRAP_PASSWORD=self.passwords["admin"])
        running = []
        for command in commands:
            log_path = os.path.join(self.workdir,
                                    "keystone-manage-%s.log" % command[0])
            with open(log_path, "wb") as log:
                running.append((command[0], log_path, subprocess.Popen(
                    [_program("keystone-manage"), "--config-file",
                     self.config_file] + command, stdout=log,
                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    env=env)))
        failed = []
        for name, log_path, popen in running:
            try:
                code = popen.wait(timeout=300)
            except subprocess.TimeoutExpired:
                popen.kill()
                code = popen.wait()
            if code:
                with open(log_path, errors="replace") as log:
                    failed.append("%s (status %s): %s" % (
                        name, code, log.read()[-2000:]))
        if failed:
            raise process.LabError("keystone-manage failed: %s"
                                   % "; ".join(failed))

    def _check_keys(self):
        """Both key repositories hold their first keys, in the lab."""
        for directory in ("fernet-keys", "credential-keys"):
            path = os.path.join(self.workdir, directory)
            keys = sorted(os.listdir(path)) if os.path.isdir(path) else []
            if keys[:2] != ["0", "1"]:
                raise process.LabError(
                    "keystone-manage did not write its keys into %s (found "
                    "%s): it read another configuration than %s"
                    % (path, keys or "nothing", self.config_file))

    def _answers(self):
        try:
            with urllib.request.urlopen(self.auth_url, timeout=5) as reply:
                return reply.status == 200
        except OSError:
            return False

    def _populate(self):
        """Projects, users and role assignments of :data:`USERS`."""
        admin = self.client()
        roles = {role.name: role for role in admin.roles.list()}
        domain = admin.domains.find(name=DOMAIN)
        projects = {project.name: project
                    for project in admin.projects.list()}
        for user in USERS.values():
            if user.name == "admin":
                continue    # bootstrap's
            if user.project not in projects:
                projects[user.project] = admin.projects.create(
                    user.project, domain,
                    description="made by the lab's Keystone")
            created = admin.users.create(
                user.name, domain=domain, password=self.passwords[user.name],
                default_project=projects[user.project])
            for role in user.roles:
                admin.roles.grant(roles[role], user=created,
                                  project=projects[user.project])

    # --- for the lab's services and clients -------------------------------

    def credentials(self, user, region=None):
        """The ``OS_*`` variables of ``user``'s openrc (a dict).

        ``region``: the region whose endpoints the client should use.
        """
        if user not in USERS:
            raise process.LabError("no user %r in the lab's Keystone (it "
                                   "has %s)" % (user, ", ".join(USERS)))
        env = {
            "OS_AUTH_TYPE": "password",
            "OS_AUTH_URL": self.auth_url,
            "OS_IDENTITY_API_VERSION": "3",
            "OS_USERNAME": user,
            "OS_PASSWORD": self.passwords[user],
            "OS_PROJECT_NAME": USERS[user].project,
            "OS_USER_DOMAIN_NAME": DOMAIN,
            "OS_PROJECT_DOMAIN_NAME": DOMAIN,
            "OS_INTERFACE": "public",
        }
        if region:
            env["OS_REGION_NAME"] = region
        return env

    def auth_options(self, user):
        """``user``'s keystoneauth options, as in a configuration group.

        ``auth_type = password``, ``auth_url``, ``username`` and the rest.
        """
        env = self.credentials(user)
        return {"auth_type": "password", "auth_url": env["OS_AUTH_URL"],
                "username": user, "password": env["OS_PASSWORD"],
                "project_name": env["OS_PROJECT_NAME"],
                "user_domain_name": DOMAIN, "project_domain_name": DOMAIN}

    def session(self, user):
        """A keystoneauth session of ``user`` (one per user, reused)."""
        if user not in self._sessions:
            options = self.auth_options(user)
            del options["auth_type"]
            self._sessions[user] = ks_session.Session(
                auth=v3.Password(**options))
        return self._sessions[user]

    def token(self, user):
        """A token of ``user`` (valid for hours)."""
        return self.session(user).get_token()

    def new_token(self, user):
        """A fresh token of ``user``, issued now (not a session's)."""
        options = self.auth_options(user)
        del options["auth_type"]
        return ks_session.Session(auth=v3.Password(**options)).get_token()

    def project_id(self, name):
        """The id of the project ``name``."""
        return self.client().projects.find(name=name).id

    def client(self, user="admin"):
        """python-keystoneclient's Identity API v3 client, as ``user``."""
        return ks_client.Client(session=self.session(user),
                                interface="public")

    def add_endpoint(self, service_type, name, url, region):
        """Put ``url`` in the catalog for ``service_type`` in ``region``.

        As its public and internal endpoints; the region and the service
        are made when missing.

        Returns the endpoints' ids, for :meth:`remove_endpoints`.
        """
        admin = self.client()
        with self.catalog_lock:
            regions = {r.id for r in admin.regions.list()}
            if region not in regions:
                admin.regions.create(id=region)
            services = admin.services.list(type=service_type)
            service = services[0] if services else admin.services.create(
                name, type=service_type)
        return [admin.endpoints.create(service, url, interface=interface,
                                       region=region).id
                for interface in ("public", "internal")]

    def remove_endpoints(self, endpoint_ids):
        """Take endpoints out of the catalog (a stopped service's)."""
        if self.process is None:
            return
        admin = self.client()
        for endpoint_id in endpoint_ids:
            admin.endpoints.delete(endpoint_id)
