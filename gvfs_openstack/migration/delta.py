# SPDX-License-Identifier: Apache-2.0
"""Stage 2 by delta: only the blocks the destination lacks cross the link.

A golden image is usually rebuilt as a new image that differs from its
predecessor in a few per cent of its blocks, and the predecessor is at
the recovery site already.  So, where the destination has a ``gvfs``
store holding a related image (the *base*):

1. the destination DTN says which block signature the base has (cached
   next to it) and starts copying the base to where the new version is
   to be made -- most of the new file is the base's bytes -- while the
   other steps go on (``gvfs-meta rebuild``);
2. the source DTN writes the delta of the new version against it
   (``gvfs-meta delta``): the blocks the base lacks, and where in the base
   the others are.  A base replicated from the source has its id there
   too, and its signature cached beside it: the source starts at once
   against that one, and if it is not the destination's, the conductor
   hands the destination's over the SSH sessions it has to both and the
   delta is made again;
3. the delta crosses the DTN link as any file does (GridFTP, which need
   not checksum it: it ends with a digest of itself; or Globus);
4. the destination DTN, told where the delta is, rebuilds the file from
   the base's copy and the delta in the job's staging directory,
   checking that the base is still the one signed and that what it made
   has the block signature of the new version -- from the signatures
   alone, reading neither file again.

The remote copy then finds the file staged as if it had come whole, and
Glance reads it once, checks its ``os_hash_value`` and activates it only
if it is the image's: one pass over the file's bytes at the destination,
not two.  Any failure of the delta -- no base file, a damaged delta, a
base changed since it was signed, a delta too large to be worth it -- is
logged and the whole file is sent instead; so is one whose file Glance
refuses (a base whose bytes changed under a signature still fresh):
the remote copy sends it whole and forgets the base's signature
(:mod:`gvfs_openstack.migration.remotecopy`).  A delta only ever saves
time, it never fails an image.
"""

from concurrent import futures
import contextlib
import json
import posixpath
import re
import shlex
import time

from oslo_log import log as logging

from gvfs_openstack.delta import statuses
from gvfs_openstack import exceptions
from gvfs_openstack.migration import dtnssh
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import localcopy
from gvfs_openstack.migration import transfer

LOG = logging.getLogger(__name__)

STAGE = "DTN-to-DTN transfer (delta)"

#: What separates the words of an image name.
_WORDS = re.compile(r"[-_. ]+")
#: Words that say which build or which file format, not which image:
#: ``image0.raw`` and ``image1.raw`` are no family.
_IGNORED_WORDS = {"latest", "current", "new", "old",
                  "raw", "img", "image", "disk", "iso", "qcow", "vmdk",
                  "vhd", "vhdx", "vdi"}


def family(name):
    """The words of an image's name that are not versions or dates.

    ``debian-12-genericcloud-20261125`` and ``debian-12-genericcloud-
    20261101`` are ``debian-genericcloud``; ``golden-v2`` is ``golden``.
    Any word holding a digit goes (``x86_64`` too: the architecture is
    compared on its own, as Glance's ``architecture`` property).
    """
    words = [w for w in _WORDS.split((name or "").lower())
             if w and not any(c.isdigit() for c in w)
             and w not in _IGNORED_WORDS]
    return "-".join(words)


def related(image, candidate):
    """Whether ``candidate`` may be an earlier version of ``image``."""
    return (candidate["id"] != image["id"] and
            candidate.get("status") == "active" and
            candidate.get("disk_format") == image.get("disk_format") and
            candidate.get("os_distro") == image.get("os_distro") and
            candidate.get("architecture") == image.get("architecture") and
            family(image.get("name")) != "" and
            family(candidate.get("name")) == family(image.get("name")))


def may_base(ctx, image, candidate):
    """Whether the requester may have ``candidate`` as a base.

    Only an image of the requester's project at the destination (of the
    image's own, for an operator's job), or a public one: the job shows
    its base's id, and the bytes sent are an oracle of the blocks the
    two share, so another project's private image must never be chosen
    for sharing a name.
    """
    owner = ctx.destination.owner_of(ctx.project_id or image.get("owner"))
    return candidate.get("visibility") == "public" or (
        owner is not None and candidate.get("owner") == owner)


