# SPDX-License-Identifier: Apache-2.0
"""Who called the conductor, as Keystone says, not as the bus does.

gvfs-api calls the conductor with the request context of the user it
acts for (oslo.context's ``to_dict``), which carries that user's token.
Any client of the message bus can send such a dict naming any project;
the token it cannot forge.  So each call's token is validated with
Keystone -- as its own subject, which Keystone's default policy allows
without any role of the conductor's -- and the caller is what the token
says: its user, its project, its roles.  The calls are then held to that
project (:meth:`Caller.may_see`): another project's job, replication
policy or image is answered as a missing one, as gvfs-api answers it,
and only the admin role reaches every project.

gvfs-api has checked the finer policy before it calls; this is the
coarse bound that holds when something else on the bus calls.  A
validated token is kept for ``keep`` seconds at most (never past its
expiry), so a burst of calls costs Keystone one validation.
"""

import dataclasses
import datetime
import hashlib
import threading
import time

from gvfs_openstack import exceptions
from gvfs_openstack.migration import sites

#: Seconds a validated token is believed before Keystone is asked again
#: (a revoked token is refused from then on).
KEEP_SECONDS = 60.0
#: Tokens remembered at most.
KEPT_TOKENS = 1024
ADMIN_ROLE = "admin"


@dataclasses.dataclass(frozen=True)
class Caller:
    user_id: str
    project_id: str
    roles: frozenset
    #: Reaches every project's objects whatever its roles (a conductor
    #: that trusts its bus, :class:`Trusting`).
    every_project: bool = False

    @property
    def admin(self):
        return self.every_project or ADMIN_ROLE in self.roles

    def may_see(self, project_id):
        """Whether an object of ``project_id`` is the caller's to see."""
        return self.admin or project_id == self.project_id

    def may_see_image(self, image):
        """Whether ``image`` (as Glance shows it) is the caller's to see."""
        return self.may_see(image.get("owner"))

    def check_scope(self, project_id):
        """Refuse a listing of another project's (or every) object."""
        if not self.may_see(project_id):
            raise exceptions.CallerRefused(
                reason="listing another project's objects needs the %s "
                       "role" % ADMIN_ROLE)


def _user(ctxt):
    """The user id in a request context's dict (``user`` in oslo.context)."""
    return ctxt.get("user_id") or ctxt.get("user")


class Callers:
    """The verified caller of each request context.

    ``validate(token)`` asks Keystone: ``(Caller, expiry as a Unix
    time)``, or CallerRefused.
    """

    def __init__(self, validate, keep=KEEP_SECONDS, size=KEPT_TOKENS,
                 clock=time.time):
        self._validate = validate
        self._keep = keep
        self._size = size
        self._clock = clock
        self._known = {}    # sha256 of a token -> (Caller, believed until)
        #: The RPC server calls from a pool of threads.
        self._lock = threading.Lock()

    def of(self, ctxt):
        token = ctxt.get("auth_token")
        if not token or not isinstance(token, str):
            raise exceptions.CallerRefused(reason="the request carries no "
                                           "token")
        key = hashlib.sha256(token.encode()).digest()
        now = self._clock()
        with self._lock:
            known = self._known.get(key)
        if known is None or known[1] <= now:
            caller, expires = self._validate(token)
            known = (caller, min(expires, now + self._keep))
            with self._lock:
                if len(self._known) >= self._size:
                    self._drop_oldest(now)
                self._known[key] = known
        caller = known[0]
        if caller.user_id != _user(ctxt) or \
                caller.project_id != ctxt.get("project_id"):
            raise exceptions.CallerRefused(
                reason="its token is another user's or project's")
        return caller

    def _drop_oldest(self, now):
        """Under the lock: the expired, then the oldest, out."""
        for key in [key for key, (_, until) in self._known.items()
                    if until <= now]:
            del self._known[key]
        while len(self._known) >= self._size:
            del self._known[next(iter(self._known))]


class Trusting:
    """The caller the context names, as releases before this one took it.

    For a conductor told to trust its bus (``[conductor] verify_callers
    = False``): every call reaches every project's objects, as gvfs-api's
    policy allowed it, whatever roles that policy names.
    """

    def of(self, ctxt):
        roles = ctxt.get("roles") or []
        return Caller(_user(ctxt), ctxt.get("project_id"),
                      frozenset(roles), every_project=True)


def keystone_validator(session):
    """``validate(token)`` against Keystone, through ``session``.

    ``session`` is the conductor's own keystoneauth session: it finds the
    identity endpoint; the request itself goes with the token alone.
    """
    def validate(token):
        reply = sites.ask_keystone(
            session, "/auth/tokens", "checking the caller",
            refused=(401, 403, 404), authenticated=False,
            headers={"X-Auth-Token": token, "X-Subject-Token": token})
        if reply.status_code != 200:
            raise exceptions.CallerRefused(reason="its token is not valid "
                                           "(expired or revoked)")
        return from_token(reply.json().get("token") or {})
    return validate


def from_token(body):
    """``(Caller, expiry)`` of a Keystone v3 token body."""
    project = body.get("project") or {}
    user = body.get("user") or {}
    if not project.get("id") or not user.get("id"):
        raise exceptions.CallerRefused(reason="its token is not scoped to "
                                       "a project")
    expires = body.get("expires_at")
    try:
        expiry = datetime.datetime.fromisoformat(
            expires.replace("Z", "+00:00")).timestamp()
    except (AttributeError, ValueError):
        raise exceptions.CallerRefused(reason="its token has no expiry")
    roles = frozenset(role.get("name") for role in body.get("roles") or []
                      if isinstance(role, dict))
    return Caller(user["id"], project["id"], roles), expiry
