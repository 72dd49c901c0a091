# SPDX-License-Identifier: Apache-2.0
"""Stage 3, remote copy: from the destination DTN into the destination Glance.

The image is created at the destination with the source's id, every
attribute a user set, its owner and the projects it is shared with (each
mapped by ``[site:NAME] project_mapping``).  Then, when the destination
has a ``gvfs`` store on that DTN, the file is linked into the store's
directory and registered by location: no byte crosses the Images API,
and Glance itself reads the file, computes the hashes and activates the
image only if they equal the source's (when it does not, the file is
hashed on the DTN to tell wrong bytes from a failing Glance).  Otherwise
the file is streamed from the DTN over SSH into an upload, hashed on the
way; a mismatch cuts the upload short, so Glance never activates it.
Either way an image with wrong bytes is deleted at the destination, and
the source is never touched.  A file rebuilt from a delta that Glance
refuses is sent again whole, once, and registered again: its base's
bytes changed under a signature that still looked fresh, which is
forgotten so that the next delta signs the base again.
"""

import hashlib
import posixpath
import shlex

from oslo_log import log as logging

from gvfs_openstack.delta import blocks
from gvfs_openstack import exceptions
from gvfs_openstack.migration import dtnssh
from gvfs_openstack.migration import images_api as glance_api
from gvfs_openstack.migration import transfer

LOG = logging.getLogger(__name__)

STAGE = "remote copy"


def _destination_image(ctx, row):
    """The destination image, created queued on the first attempt."""
    if row["destination_image_id"]:
        try:
            return ctx.destination_glance.image(row["destination_image_id"])
        except exceptions.ImageNotFound:
            pass  # Deleted meanwhile: make it again.
    source = ctx.source_glance.image(row["image_id"])
    attributes = glance_api.copied_attributes(source)
    attributes["id"] = row["image_id"]
    if source.get("owner"):
        attributes["owner"] = ctx.destination.owner_of(source["owner"])
    image = ctx.destination_glance.create(attributes)
    ctx.record(row, destination_image_id=image["id"])
    return image


def _share(ctx, row, image):
    """Share the copy with the projects the source is shared with.

    Each member is mapped as the owner is, and keeps its status (pending,
    accepted, rejected), before the copy becomes active: whoever could
    boot the source can boot the copy once it is.  Run on every attempt;
    sharing again changes nothing.
    """
    if image.get("visibility") != "shared":
        return
    for member, status in ctx.source_glance.members(row["image_id"]):
        ctx.destination_glance.share(
            image["id"], ctx.destination.owner_of(member), status)


def _register_in_place(ctx, row, image, session):
    """Give the arrived file its name in the store; register it.

    A hard link, not a rename: when Glance fails to import a location it
    deletes the location's file, and the staged name keeps the bytes for
    the retry.  The staged name goes when the image is active.  First the
    file is flushed to the DTN's disks: neither a GridFTP server nor the
    delta's rebuild syncs what it wrote, and Glance must not activate an
    image a crash of the DTN would take back.
    """
    staged = ctx.destination.staged_path(ctx.job_id, row["image_id"])
    final = ctx.destination.image_path(image["id"])
    if not session.exists(final):
        if not session.exists(staged):
            raise exceptions.StageFailed(
                stage=STAGE, image=row["image_id"],
                reason="the staged file is not on the destination DTN",
                detail=staged)
        have = session.size(staged)
        if have != row["size"]:
            raise exceptions.DataRejected(
                stage=STAGE, image=row["image_id"],
                reason="%d bytes arrived at the destination DTN, the image "
                       "has %d" % (have, row["size"]))
        staged_blocks = blocks.signature_path(staged)
        signed = session.exists(staged_blocks)
        session.makedirs(posixpath.dirname(final))
        _keep_private(session, posixpath.dirname(final),
                      [staged] + ([staged_blocks] if signed else []), row)
        session.hard_link(staged, final)
        # A delta's rebuild left the file's block signature beside it.
        if signed:
            session.remove_quietly(blocks.signature_path(final))
            session.hard_link(staged_blocks, blocks.signature_path(final))
    if ctx.destination_glance.image(image["id"]).get(
            "os_glance_import_task"):
        return  # Registered by an attempt whose answer was lost.
    session.flush(final)
    ctx.destination_glance.add_location(
        image["id"], ctx.destination.gvfs_location(image["id"]),
        row["hash_algo"], row["hash_value"])


def _keep_private(session, directory, paths, row):
    """The store's group and 0640 before the files are in it, or a refusal.

    The store directory is asked once, across the WAN, for all of them.
    The staged file stays for a retry once the DTN's GridFTP server makes
    files 0640 (``-perms 0640``) in the store's group, or this account
    owns them.
    """
    gid = session.group_of(directory)
    for path in paths:
        try:
            session.keep_private(path, gid)
        except OSError as e:
            raise exceptions.StageFailed(
                stage=STAGE, image=row["image_id"],
                reason="the arrived file cannot be given the store's "
                       "group and mode 0640 by this account (%s); have "
                       "the GridFTP server make files 0640 (-perms 0640) "
                       "in that group" % (e.strerror or type(e).__name__),
                detail=path) from e


def sidecar_command(site, image):
    """The ``gvfs-meta generate`` argv for an image registered in place."""
    argv = shlex.split(site.gvfs_meta_command) + ["generate"]
    if image.get("disk_format") in site.sidecar_whole_file_formats:
        argv.append("--whole-file")
    return argv + ["--", site.image_path(image["id"])]


