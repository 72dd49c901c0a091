# SPDX-License-Identifier: Apache-2.0
"""What the lab's OpenStack services share: a WSGI app under gunicorn,
a service user in the lab's Keystone, an ``ini`` file.

Placement, nova-api and neutron's API parse the process's command line
as their own (they expect mod_wsgi or uwsgi), so gunicorn takes its
options from a configuration file named in ``GUNICORN_CMD_ARGS``, as
:mod:`gvfs_lab.keystone` does.
"""

import configparser
import os
import secrets
import shutil
import sys
import urllib.request

from gvfs_lab import keystone as keystone_lab
from gvfs_lab import process


def program(name):
    """A console script of this Python environment (or on the PATH)."""
    local = os.path.join(os.path.dirname(sys.executable), name)
    return local if os.path.exists(local) else shutil.which(name) or local


def write_ini(path, sections):
    """Write ``{section: {option: value}}`` as an ini file; its path."""
    parser = configparser.ConfigParser(interpolation=None)
    for section, values in sections.items():
        parser[section] = {k: str(v) for k, v in values.items()}
    with open(path, "w") as f:
        parser.write(f)
    return path


def service_user(keystone, name, roles=("admin", "service")):
    """``name`` in the ``service`` project; its keystoneauth options.

    Made unless the lab's Keystone has it: a second cloud of this
    Keystone (the DR lab's two sites, or a later test module) shares the
    user and its password, so that the first cloud's services keep
    logging in.  Nova's and neutron's
    service users need ``admin`` (they read any project's ports and
    place allocations); ``service`` marks their service tokens.
    """
    if name in keystone_lab.USERS:
        raise process.LabError("%s is a user of gvfs_lab.keystone: give "
                               "the service user another name" % name)
    admin = keystone.client()
    with keystone.catalog_lock:
        domain = admin.domains.find(name=keystone_lab.DOMAIN)
        project = admin.projects.find(name="service")
        found = admin.users.list(name=name, domain=domain)
        password = keystone.service_passwords.get(name)
        if found and password is None:
            # Made by a lab of another run: its password is not known here.
            password = secrets.token_urlsafe(16)
            user = admin.users.update(found[0], password=password)
        elif found:
            user = found[0]
        else:
            password = secrets.token_urlsafe(16)
            user = admin.users.create(name, domain=domain, password=password,
                                      default_project=project)
        keystone.service_passwords[name] = password
        for role in roles:
            admin.roles.grant(admin.roles.find(name=role), user=user,
                              project=project)
    return {"auth_type": "password", "auth_url": keystone.auth_url,
            "username": name, "password": password,
            "project_name": "service",
            "user_domain_name": keystone_lab.DOMAIN,
            "project_domain_name": keystone_lab.DOMAIN}


def authtoken(keystone, auth):
    """``[keystone_authtoken]`` of a service whose user is ``auth``."""
    return dict(auth, www_authenticate_uri=keystone.auth_url,
                region_name=keystone_lab.REGION,
                service_token_roles_required="true")


class WsgiApp:
    """``app`` (``module:attribute``) under gunicorn on a free port."""

    def __init__(self, workdir, name, app, env, workers=1, threads=4,
                 health_path="/"):
        self.name = name
        self.port = process.free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        conf = os.path.join(workdir, name + "-gunicorn.conf.py")
        with open(conf, "w") as f:
            f.write("wsgi_app = %r\nbind = %r\nworkers = %d\n"
                    "worker_class = 'gthread'\nthreads = %d\n"
                    "timeout = 300\nkeepalive = %d\n"
                    % (app, "127.0.0.1:%d" % self.port, workers, threads,
                       process.HTTP_KEEPALIVE_SECONDS))
        self.process = process.ManagedProcess(
            name, [program("gunicorn")],
            os.path.join(workdir, name + ".log"),
            env=dict(os.environ, GUNICORN_CMD_ARGS="--config %s" % conf,
                     **env))
        self.health_path = health_path

    def answers(self):
        """Whether anything answers HTTP (any status) at the health path."""
        try:
            with urllib.request.urlopen(self.url + self.health_path,
                                        timeout=5):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def wait(self, timeout=180.0):
        process.wait_until(self.answers, "%s answering" % self.name,
                           timeout, self.process, 0.2)

    def stop(self):
        return self.process.stop(timeout=30.0)