def find_base(ctx, row, pool):
    """The id of the destination image to send ``row`` against, or None.

    The one asked for (resolved with the requester's trust when the job
    was made), else the newest related image in the destination's gvfs
    store that :func:`may_base`.  Both Images APIs are asked at once, on
    ``pool``: each call logs in to its own Keystone first, and the
    lookup is on the delta's critical path.
    """
    if row.get("delta_base"):
        return row["delta_base"]
    asked = pool.submit(ctx.source_glance.image, row["image_id"])
    listed = list(ctx.destination_glance.images(status="active"))
    image = asked.result()
    candidates = [c for c in listed
                  if related(image, c) and may_base(ctx, image, c) and
                  localcopy.in_gvfs_store(c, ctx.destination)]
    if not candidates:
        return None
    return max(candidates, key=lambda c: c.get("created_at") or "")["id"]


def run(ctx, row):
    """Send ``row`` as a delta; its job-store values (None: send it whole)."""
    if not ctx.delta_transfer or not ctx.destination.gvfs_store:
        return None
    base = None
    steps = _Steps()
    try:
        with futures.ThreadPoolExecutor(
                4, thread_name_prefix="gvfs-delta") as pool:
            # The SSH sessions open while the Images API is asked for a
            # base: an image without one wasted two logins, not time.
            sessions = [pool.submit(dtnssh.open_session, site,
                                    row["image_id"], STAGE)
                        for site in (ctx.destination, ctx.source)]
            found = pool.submit(find_base, ctx, row, pool)
            with _closing(sessions) as (there, here):
                base = found.result()
                steps.mark("finding the base and connecting")
                if base is None:
                    return None
                sent = _send(ctx, row, base, steps, pool, there, here)
    except jobs.Cancelled:
        raise
    except (exceptions.GvfsError, OSError, ValueError, KeyError) as e:
        LOG.warning("delta transfer of image %s against %s failed; the "
                    "whole file goes instead: %s", row["image_id"], base, e)
        return None
    if sent is None:
        return None
    return {"delta_base": base, "sent_bytes": sent}


def _paths(ctx, row):
    source, destination = ctx.source, ctx.destination
    image_id = row["image_id"]
    here = source.export_path(source.staging_dir(ctx.job_id))
    there = destination.export_path(destination.staging_dir(ctx.job_id))
    return (posixpath.join(here, image_id + ".base-blocks"),
            posixpath.join(here, image_id + ".delta"),
            posixpath.join(there, image_id + ".delta"))


def _send(ctx, row, base, steps, pool, there, here):
    """The delta of ``row`` against ``base``, sent and rebuilt; its bytes.

    None when it is not worth it or cannot be made: the whole file goes.
    ``there`` and ``here`` are the sessions to the destination and the
    source DTN.
    """
    destination = ctx.destination
    image_id = row["image_id"]
    base_path = destination.image_path(base)
    staged = destination.staged_path(ctx.job_id, image_id)
    delta_there = _paths(ctx, row)[2]
    if not there.exists(base_path):
        LOG.info("image %s: its base %s is not in the gvfs store of "
                 "site %s; sending it whole", image_id, base,
                 destination.name)
        return None
    _make_job_dir(there, staged)
    # The destination says which signature the base has, then copies it
    # to where the new version is made -- the rebuild's longest step,
    # which needs no delta -- while the source makes and sends it.
    rebuild = there.start(_meta(destination, "rebuild", "--base",
                                base_path, "--output", staged))
    rebuilt = False
    try:
        delta_bytes = _make_and_send(ctx, row, base, steps, pool, rebuild,
                                     there, here)
        if delta_bytes is None:
            return None
        rebuild.finish(delta_there)
        steps.mark("rebuild")
        rebuilt = True
    finally:
        if not rebuilt:
            # A whole file may come to the staged name: no copy there.
            rebuild.abandon()
            there.remove_image(staged)
        there.remove_quietly(delta_there)
    LOG.info("image %s: delta against %s in %s", image_id, base, steps)
    return delta_bytes


