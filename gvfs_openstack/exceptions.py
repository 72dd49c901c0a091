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