def _make_sidecar(ctx, image, session):
    """The sidecar an upload through the store would have written.

    The proxies only read faster with it: a failure is logged, and the
    image, active already, stays migrated.
    """
    site = ctx.destination
    if not site.gvfs_meta_command:
        return
    try:
        session.run(sidecar_command(site, image))
    except OSError as e:
        LOG.warning("image %s at site %s has no metadata sidecar: %s",
                    image["id"], site.name, e)


def _check_staged(ctx, row, session, error):
    """After Glance refused the file: is it the data, or Glance?

    Glance's task reports only "Internal Error" either way, so the staged
    file is hashed where it is, on the DTN.  Wrong bytes: DataRejected;
    right bytes: the original (transient) error, to be retried.
    """
    staged = ctx.destination.staged_path(ctx.job_id, row["image_id"])
    if not session.exists(staged):
        raise error
    actual = session.digest(staged, row["hash_algo"])
    if actual is not None and actual != row["hash_value"]:
        raise exceptions.ChecksumMismatch(
            stage=STAGE, image=row["image_id"], algo=row["hash_algo"],
            actual=actual, expected=row["hash_value"]) from error
    raise error


def _verified(chunks, algo, expected, image_id):
    """Pass the chunks through; raise at the end if the digest differs.

    Raising inside the upload's body cuts it short: Glance sees an
    incomplete request and leaves the image queued.
    """
    digest = hashlib.new(algo)
    for chunk in chunks:
        digest.update(chunk)
        yield chunk
    if digest.hexdigest() != expected:
        raise exceptions.ChecksumMismatch(
            stage=STAGE, image=image_id, algo=algo,
            actual=digest.hexdigest(), expected=expected)


def _upload(ctx, row, image, session):
    chunks = session.read_chunks(
        ctx.destination.staged_path(ctx.job_id, row["image_id"]),
        glance_api.CHUNK)
    ctx.destination_glance.upload(image["id"], _verified(
        chunks, row["hash_algo"], row["hash_value"], row["image_id"]))


def _discard(ctx, row, image, session, in_place):
    """After wrong data: no image and no file left at the destination."""
    try:
        ctx.destination_glance.delete(image["id"])
    except exceptions.GvfsError as e:
        LOG.warning("cannot delete image %s at site %s: %s", image["id"],
                    ctx.destination.name, exceptions.described(e))
    ctx.record(row, destination_image_id=None)
    _remove_files(ctx, row, image, session, in_place)


def _remove_files(ctx, row, image, session, in_place):
    """The file at the destination DTN, staged and linked into the store."""
    if in_place:
        session.remove_image(ctx.destination.image_path(image["id"]))
    session.remove_image(ctx.destination.staged_path(ctx.job_id,
                                                     row["image_id"]))


def run(ctx, row):
    """Stage 3 for one image; returns the job-store values it completed."""
    site = ctx.destination
    image = _destination_image(ctx, row)
    if image["status"] == "active":
        if image.get("os_hash_value") == row["hash_value"]:
            return {}
        raise exceptions.ImageNotMigratable(
            image=row["image_id"], reason="an active image with another "
            "checksum has its id at site %s" % site.name)
    in_place = bool(site.gvfs_store)
    with dtnssh.connect(site, row["image_id"], STAGE) as session:
        try:
            _register(ctx, row, image, session, in_place)
        except exceptions.DataRejected as e:
            if not row.get("delta_base"):
                _discard(ctx, row, image, session, in_place)
                raise
            # Not activated: the image waits, queued, for the whole file.
            _remove_files(ctx, row, image, session, in_place)
            _send_whole_instead(ctx, row, session, e)
            image = _destination_image(ctx, row)
            try:
                _register(ctx, row, image, session, in_place)
            except exceptions.DataRejected:
                _discard(ctx, row, image, session, in_place)
                raise
        session.remove_image(site.staged_path(ctx.job_id, row["image_id"]))
    return {}


def _register(ctx, row, image, session, in_place):
    """The staged file into Glance; the image is active when it returns."""
    _share(ctx, row, image)
    try:
        if in_place:
            _register_in_place(ctx, row, image, session)
        else:
            _upload(ctx, row, image, session)
        ctx.destination_glance.wait_active(image["id"], row["hash_value"])
        if in_place:
            _make_sidecar(ctx, image, session)
    except exceptions.StageFailed as e:
        if e.transient and in_place:
            _check_staged(ctx, row, session, e)
        raise


def _send_whole_instead(ctx, row, session, error):
    """Glance refused the file a delta made: send the whole file now.

    The delta's checks passed, so the base's bytes are not those its
    signature describes (changed with the mtime put back, or damaged on
    disk): that signature goes, and the next delta against the base
    signs it again from its bytes.
    """
    base = row["delta_base"]
    LOG.warning("image %s: Glance refused the file rebuilt from a delta "
                "against %s (%s); the whole file goes instead, and the "
                "base is signed again before its next delta",
                row["image_id"], base, error)
    session.remove_quietly(blocks.signature_path(
        ctx.destination.image_path(base)))
    values = transfer.send_whole(ctx, row)
    ctx.record(row, stage_bytes=0, **dict(
        values, sent_bytes=(row["sent_bytes"] or 0) + row["size"]))