def _make_job_dir(there, staged):
    """The job's directory at the destination, made as GridFTP makes it.

    GridFTP writes there too.  Where it cannot be made so, GridFTP makes
    it with the delta, and the base is not copied ahead (only slower).
    """
    try:
        there.make_dir_as_parent(posixpath.dirname(staged))
    except OSError as e:
        LOG.info("the base is not copied ahead of the delta: %s", e)


def _make_and_send(ctx, row, base, steps, pool, rebuild, there, here):
    """The delta made at the source and sent; its bytes, or None.

    Made at once against the source's own copy of the base (a base
    replicated from this site has its id here too, and its signature
    cached beside it), while the destination says which signature its
    base has; if the two differ, or the source has none, against the
    destination's, handed over.
    """
    source = ctx.source
    image_id = row["image_id"]
    signature_here, delta_here, delta_there = _paths(ctx, row)
    here.makedirs(posixpath.dirname(delta_here))
    limit = int(ctx.delta_max_ratio * max(row["size"] or 0, 1))
    make = ["--max-bytes", str(limit), "--output", delta_here, "--",
            row["source_path"]]
    made_here = pool.submit(_delta_against_own_copy, here, source, base,
                            make)
    try:
        identity, signature = _signed(rebuild.readline())
        steps.mark("base signature")
        stats = made_here.result()
        if stats is None or stats["base_identity"] != identity:
            with there.sftp.open(signature, "rb") as f:
                f.prefetch()
                here.sftp.putfo(f, signature_here)
            steps.mark("signature handed over")
            stats = json.loads(here.run(_meta(
                source, "delta", "--base-blocks", signature_here, *make)))
        steps.mark("delta")
        if not stats["written"]:
            LOG.info("image %s: a delta against %s would be %d "
                     "bytes of %d; sending it whole", image_id,
                     base, stats["delta_bytes"], row["size"])
            return None
        LOG.info("image %s goes as a delta against %s: %d bytes of "
                 "%d (%d new, %d copied, %d zero)", image_id, base,
                 stats["delta_bytes"], row["size"], stats["data_bytes"],
                 stats["copied_bytes"], stats["zero_bytes"])
        # The delta ends with a digest of itself, checked as it is read.
        transfer.send(ctx, row, delta_here, delta_there,
                      self_checking=True)
        steps.mark("transfer")
        return stats["delta_bytes"]
    finally:
        futures.wait([made_here])
        here.remove_quietly(signature_here)
        here.remove_quietly(delta_here)


def _delta_against_own_copy(here, source, base, make):
    """``gvfs-meta delta`` against the source's copy of ``base``: its JSON.

    None if the source has no such copy, or no fresh signature of it.
    """
    try:
        return json.loads(here.run(_meta(
            source, "delta", "--base", source.image_path(base), *make)))
    except dtnssh.CommandFailed as e:
        if e.status != statuses.BASE_UNKNOWN:
            raise
        return None


def _signed(line):
    """``(identity, path)`` from the line ``gvfs-meta rebuild`` starts with."""
    identity, _, path = line.strip().partition(" ")
    if not identity or not path:
        raise ValueError("gvfs-meta rebuild began with %r" % line)
    return identity, path


class _Steps:
    """How long each step of a delta took, for the log."""

    def __init__(self):
        self._last = time.monotonic()
        self._seconds = []

    def mark(self, step):
        now = time.monotonic()
        self._seconds.append((step, now - self._last))
        self._last = now

    def __str__(self):
        return ", ".join("%s %.2f s" % pair for pair in self._seconds)


@contextlib.contextmanager
def _closing(sessions):
    """The sessions being opened, once all are; all closed on the way out.

    One that fails to open fails the whole; those that opened are still
    closed.
    """
    opened, error = [], None
    for session in sessions:
        try:
            opened.append(session.result())
        except BaseException as e:
            error = error or e
    try:
        if error is not None:
            raise error
        yield opened
    finally:
        for session in opened:
            session.close()


def _meta(site, *args):
    return shlex.split(site.gvfs_meta_command) + list(args)
