# SPDX-License-Identifier: Apache-2.0
"""neutron's API for the lab: PyPI ``neutron`` under gunicorn, no agents.

Nova 34 without Neutron does not cope even with servers created with
``--nic none``: showing a server lists its ports for its security groups
(``get_instances_security_groups_bindings``) and deleting it lists its
ports to delete them (``deallocate_for_instance``); without a
``network`` endpoint both fail.  So the lab runs the real Networking
API, ML2 with no mechanism driver: it answers those calls (no ports),
and nothing in the lab ever binds a port.

Its database is sqlite with the schema made from Neutron's models, as
Neutron's own tests make it: Neutron's migrations need MySQL or
MariaDB (they fail on PostgreSQL -- ``CONVERT`` -- and on sqlite, which
cannot alter constraints), and the lab has neither.
"""

import os
import subprocess
import sys
import urllib.request

from gvfs_lab import openstack_service as service
from gvfs_lab import process

_CREATE_SCHEMA = """
import sys
import sqlalchemy
from neutron.db.migration.models import head
head.get_metadata().create_all(sqlalchemy.create_engine(sys.argv[1]))
"""


class Neutron:
    """neutron-api with ML2 and no agents, in ``region``'s catalog."""

    def __init__(self, workdir, keystone, transport_url, region):
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.keystone = keystone
        self.app = None
        auth = service.service_user(keystone, "neutron-service")
        database = "sqlite:///%s" % os.path.join(workdir, "neutron.sqlite")
        self.config_file = service.write_ini(
            os.path.join(workdir, "neutron.conf"), {
                # Listing ports needs the port forwarding model loaded
                # (Port.port_forwardings): its plugin, which needs the
                # router plugin.
                "DEFAULT": {"core_plugin": "ml2",
                            "service_plugins": "router,port_forwarding",
                            "auth_strategy": "keystone",
                            "transport_url": transport_url,
                            "log_file": os.path.join(workdir,
                                                     "neutron.log"),
                            "notify_nova_on_port_status_changes": "false",
                            "notify_nova_on_port_data_changes": "false",
                            "api_workers": "1", "rpc_workers": "0",
                            "api_paste_config": os.path.join(
                                sys.prefix, "etc", "neutron",
                                "api-paste.ini")},
                "database": {"connection": database},
                "keystone_authtoken": service.authtoken(keystone, auth),
                "oslo_concurrency": {"lock_path": os.path.join(
                    workdir, "locks")},
                "ml2": {"type_drivers": "flat", "tenant_network_types": "",
                        "mechanism_drivers": "", "extension_drivers": ""},
            })
        result = subprocess.run(
            [sys.executable, "-c", _CREATE_SCHEMA, database],
            capture_output=True, text=True, timeout=300)
        if result.returncode:
            raise process.LabError("neutron's schema: %s"
                                   % result.stderr[-2000:])
        self.app = service.WsgiApp(
            workdir, "neutron-api", "neutron.wsgi.api:application",
            {"OS_NEUTRON_CONFIG_DIR": workdir,
             "OS_NEUTRON_CONFIG_FILES": "neutron.conf"})
        try:
            self.endpoints = keystone.add_endpoint("network", "neutron",
                                                   self.app.url, region)
            self.app.wait()
            self._configure_mappers()
        except BaseException:
            self.stop()
            raise

    def _configure_mappers(self):
        """Answer one query before Nova's first port listing.

        Listing ports names ``Port.port_forwardings``, a backref that
        SQLAlchemy makes only when it first configures the mappers, at
        the first query: a fresh neutron-api whose first request lists
        ports answers 500 (neutron-server's other workers query first).
        """
        request = urllib.request.Request(
            self.app.url + "/v2.0/networks",
            headers={"X-Auth-Token": self.keystone.token("admin")})
        with urllib.request.urlopen(request, timeout=60) as reply:
            if reply.status != 200:
                raise process.LabError("neutron-api answered %d to a "
                                       "network list" % reply.status)

    def stop(self):
        if self.app is not None:
            self.app.stop()
            self.app = None
        if getattr(self, "endpoints", None):
            self.keystone.remove_endpoints(self.endpoints)
            self.endpoints = []
