# SPDX-License-Identifier: Apache-2.0
"""Errors as gvfs-api answers them: the usual OpenStack fault JSON.

``{"badRequest": {"code": 400, "message": "..."}}``, as Nova and Cinder
answer, so that clients which show ``message`` show ours.  Handlers
raise :class:`Fault`; the application turns it into the reply.
"""

import http
import json

#: The fault's key for each status, as the other services name them.
_KEYS = {
    400: "badRequest",
    401: "unauthorized",
    403: "forbidden",
    404: "itemNotFound",
    405: "badMethod",
    409: "conflictingRequest",
    413: "overLimit",
    415: "badMediaType",
    503: "serviceUnavailable",
}


class Fault(Exception):
    """A request that ends with ``status`` and a message for its user."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def body(status, message):
    """The fault document of ``status`` (bytes)."""
    key = _KEYS.get(status) or (
        "internalServerError" if status >= 500 else "fault")
    return json.dumps({key: {"code": status, "message": message}}).encode()


def status_line(status):
    return "%d %s" % (status, http.HTTPStatus(status).phrase)
