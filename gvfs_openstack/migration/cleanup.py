# SPDX-License-Identifier: Apache-2.0
"""What a job leaves behind, removed: staged files on both DTNs and, when
the job is cancelled, the destination images it created and did not finish.

Only the job's own staging directories and the images it created are
touched; the source images never are.
"""

import asyncio

from oslo_log import log as logging

from gvfs_openstack import exceptions
from gvfs_openstack.migration import dtnssh
from gvfs_openstack.migration import localcopy
from gvfs_openstack.migration import states
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import NfsError

LOG = logging.getLogger(__name__)


async def _remove_source(site, directory, names):
    """Remove ``names`` (all if None) and, when empty, the directory."""
    async with localcopy.dtn_mount(site) as nfs:
        try:
            dir_fh = await nfs.lookup_path(directory)
        except NfsError as e:
            if e.status == const.NfsStat.NFS3ERR_NOENT:
                return
            raise
        if names is None:
            names = [e.name for e in await nfs.readdirplus(dir_fh)
                     if e.name not in (".", "..")]
        for name in names:
            try:
                await nfs.remove(dir_fh, name)
            except NfsError as e:
                if e.status != const.NfsStat.NFS3ERR_NOENT:
                    raise
        parent, _, leaf = directory.rpartition("/")
        try:
            await nfs.rmdir(await nfs.lookup_path(parent), leaf)
        except NfsError as e:
            if e.status not in (const.NfsStat.NFS3ERR_NOTEMPTY,
                                const.NfsStat.NFS3ERR_NOENT):
                raise


def remove_source_file(ctx, image_id):
    """The staged copy of one image on the source DTN, once it arrived."""
    asyncio.run(_remove_source(ctx.source, ctx.source.staging_dir(
        ctx.job_id), [image_id]))


def _remove_destination(ctx):
    """The job's staging directory at the destination, over SSH.

    Export clients write there and in the export's root through the
    proxies: it is removed on the DTN without following a link
    (:meth:`dtnssh.DtnSession.remove_tree`), so a ``staging/<job> ->
    ../images`` planted there loses the link, not the images.  A link
    above it (the staging directory itself a link) fails the removal.
    """
    site = ctx.destination
    directory = site.export_path(site.staging_dir(ctx.job_id))
    with dtnssh.connect(site, "-", "cleanup") as session:
        links = session.remove_tree(directory)
    for link in links:
        LOG.warning("job %s: %s at site %s was a symbolic link, planted "
                    "in its staging directory: removed, not followed",
                    ctx.job_id, link, site.name)


def staging_dirs(ctx):
    """Both DTNs' staging directories of the job, and what is in them.

    A failure here is logged: the images are where they should be, and
    what is left is only space, in a directory named by the job.
    """
    for what, remove in (
            ("source", lambda: asyncio.run(_remove_source(
                ctx.source, ctx.source.staging_dir(ctx.job_id), None))),
            ("destination", lambda: _remove_destination(ctx))):
        try:
            remove()
        except (OSError, NfsError, exceptions.GvfsError) as e:
            LOG.warning("cannot clean the %s DTN's staging directory of "
                        "job %s: %s", what, ctx.job_id, e)


def _drop_destination_image(ctx, image_id):
    """Delete an unfinished image the job created, and its file."""
    try:
        image = ctx.destination_glance.image(image_id)
    except exceptions.ImageNotFound:
        return
    if image["status"] == "active":
        return  # Finished while the cancel came: it is a good copy.
    ctx.destination_glance.delete(image_id)
    site = ctx.destination
    if site.gvfs_store:
        with dtnssh.connect(site, image_id, "cancel") as session:
            session.remove_image(site.image_path(image_id))


def cancel(ctx, rows):
    """Undo what a cancelled job did at the destination."""
    for row in rows:
        if row["state"] == states.DONE:
            continue
        if row["transfer_task"]:
            from gvfs_openstack.migration import globus
            globus.cancel_recorded(ctx, row)
        if row["destination_image_id"]:
            _drop_destination_image(ctx, row["destination_image_id"])
        ctx.store.set_image(ctx.job_id, row["position"],
                            state=states.CANCELLED)
    staging_dirs(ctx)
    ctx.store.set_job(ctx.job_id, state=states.CANCELLED)
