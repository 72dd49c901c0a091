# SPDX-License-Identifier: Apache-2.0
"""Stage 2, DTN to DTN: a delta where one can go, else the whole file.

A new version of an image the destination has goes as a delta
(:mod:`gvfs_openstack.migration.delta`); any other image, and any delta
that cannot be made or would not pay, goes whole by the sending site's
method (:mod:`gvfs_openstack.migration.transfer`).  Both of those send
files; only this module chooses between them, so neither imports the
other's caller.
"""

from gvfs_openstack.migration import delta
from gvfs_openstack.migration import transfer


def run(ctx, row):
    """Stage 2 for one image; returns the job-store values it completed."""
    values = delta.run(ctx, row)
    if values is not None:
        return values
    return transfer.send_whole(ctx, row)
