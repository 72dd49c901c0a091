# SPDX-License-Identifier: Apache-2.0
"""Stage 1, local copy: the source Glance's bytes onto the source DTN's export.

The DTN paper's best case in user space: the DTN serves NFS, the
controller writes to it with large UNSTABLE WRITEs (the server's async
mode), many in flight, and one COMMIT per ``nfs_commit_mib`` (the client's
async mode) -- no root, no kernel mount, no staging copy on the controller:
the download streams straight into the WRITEs.  All-zero blocks are not
written (the file is sparse on the DTN), and the image's digest is computed
on the way and checked against the one Glance recorded.  With
``local_copy_compression = zstd`` and a GVFS server proxy in front of the
DTN's NFS server, runs of non-zero blocks go as zstd chunks of the bulk
channel instead (the paper's compressed copy, without its staging file).

An image already on the export (in the site's ``gvfs`` store) is not
copied at all: the transfer reads it where it is.
"""

import asyncio
import contextlib
import functools
import hashlib

from oslo_log import log as logging

from gvfs_openstack.client import nfs as nfs_client
from gvfs_openstack.client import write_batch
from gvfs_openstack import exceptions
from gvfs_openstack.images import locations
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs import nfs3

LOG = logging.getLogger(__name__)

STAGE = "local copy"


def in_gvfs_store(image, site):
    """Whether the image's bytes already are in ``site``'s gvfs store."""
    if not site.gvfs_store:
        return False
    for location in image.get("locations") or []:
        try:
            store, image_id = locations.parse(location.get("url", ""))
        except ValueError:
            continue
        if store == site.gvfs_store and image_id == image["id"]:
            return True
    stores = (image.get("stores") or "").split(",")
    return site.gvfs_store in stores and \
        locations.is_image_id(image["id"])


#: Who asks whose the images are, when ``nfs_uid`` is unset.
_NOBODY = 65534


@contextlib.asynccontextmanager
async def dtn_mount(site):
    """An NFS client of the site's DTN, its export mounted.

    Its calls are made as ``[site] nfs_uid``/``nfs_gid``, or where unset
    as the owner of ``dtn_images_dir``: the file account, found by a
    LOOKUP and GETATTR made as nobody.  Never uid 0 by default: a DTN's
    NFS server that does not squash root would make every file the
    conductor writes root's.  With ``[site] dtn_nfs_tls_*`` the calls go
    over mutual TLS to the DTN's server proxy.
    """
    uid = _NOBODY if site.nfs_uid is None else site.nfs_uid
    gid = _NOBODY if site.nfs_gid is None else site.nfs_gid
    async with nfs_client.NfsClient(
            site.nfs_host, site.nfs_port, site.mount_port, uid=uid,
            gid=gid, wsize=site.nfs_wsize, window=site.nfs_window,
            tls=site.nfs_tls) as nfs:
        await nfs.mount(site.dtn_export)
        if site.nfs_uid is None or site.nfs_gid is None:
            owner = await nfs.getattr(
                await nfs.lookup_path(site.dtn_images_dir))
            nfs.act_as(owner.uid if site.nfs_uid is None else uid,
                       owner.gid if site.nfs_gid is None else gid)
        yield nfs


async def makedirs(nfs, path, mode=0o755):
    """``mkdir -p`` of a path relative to the export; its handle."""
    fh = nfs.root
    for part in [p for p in path.split("/") if p]:
        try:
            fh = (await nfs.lookup(fh, part)).object
        except NfsError as e:
            if e.status != const.NfsStat.NFS3ERR_NOENT:
                raise
            try:
                fh = await nfs.mkdir(fh, part, mode)
            except NfsError as e2:
                if e2.status != const.NfsStat.NFS3ERR_EXIST:
                    raise
                fh = (await nfs.lookup(fh, part)).object
    return fh


def _new_digest(image):
    """A hash of the image's algorithm, to check the copy against Glance."""
    try:
        return hashlib.new(image["os_hash_algo"])
    except (TypeError, ValueError) as e:
        raise exceptions.ImageNotMigratable(
            image=image["id"], reason="unknown hash algorithm %r"
            % image["os_hash_algo"]) from e


async def _rehash_prefix(nfs, fh, length, digest):
    """Feed the first ``length`` bytes already on the DTN to ``digest``."""
    async for _, data in nfs.read_file(fh, length):
        digest.update(data)


def _take(chunks, digest):
    """The next chunk, hashed; None at the end.

    In a worker thread: the download's reads and the hash (hashlib lets
    go of the GIL for large buffers) overlap the event loop's WRITEs.
    """
    chunk = next(chunks, None)
    if chunk is not None:
        digest.update(chunk)
    return chunk


async def _next_chunk(chunks, digest):
    return await asyncio.get_running_loop().run_in_executor(
        None, _take, chunks, digest)


