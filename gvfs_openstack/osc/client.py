# SPDX-License-Identifier: Apache-2.0
"""The OSC plugin's client: the conductor's RPC API with user-facing errors."""

from osc_lib import exceptions as osc_exceptions
from oslo_config import cfg
import oslo_messaging as messaging

from gvfs_openstack import exceptions
from gvfs_openstack.migration import rpcapi

#: What the conductor says about a bad request, shown to the user as is.
_USER_ERRORS = (exceptions.GvfsError,)


class ConductorClient:
    def __init__(self, transport_url=None, config_file=None, timeout=60.0):
        if not transport_url and not config_file:
            raise osc_exceptions.CommandError(
                "gvfs-conductor's message bus is not known: set "
                "--os-gvfs-transport-url (or OS_GVFS_TRANSPORT_URL), or "
                "--os-gvfs-config-file")
        conf = cfg.CONF  # oslo.messaging 18 wants the global configuration.
        conf([] if not config_file else ["--config-file", config_file],
             project="gvfs", default_config_files=[])
        try:
            transport = rpcapi.get_transport(conf, url=transport_url)
        except messaging.InvalidTransportURL as e:
            raise osc_exceptions.CommandError(
                "bad gvfs transport URL: %s" % e) from e
        self.api = rpcapi.ConductorAPI(transport, timeout=timeout)

    def _call(self, method, *args, **kwargs):
        try:
            return getattr(self.api, method)(*args, **kwargs)
        except _USER_ERRORS as e:
            # The message without the conductor's traceback, which
            # oslo.messaging appends to str() of a remote error.
            message = e.args[0] if e.args else str(e)
            raise osc_exceptions.CommandError(message) from e
        except messaging.MessagingTimeout as e:
            raise osc_exceptions.CommandError(
                "gvfs-conductor did not answer (is it running, on this "
                "message bus?): %s" % e) from e

    def migrate(self, image_ids, destination, images_in_flight=None,
                pack=None):
        return self._call("migrate", image_ids, destination,
                          images_in_flight, pack)

    def list_jobs(self):
        return self._call("list_jobs")

    def show_job(self, job_id):
        return self._call("show_job", job_id)

    def cancel_job(self, job_id):
        return self._call("cancel_job", job_id)
