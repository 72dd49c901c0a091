# SPDX-License-Identifier: Apache-2.0
"""Stage 2 by delta: only the blocks the destination lacks cross the link.

A golden image is usually rebuilt as a new image that differs from its
predecessor in a few per cent of its blocks, and the predecessor is at
the recovery site already.  So, where the destination has a ``gvfs``
store holding a related image (the *base*):

1. the destination DTN gives the base's block signature (cached next to
   it; ``gvfs-meta blocks``).  A base replicated from the source has its
   id there too, and its signature cached beside it: if that one is the
   same, the source uses it; else the conductor hands the destination's
   over the SSH sessions it has to both;
2. the source DTN writes the delta of the new version against it
   (``gvfs-meta delta``): the blocks the base lacks, and where in the base
   the others are;
3. the delta crosses the DTN link as any file does (GridFTP or Globus,
   checksummed);
4. the destination DTN rebuilds the file from the base and the delta into
   the job's staging directory (``gvfs-meta patch``), checking that the
   base is still the one signed and that what it made has the block
   signature of the new version -- from the signatures alone, reading
   neither file again.  Most of the file is the base's bytes: the
   destination copies the base there (``gvfs-meta prefill``) from step 1
   on, while the delta is made and sent, and the rebuild writes only
   what the delta changes.

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


def find_base(ctx, row):
    """The id of the destination image to send ``row`` against, or None.

    The one asked for, else the newest related image in the
    destination's gvfs store.
    """
    if row.get("delta_base"):
        return row["delta_base"]
    image = ctx.source_glance.image(row["image_id"])
    candidates = [c for c in ctx.destination_glance.images(
        status="active", disk_format=image.get("disk_format"))
        if related(image, c) and localcopy.in_gvfs_store(c, ctx.destination)]
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
                3, thread_name_prefix="gvfs-delta") as pool:
            # The SSH sessions open while the Images API is asked for a
            # base: an image without one wasted two logins, not time.
            sessions = [pool.submit(dtnssh.open_session, site,
                                    row["image_id"], STAGE)
                        for site in (ctx.destination, ctx.source)]
            found = pool.submit(find_base, ctx, row)
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
    # The rebuild's longest step, copying the base to where the new
    # version is made, needs no delta: the destination starts it now.
    prefilled = pool.submit(_prefill, there, destination, base_path, staged)
    rebuilt = False
    try:
        delta_bytes = _make_and_send(ctx, row, base, steps, pool, there,
                                     here)
        if delta_bytes is None:
            return None
        _wait_prefill(prefilled, image_id)
        steps.mark("prefill")
        there.run(_meta(
            destination, "patch", "--base", base_path, "--delta",
            delta_there, "--output", staged))
        steps.mark("patch")
        rebuilt = True
    finally:
        if not rebuilt:
            # A whole file may come to the staged name: no prefill there.
            futures.wait([prefilled])
            there.remove_image(staged)
        there.remove_quietly(delta_there)
    LOG.info("image %s: delta against %s in %s", image_id, base, steps)
    return delta_bytes


def _make_and_send(ctx, row, base, steps, pool, there, here):
    """The delta made at the source and sent; its bytes, or None."""
    source = ctx.source
    image_id = row["image_id"]
    signature_here, delta_here, delta_there = _paths(ctx, row)
    here.makedirs(posixpath.dirname(delta_here))
    # The two DTNs work at once: the source signs the new version (read
    # whole unless cached) while the destination signs the base.
    signed_here = pool.submit(here.run, _meta(
        source, "blocks", "--", row["source_path"]))
    own = pool.submit(_signature_at_source, ctx, here, base)
    identity, signature = _signed(there.run(_meta(
        ctx.destination, "blocks", "--identity", "--",
        ctx.destination.image_path(base))))
    base_blocks = _base_blocks_at_source(here, there, own.result(),
                                         identity, signature,
                                         signature_here)
    steps.mark("base signature")
    try:
        signed_here.result()
        steps.mark("new signature")
        limit = int(ctx.delta_max_ratio * max(row["size"] or 0, 1))
        stats = json.loads(here.run(_meta(
            source, "delta", "--base-blocks", base_blocks,
            "--max-bytes", str(limit), "--output", delta_here, "--",
            row["source_path"])))
        steps.mark("delta")
    finally:
        here.remove_quietly(signature_here)
    try:
        delta_bytes = stats["delta_bytes"]
        if not stats["written"]:
            LOG.info("image %s: a delta against %s would be %d "
                     "bytes of %d; sending it whole", image_id,
                     base, delta_bytes, row["size"])
            return None
        LOG.info("image %s goes as a delta against %s: %d bytes of "
                 "%d (%d new, %d copied, %d zero)", image_id, base,
                 delta_bytes, row["size"], stats["data_bytes"],
                 stats["copied_bytes"], stats["zero_bytes"])
        # The delta ends with a digest of itself, checked as it is read.
        transfer.send(ctx, row, delta_here, delta_there,
                      self_checking=True)
        steps.mark("transfer")
    finally:
        here.remove_quietly(delta_here)
    return delta_bytes


def _signed(output):
    """``(identity, path)`` from ``gvfs-meta blocks --identity``."""
    identity, _, path = output.splitlines()[-1].partition(" ")
    if not identity or not path:
        raise ValueError("gvfs-meta blocks printed %r" % output)
    return identity, path


def _signature_at_source(ctx, here, base):
    """The source's own signature of ``base``, ``(identity, path)``, or None.

    A base that was replicated from this site has its id here too, and
    most likely a signature cached beside it (made at its upload): if it
    is the one the destination has, nothing needs to cross to the source.
    Only a cached one: reading the file would cost more than the copy.
    """
    try:
        return _signed(here.run(_meta(
            ctx.source, "blocks", "--cached-only", "--identity", "--",
            ctx.source.image_path(base))))
    except (OSError, ValueError):
        return None


def _base_blocks_at_source(here, there, own, identity, signature,
                           signature_here):
    """The path, on the source DTN, of the base's signature to delta against.

    The source's own when it is the destination's (``own``); else the
    destination's, copied over the two SSH sessions to ``signature_here``.
    """
    if own is not None and own[0] == identity:
        return own[1]
    with there.sftp.open(signature, "rb") as f:
        f.prefetch()
        here.sftp.putfo(f, signature_here)
    return signature_here


def _prefill(there, destination, base_path, staged):
    """Copy the base to the staged name (``gvfs-meta prefill``)."""
    # The job's directory, where GridFTP is to write too, is made as
    # GridFTP makes it.
    there.make_dir_as_parent(posixpath.dirname(staged))
    there.run(_meta(destination, "prefill", "--base", base_path,
                    "--output", staged))


def _wait_prefill(prefilled, image_id):
    """Wait for the destination's prefill; a failed one only costs time.

    The rebuild then starts from an empty file, as it does without one.
    """
    try:
        prefilled.result()
    except OSError as e:
        LOG.info("image %s: the base could not be copied ahead of the "
                 "delta; the rebuild copies what it needs: %s", image_id, e)


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