async def _copy(nfs, fh, chunks, offset, digest, site, on_commit, send,
                run_limit):
    """Write the chunks from ``offset``; skip zero blocks; commit often.

    Runs of non-zero ``wsize`` blocks go as one call of ``send`` up to
    ``run_limit`` bytes.
    """
    batch = write_batch.WriteBatch(nfs, fh, send)
    zero = bytes(nfs.wsize)
    position = offset
    pending = b""
    run, run_at = [], position

    async def flush():
        nonlocal run
        if run:
            await batch.add(run_at, b"".join(run))
            run = []
        if batch.size >= site.nfs_commit_bytes:
            await batch.commit()
            on_commit(position)

    while True:
        chunk = await _next_chunk(chunks, digest)
        if chunk is None:
            break
        data = pending + chunk if pending else chunk
        view = memoryview(data)
        whole = len(view) - len(view) % nfs.wsize
        for start in range(0, whole, nfs.wsize):
            # A copy, but bytes compare as one memcmp where a memoryview
            # compares byte by byte (some ms a MiB of zeros).
            piece = bytes(view[start:start + nfs.wsize])
            if piece == zero:
                position += nfs.wsize
                await flush()
                continue
            if not run:
                run_at = position
            run.append(piece)
            position += nfs.wsize
            if len(run) * nfs.wsize >= run_limit:
                await flush()
        pending = bytes(view[whole:])
    if pending and pending != zero[:len(pending)]:
        if not run:
            run_at = position
        run.append(pending)
    position += len(pending)
    await flush()
    await batch.commit()
    return position


async def _bulk_write(nfs, site, image_id, fh, offset, data):
    """One compressed chunk; a chunk the proxy refuses fails the image.

    Sending it again would not help: the proxy refuses what it cannot
    decompress into a chunk it takes, mostly a ``local_copy_chunk_mib``
    above half its ``max_record_size``.
    """
    try:
        return await nfs.bulk_write(fh, offset, data)
    except NfsError as e:
        if e.status != const.NfsStat.NFS3ERR_INVAL:
            raise
        raise exceptions.StageFailed(
            stage=STAGE, image=image_id, reason=(
                "the DTN proxy of site %s refused a compressed chunk of %d "
                "bytes (its log says why); [site:%s] local_copy_chunk_mib "
                "must be at most half its [proxy] max_record_size" % (
                    site.name, len(data), site.name)),
            detail="%s:%d" % (site.nfs_host, site.nfs_port)) from e


async def _sender(nfs, site, image_id):
    """How runs of data go, and the most bytes of one.

    Compressed chunks where asked and served, else one WRITE per block.
    """
    if site.local_copy_compression == "zstd":
        if await nfs.has_bulk_channel():
            return (functools.partial(_bulk_write, nfs, site, image_id),
                    site.local_copy_chunk_bytes)
        LOG.warning("local_copy_compression = zstd, but %s:%d is no GVFS "
                    "server proxy (no bulk channel): plain NFS WRITEs",
                    site.nfs_host, site.nfs_port)
    return nfs.write_all, nfs.wsize


async def _local_copy(site, glance, image, staging, resume_from, on_commit):
    async with dtn_mount(site) as nfs:
        directory = await makedirs(nfs, staging)
        name = image["id"]
        digest = _new_digest(image)
        try:
            fh = (await nfs.lookup(directory, name)).object
            size_there = (await nfs.getattr(fh)).size
        except NfsError as e:
            if e.status != const.NfsStat.NFS3ERR_NOENT:
                raise
            fh, size_there = await nfs.create(directory, name), 0
        offset = min(resume_from, size_there)
        if offset:
            LOG.info("local copy of %s resumes at byte %d", name, offset)
            await _rehash_prefix(nfs, fh, offset, digest)
        # Bytes past the resume point may be half-written: cut them off.
        await nfs.setattr(fh, nfs3.Sattr(size=offset))
        # Killed after its last COMMIT: every byte is there already (and
        # Glance answers a range from the very end with 416).
        chunks = glance.data(image["id"], offset) \
            if offset < image["size"] else iter(())
        written = await _copy(nfs, fh, chunks, offset, digest, site,
                              on_commit, *await _sender(nfs, site, name))
        # A trailing hole is no WRITE: the size says where the file ends.
        await nfs.setattr(fh, nfs3.Sattr(size=written))
        return written, digest.hexdigest()


def run(ctx, row):
    """Stage 1 for one image; returns the job-store values it completed.

    ``ctx`` is the pipeline's StageContext, ``row`` the image's row.
    """
    image = ctx.source_glance.image(row["image_id"])
    if image.get("status") != "active":
        raise exceptions.ImageNotMigratable(
            image=row["image_id"],
            reason="it is %s, not active" % image.get("status"))
    if in_gvfs_store(image, ctx.source):
        path = ctx.source.image_path(image["id"])
        LOG.info("image %s is on the DTN already (%s): no local copy",
                 image["id"], path)
        return {"source_path": path}
    staging = ctx.source.staging_dir(ctx.job_id)
    written, digest = asyncio.run(_local_copy(
        ctx.source, ctx.source_glance, image, staging, row["stage_bytes"],
        lambda done: ctx.progress(row, done)))
    if written != image["size"] or digest != image["os_hash_value"]:
        raise exceptions.ChecksumMismatch(
            stage=STAGE, image=image["id"], algo=image["os_hash_algo"],
            actual="%s (%d bytes)" % (digest, written),
            expected="%s (%d bytes)" % (image["os_hash_value"],
                                        image["size"]),
            transient=True)
    return {"source_path": ctx.source.staged_path(ctx.job_id, image["id"])}
