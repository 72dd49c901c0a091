# SPDX-License-Identifier: Apache-2.0
"""systemd's readiness protocol (``Type=notify``), without a library.

A service started by systemd with ``Type=notify`` finds a datagram
socket in ``NOTIFY_SOCKET`` and sends ``READY=1`` there once it serves:
units ordered after it (a mount after its proxy, Glance and Nova after
the mount) then start only when it answers, not when its process
merely exists.  Outside systemd there is no ``NOTIFY_SOCKET`` and
nothing is sent.
"""

import os
import socket

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


def notify(state):
    """Send ``state`` (str, e.g. ``"READY=1"``); whether it was sent.

    A socket that cannot be reached is logged, never fatal: the service
    serves all the same.
    """
    path = os.environ.get("NOTIFY_SOCKET")
    if not path:
        return False
    if path.startswith("@"):
        path = "\0" + path[1:]      # An abstract socket.
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(path)
            sock.sendall(state.encode())
    except OSError as e:
        LOG.warning("cannot tell systemd %r at %s: %s", state,
                    os.environ.get("NOTIFY_SOCKET"), e)
        return False
    return True


def ready(status=None):
    """``READY=1``, with a one-line ``STATUS=`` if given."""
    return notify("READY=1" + ("\nSTATUS=%s" % status if status else ""))
