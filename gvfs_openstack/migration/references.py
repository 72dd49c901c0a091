# SPDX-License-Identifier: Apache-2.0
"""Who holds a golden image: its reference files on the site's DTN export.

The Nova backend keeps one file per instance disk cloned from a golden
image in ``.gvfs-refs/<image id>/`` beside the images
(:mod:`gvfs_openstack.images.golden`), and the Glance store refuses to delete
an image that has any.  The conductor reads that directory over NFS, as
it reads images for the local copy, so that a user told "image in use"
can see by what.
"""

import asyncio
import posixpath

from gvfs_openstack import exceptions
from gvfs_openstack.images import golden
from gvfs_openstack.migration import localcopy
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import NfsError


def _reference(name):
    try:
        host, instance, disk, project = golden.parse_holder(name)
    except ValueError:
        # Not made by the backend: counted, shown as it is to admins.
        return {"holder": name, "host": None, "instance_id": None,
                "disk": None, "project_id": None}
    return {"holder": name, "host": host, "instance_id": instance,
            "disk": disk, "project_id": project}


async def _holders(site, image_id):
    path = posixpath.join(site.dtn_images_dir, golden.REFS_DIR, image_id)
    async with localcopy.dtn_mount(site) as nfs:
        try:
            refs = await nfs.lookup_path(path)
            entries = await nfs.readdirplus(refs)
        except NfsError as e:
            if e.status == const.NfsStat.NFS3ERR_NOENT:
                return []
            raise
    return sorted(e.name for e in entries if not e.name.startswith("."))


def of_image(site, image_id):
    """The references to ``image_id`` on ``site``'s export, as dicts."""
    try:
        names = asyncio.run(_holders(site, image_id))
    except (NfsError, OSError) as e:
        raise exceptions.StageFailed(
            stage="reading references", image=image_id,
            reason="the export of site %s cannot be read" % site.name,
            detail=str(e)) from e
    return [_reference(name) for name in names]
