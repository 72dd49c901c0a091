# SPDX-License-Identifier: Apache-2.0
"""The conductor's RPC API, as its callers (the OSC plugin) use it.

Version history:

* 1.0 -- migrate, list_jobs, show_job, cancel_job.
* 1.1 -- migrate takes ``pack``.
"""

import oslo_messaging as messaging

from gvfs_openstack import exceptions

TOPIC = "gvfs-conductor"
RPC_VERSION = "1.1"

#: Errors that cross RPC as themselves (a clear message for the user).
ALLOWED_EXMODS = [exceptions.__name__]


def get_transport(conf, url=None):
    return messaging.get_rpc_transport(conf, url=url,
                                       allowed_remote_exmods=ALLOWED_EXMODS)


class ConductorAPI:
    def __init__(self, transport, timeout=60):
        self.client = messaging.get_rpc_client(
            transport, messaging.Target(topic=TOPIC, version=RPC_VERSION),
            timeout=timeout)

    def migrate(self, image_ids, destination, images_in_flight=None,
                pack=None):
        args = {"image_ids": list(image_ids), "destination": destination,
                "images_in_flight": images_in_flight}
        # Without ``pack`` a 1.0 conductor understands the call as it
        # always did; one given ``pack`` refuses a 1.1 call itself.
        version = "1.0"
        if pack is not None:
            args["pack"] = pack
            version = "1.1"
        return self.client.prepare(version=version).call(
            {}, "migrate", **args)

    def list_jobs(self):
        return self.client.call({}, "list_jobs")

    def show_job(self, job_id):
        return self.client.call({}, "show_job", job_id=job_id)

    def cancel_job(self, job_id):
        return self.client.call({}, "cancel_job", job_id=job_id)
