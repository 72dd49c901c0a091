# SPDX-License-Identifier: Apache-2.0
"""Errors of gvfs-openstack outside the NFS protocol core.

One root class; messages are templates filled from named fields so that
every error says what was wrong and where.
"""


class GvfsError(Exception):
    """Root of gvfs-openstack's errors."""

    message = "An unknown error occurred"

    def __init__(self, message=None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            message = self.message % kwargs
        super().__init__(message)


class InvalidConfig(GvfsError, ValueError):
    message = "Invalid configuration of %(option)s: %(reason)s"


class MountFailed(GvfsError, OSError):
    message = "Cannot mount %(share)s at %(path)s: %(reason)s"


class MountUnhealthy(GvfsError, OSError):
    """A mounted path hangs or is dead (the NFS "stale/hung mount")."""

    message = "The GVFS mount %(path)s %(state)s"


class UnknownSite(GvfsError, KeyError):
    message = "Unknown site %(site)s (configured sites: %(known)s)"

    def __str__(self):
        return self.args[0]  # KeyError would quote the message.


class ImageNotFound(GvfsError, LookupError):
    message = "Image %(image)s not found at site %(site)s"


class TrustRefused(GvfsError, PermissionError):
    message = "The migration's Keystone trust is refused: %(reason)s"


class CallerRefused(GvfsError, PermissionError):
    message = "The conductor refused the call: %(reason)s"


class ConductorTooOld(GvfsError):
    message = ("%(what)s needs gvfs-conductor RPC %(version)s; gvfs-api "
               "sends at most %(cap)s ([upgrade_levels] conductor) while "
               "conductors are upgraded")


class ImageNotMigratable(GvfsError, ValueError):
    message = "Image %(image)s cannot be migrated: %(reason)s"


class StageFailed(GvfsError):
    """A stage of a migration failed; ``transient`` says a retry may help.

    The message is what the job shows its user.  ``detail`` is what only
    the conductor's log shows: a DTN's host and port, a tool's output
    (which names hosts and paths), a service's raw reply.
    """

    message = "%(stage)s of image %(image)s failed: %(reason)s"

    def __init__(self, message=None, transient=False, detail=None,
                 **kwargs):
        super().__init__(message, **kwargs)
        self.transient = transient
        self.detail = detail


class DataRejected(StageFailed):
    """The copy's bytes are not the source's: retrying will not fix them."""


class ChecksumMismatch(DataRejected):
    message = ("%(stage)s of image %(image)s: the data's %(algo)s is "
               "%(actual)s, the source's is %(expected)s")


class JobNotFound(GvfsError, LookupError):
    message = "No migration job %(job)s"


class JobFinished(GvfsError, ValueError):
    message = "Migration job %(job)s is %(state)s already"


class ReplicationNotFound(GvfsError, LookupError):
    message = "No replication policy %(policy)s"


class JobBusy(GvfsError):
    message = "Migration job %(job)s is being run by %(owner)s"


def described(error):
    """``error`` for an operator's log: its message and its detail."""
    detail = getattr(error, "detail", None)
    return "%s (%s)" % (error, detail) if detail else str(error)
