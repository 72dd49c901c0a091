# SPDX-License-Identifier: Apache-2.0
"""gvfs-api under a WSGI server: ``gvfs_openstack.wsgi.api:application``.

    uwsgi --http-socket :9494 --module gvfs_openstack.wsgi.api:application
    gunicorn gvfs_openstack.wsgi.api:application

The configuration is read from ``GVFS_API_CONFIG_FILE`` (default
``/etc/gvfs-openstack/gvfs-api.conf``) when the server imports this.
"""

from gvfs_openstack.api import service

application = service.wsgi_application()
