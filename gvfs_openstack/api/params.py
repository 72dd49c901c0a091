# SPDX-License-Identifier: Apache-2.0
"""Query-string parameters of gvfs-api, read with a 400 for bad ones."""

from gvfs_openstack.api import faults


def int_param(params, name, minimum):
    value = params.get(name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < minimum:
        raise faults.Fault(400, "Invalid query parameter %s: %r is not an "
                           "integer of at least %d" % (name, value, minimum))
    return number


def bool_param(params, name):
    value = params.get(name, "false").lower()
    if value in ("1", "true", "yes"):
        return True
    if value in ("0", "false", "no"):
        return False
    raise faults.Fault(400, "Invalid query parameter %s: %r is not a "
                       "boolean" % (name, value))
