# SPDX-License-Identifier: Apache-2.0
"""Who may scrape a metrics endpoint: ``[metrics] token_file``.

Apart from :mod:`gvfs_openstack.metrics_server` so that a service reads
its token at start (and fails there on a bad file) without importing
prometheus-client, which only serving needs.
"""

import hmac
import ipaddress
import os
import stat

from oslo_log import log as logging

from gvfs_openstack import exceptions

LOG = logging.getLogger(__name__)
_OPTION = "[metrics] token_file"


def read_token(path):
    """The bearer token in the file at ``path``; None for no ``path``.

    InvalidConfig if it cannot be read or holds no one token; a warning
    if every account may read it.
    """
    if not path:
        return None
    try:
        with open(path, "rb") as f:
            mode = os.fstat(f.fileno()).st_mode
            token = f.read(4097).strip()
    except OSError as e:
        raise exceptions.InvalidConfig(option=_OPTION, reason=str(e)) from e
    if not token or len(token) > 4096 or b"\n" in token:
        raise exceptions.InvalidConfig(
            option=_OPTION, reason="%s must hold one token of 1 to 4096 "
            "bytes on one line" % path)
    if mode & stat.S_IROTH:
        LOG.warning("[metrics] token_file %s is readable by every account",
                    path)
    return token


def warn_if_open(host, token):
    """Say so when metrics are served beyond loopback without a token."""
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    if token is None and not loopback:
        LOG.warning("Prometheus metrics on %s without [metrics] token_file: "
                    "anyone who reaches it reads export paths and ids",
                    host)


def authorized(header, token):
    """Whether an ``Authorization`` header value carries ``token``."""
    if token is None:
        return True
    if header is None:
        return False
    scheme, _, given = header.strip().partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        given.strip().encode("latin-1", "replace"), token)
