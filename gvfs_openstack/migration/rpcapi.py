# SPDX-License-Identifier: Apache-2.0
"""The conductor's RPC API, as its caller (gvfs-api) uses it.

Every call carries the request context of the user gvfs-api acts for
(:meth:`oslo_context.context.RequestContext.to_dict`): the conductor
records its project and user with the jobs it makes.  gvfs-api checks
policy before it calls; the conductor trusts its bus.

Version history:

* 1.0 -- migrate, list_jobs, show_job, cancel_job.
* 1.1 -- migrate takes ``pack``.
* 1.2 -- the request context; find_images, list_sites, trustee,
  golden_references; migrate takes ``trust_id``; list_jobs takes
  ``project_id``, ``states``, ``limit`` and ``marker``.
* 1.3 -- create_replication, list_replications, show_replication,
  pause_replication, delete_replication.
* 1.4 -- migrate takes ``base`` (the image to send deltas against).

``trustee`` (1.2) is no longer served: gvfs-api names the conductor's user
in its own configuration (``[api] trustee_user_id``) and never learns it
from the bus, where any consumer could answer.
"""

import oslo_messaging as messaging

from gvfs_openstack import exceptions

TOPIC = "gvfs-conductor"
RPC_VERSION = "1.4"

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

    def migrate(self, context, image_ids, destination,
                images_in_flight=None, pack=None, trust_id=None,
                base=None):
        return self.client.call(
            context, "migrate", image_ids=list(image_ids),
            destination=destination, images_in_flight=images_in_flight,
            pack=pack, trust_id=trust_id, base=base)

    def find_images(self, context, image_ids):
        """Id, name, owner, visibility and status of each image.

        As the source site's Glance shows them to the conductor.
        """
        return self.client.call(context, "find_images",
                                image_ids=list(image_ids))

    def golden_references(self, context, image_id):
        """The image's owner and its references on the source DTN."""
        return self.client.call(context, "golden_references",
                                image_id=image_id)

    def list_sites(self, context):
        return self.client.call(context, "list_sites")

    def list_jobs(self, context, project_id=None, states=None, limit=None,
                  marker=None):
        return self.client.call(context, "list_jobs", project_id=project_id,
                                states=states, limit=limit, marker=marker)

    def show_job(self, context, job_id):
        return self.client.call(context, "show_job", job_id=job_id)

    def cancel_job(self, context, job_id):
        return self.client.call(context, "cancel_job", job_id=job_id)

    def create_replication(self, context, destination, selector_kind,
                           selector, delete_follows=False, name=None):
        """A replication policy of the context's project."""
        return self.client.call(
            context, "create_replication", destination=destination,
            selector_kind=selector_kind, selector=selector,
            delete_follows=delete_follows, name=name)

    def list_replications(self, context, project_id=None):
        return self.client.call(context, "list_replications",
                                project_id=project_id)

    def show_replication(self, context, policy_id):
        return self.client.call(context, "show_replication",
                                policy_id=policy_id)

    def pause_replication(self, context, policy_id, paused):
        """Pause (``paused``) or resume the policy."""
        return self.client.call(context, "pause_replication",
                                policy_id=policy_id, paused=paused)

    def delete_replication(self, context, policy_id):
        return self.client.call(context, "delete_replication",
                                policy_id=policy_id)
