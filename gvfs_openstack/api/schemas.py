# SPDX-License-Identifier: Apache-2.0
"""JSON schemas of gvfs-api's request bodies and query strings.

A request that does not match is refused with 400 and a message naming
the field, before anything reaches the conductor.
"""

import jsonschema

from gvfs_openstack.api import faults
from gvfs_openstack.migration import states

#: The most images one migration may name.
MAX_IMAGES = 500

_NAME = {"type": "string", "minLength": 1, "maxLength": 255}

MIGRATION_CREATE = {
    "type": "object",
    "properties": {
        "migration": {
            "type": "object",
            "properties": {
                "images": {"type": "array", "items": _NAME,
                           "minItems": 1, "maxItems": MAX_IMAGES,
                           "uniqueItems": True},
                "destination": _NAME,
                "images_in_flight": {"type": "integer", "minimum": 1,
                                     "maximum": 64},
                "pack": {"type": ["string", "null"],
                         "enum": list(states.PACK_METHODS) + [None]},
                "base": _NAME,
            },
            "required": ["images", "destination"],
            "additionalProperties": False,
        },
    },
    "required": ["migration"],
    "additionalProperties": False,
}

REPLICATION_CREATE = {
    "type": "object",
    "properties": {
        "replication": {
            "type": "object",
            "properties": {
                "destination": _NAME,
                "name": _NAME,
                "tag": _NAME,
                "property": {
                    "type": "object",
                    "properties": {"key": _NAME,
                                   "value": {"type": "string",
                                             "maxLength": 255}},
                    "required": ["key", "value"],
                    "additionalProperties": False,
                },
                "images": {"type": "array", "items": _NAME,
                           "minItems": 1, "maxItems": MAX_IMAGES,
                           "uniqueItems": True},
                "delete_follows": {"type": "boolean"},
            },
            "required": ["destination"],
            "additionalProperties": False,
        },
    },
    "required": ["replication"],
    "additionalProperties": False,
}

#: What selects a policy's images: exactly one of these fields.
REPLICATION_SELECTORS = ("tag", "property", "images")

MIGRATION_STATES = states.JOB_STATES


def _where(error):
    """The field an error is about, as ``migration.images[2]``."""
    where = ""
    for part in error.absolute_path:
        where += "[%d]" % part if isinstance(part, int) else \
            ("." if where else "") + part
    return where


def validate(schema, document):
    """Refuse ``document`` with 400 unless it matches ``schema``."""
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(document),
                    key=lambda e: list(e.absolute_path))
    if not errors:
        return
    error = errors[0]
    if error.validator == "additionalProperties":
        unknown = sorted(set(error.instance) - set(
            error.schema.get("properties", {})))
        field = ".".join(filter(None, [_where(error), unknown[0]]))
        raise faults.Fault(400, "Unknown field %s" % field)
    if error.validator == "required":
        missing = error.message.split("'")[1]
        field = ".".join(filter(None, [_where(error), missing]))
        raise faults.Fault(400, "Missing field %s" % field)
    raise faults.Fault(400, "Invalid field %s: %s" % (
        _where(error) or "(the body)", error.message))
