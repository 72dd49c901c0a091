# SPDX-License-Identifier: Apache-2.0
"""The user's authority, delegated to gvfs-conductor for one migration.

A Keystone trust (``OS-TRUST``) from the user to the conductor's user,
in the user's project, with those of the user's roles that a migration
needs (``[api] delegated_roles``: not ``admin``), impersonating the user:
the conductor's token made with it says the user, so the source Glance
applies the user's own visibility and download rules to every read of
the job, including those of a runner that resumes it hours later.  The
user's token makes the trust, as only the trustor may; gvfs-api never
keeps it.
"""

import datetime

from keystoneauth1 import exceptions as ks_exceptions
from keystoneauth1.identity import generic
from keystoneauth1 import session as ks_session
from oslo_log import log as logging

from gvfs_openstack.api import faults

LOG = logging.getLogger(__name__)

_IDENTITY = {"service_type": "identity", "interface": "public"}


class Trust:
    """One trust made for one request; ``revoke`` if the request fails."""

    def __init__(self, session, trust_id):
        self.session = session
        self.id = trust_id

    def revoke(self):
        try:
            self.session.delete("/OS-TRUST/trusts/%s" % self.id,
                                endpoint_filter=_IDENTITY, raise_exc=False)
        except ks_exceptions.ClientException:
            LOG.warning("could not delete trust %s; it expires by itself",
                        self.id)


def _keystone_url(conf):
    group = conf.keystone_authtoken
    return group.www_authenticate_uri or getattr(group, "auth_url", None)


def delegate(conf, context, token, trustee_user_id, delegated_roles):
    """A trust from the caller to ``trustee_user_id``; refusal is a fault.

    It carries the caller's roles that are in ``delegated_roles``.
    """
    if not token:
        raise faults.Fault(401, "The request's token is needed to delegate "
                           "the migration to gvfs-conductor")
    roles = [role for role in context.roles if role in delegated_roles]
    if not roles:
        raise faults.Fault(403, "None of your roles in this project may be "
                           "delegated to gvfs-conductor (%s)"
                           % ", ".join(delegated_roles))
    session = ks_session.Session(auth=generic.Token(
        auth_url=_keystone_url(conf), token=token,
        project_id=context.project_id))
    expires = datetime.datetime.now(datetime.timezone.utc) + \
        datetime.timedelta(hours=conf.api.trust_lifetime_hours)
    body = {"trust": {
        "trustor_user_id": context.user_id,
        "trustee_user_id": trustee_user_id,
        "project_id": context.project_id,
        "impersonation": True,
        "roles": [{"name": role} for role in roles],
        # To the microsecond: Keystone refuses a trust identical to one
        # it has (two migrations of one user in one second).
        "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%S.%fZ")}}
    try:
        reply = session.post("/OS-TRUST/trusts", json=body,
                             endpoint_filter=_IDENTITY, raise_exc=False)
    except ks_exceptions.ClientException as e:
        raise faults.Fault(503, "Keystone could not be reached to delegate "
                           "the migration: %s" % e) from e
    if reply.status_code != 201:
        LOG.warning("Keystone refused a trust of user %s in project %s "
                    "for gvfs-conductor: %d %s", context.user_id,
                    context.project_id, reply.status_code, reply.text[:500])
        raise faults.Fault(403 if reply.status_code == 403 else 503,
                           "Keystone refused to delegate your authority to "
                           "gvfs-conductor (%d)" % reply.status_code)
    return Trust(session, reply.json()["trust"]["id"])
