# SPDX-License-Identifier: Apache-2.0
"""Placement for the lab: PyPI ``openstack-placement`` under gunicorn.

The scheduler asks it for hosts and nova-compute reports its inventory
there; it validates tokens with the lab's Keystone like any service.
"""

import os
import subprocess

from gvfs_lab import openstack_service as service
from gvfs_lab import process


class Placement:
    """Placement with its database, in ``region``'s catalog."""

    def __init__(self, workdir, keystone, database, region):
        os.makedirs(workdir, exist_ok=True)
        self.keystone = keystone
        self.app = None
        self.endpoints = []
        auth = service.service_user(keystone, "placement-service")
        config = service.write_ini(os.path.join(workdir, "placement.conf"), {
            "DEFAULT": {"log_file": os.path.join(workdir, "placement.log")},
            "api": {"auth_strategy": "keystone"},
            "placement_database": {"connection": database},
            "keystone_authtoken": service.authtoken(keystone, auth),
        })
        env = {"OS_PLACEMENT_CONFIG_DIR": workdir}
        result = subprocess.run(
            [service.program("placement-manage"), "--config-file", config,
             "db", "sync"], capture_output=True, text=True, timeout=300)
        if result.returncode:
            raise process.LabError("placement-manage db sync failed: %s"
                                   % result.stderr[-2000:])
        self.app = service.WsgiApp(workdir, "placement",
                                   "placement.wsgi.api:application", env)
        try:
            self.url = self.app.url
            self.endpoints = keystone.add_endpoint("placement", "placement",
                                                   self.url, region)
            self.app.wait()
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.app is not None:
            self.app.stop()
            self.app = None
        if self.endpoints:
            self.keystone.remove_endpoints(self.endpoints)
            self.endpoints = []
