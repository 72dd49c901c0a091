# SPDX-License-Identifier: Apache-2.0
"""The conductor's RPC API, as its caller (gvfs-api) uses it.

Every call carries the request context of the user gvfs-api acts for
(:meth:`oslo_context.context.RequestContext.to_dict`), with that user's
token: the conductor validates the token with Keystone and holds the call
to its project (:mod:`gvfs_openstack.conductor.callers`), and records
the project and user with the jobs it makes.  gvfs-api checks the finer
policy before it calls.

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

Rolling upgrades, as Nova's services do them: the conductor serves every
version since 1.0 (oslo.messaging admits a call of any minor version up
to the server's, and arguments added later have defaults), and each call
is sent with the oldest version that carries what it asks.  gvfs-api may
be capped (``[upgrade_levels] conductor``) while conductors of the
previous release still run: a call that needs a newer version is then
refused here with :class:`exceptions.ConductorTooOld`, never sent to a
conductor that would reject it.
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


#: The version each argument of ``migrate`` came with, oldest first.
_MIGRATE_ARGUMENTS = (("pack", "1.1", "Packing images"),
                      ("trust_id", "1.2", "A migration with a trust"),
                      ("base", "1.4", "A migration against a named base"))
#: ``list_jobs``'s filters, all of 1.2.
_LIST_FILTERS = ("project_id", "states", "limit", "marker")


class ConductorAPI:
    """``version_cap``: the newest version to send (None: RPC_VERSION)."""

    def __init__(self, transport, timeout=60, version_cap=None):
        self.version_cap = version_cap or RPC_VERSION
        self.client = messaging.get_rpc_client(
            transport, messaging.Target(topic=TOPIC, version="1.0"),
            version_cap=self.version_cap, timeout=timeout)

    def _at(self, version, what):
        """The client prepared to send ``version``, if the cap allows."""
        if not self.client.can_send_version(version):
            raise exceptions.ConductorTooOld(what=what, version=version,
                                             cap=self.version_cap)
        return self.client.prepare(version=version)

    def migrate(self, context, image_ids, destination,
                images_in_flight=None, pack=None, trust_id=None,
                base=None):
        given = {"pack": pack, "trust_id": trust_id, "base": base}
        version, what, arguments = "1.0", "A migration", {}
        for name, since, needs in _MIGRATE_ARGUMENTS:
            if given[name] is not None:
                arguments[name] = given[name]
                version, what = since, needs
        return self._at(version, what).call(
            context, "migrate", image_ids=list(image_ids),
            destination=destination, images_in_flight=images_in_flight,
            **arguments)

    def find_images(self, context, image_ids):
        """Id, name, owner, visibility and status of each image.

        As the source site's Glance shows them to the conductor.
        """
        return self._at("1.2", "Finding images").call(
            context, "find_images", image_ids=list(image_ids))

    def golden_references(self, context, image_id):
        """The image's owner and its references on the source DTN."""
        return self._at("1.2", "A golden image's references").call(
            context, "golden_references", image_id=image_id)

    def list_sites(self, context):
        return self._at("1.2", "Listing sites").call(context, "list_sites")

    def list_jobs(self, context, project_id=None, states=None, limit=None,
                  marker=None):
        filters = {name: value for name, value in zip(
            _LIST_FILTERS, (project_id, states, limit, marker))
            if value is not None}
        return self._at("1.2" if filters else "1.0", "Listing jobs").call(
            context, "list_jobs", **filters)

    def show_job(self, context, job_id):
        return self._at("1.0", "Showing a job").call(
            context, "show_job", job_id=job_id)

    def cancel_job(self, context, job_id):
        return self._at("1.0", "Cancelling a job").call(
            context, "cancel_job", job_id=job_id)

    def create_replication(self, context, destination, selector_kind,
                           selector, delete_follows=False, name=None):
        """A replication policy of the context's project."""
        return self._at("1.3", "A replication policy").call(
            context, "create_replication", destination=destination,
            selector_kind=selector_kind, selector=selector,
            delete_follows=delete_follows, name=name)

    def list_replications(self, context, project_id=None):
        return self._at("1.3", "Listing replication policies").call(
            context, "list_replications", project_id=project_id)

    def show_replication(self, context, policy_id):
        return self._at("1.3", "A replication policy").call(
            context, "show_replication", policy_id=policy_id)

    def pause_replication(self, context, policy_id, paused):
        """Pause (``paused``) or resume the policy."""
        return self._at("1.3", "A replication policy").call(
            context, "pause_replication", policy_id=policy_id,
            paused=paused)

    def delete_replication(self, context, policy_id):
        return self._at("1.3", "A replication policy").call(
            context, "delete_replication", policy_id=policy_id)
