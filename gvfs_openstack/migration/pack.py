# SPDX-License-Identifier: Apache-2.0
"""The DTN paper's packing (``--pack tar``): many images, one transfer.

For many small images the fixed cost of each GridFTP transfer (start-up,
control round trips, both servers' checksums) outweighs its bytes.  The
paper therefore packs them: once every image of the job is on the source
DTN, the source DTN makes one compressed tar of them (GNU tar, sparse
aware, zstd on all cores), GridFTP (or the Globus Transfer service, for a
site with ``dtn_transfer = globus``) moves that one file with its
checksum checked, and the destination DTN unpacks exactly the job's images into
the job's staging directory -- where the remote copy finds each one as if
it had come alone, and checks each against its own digest as always.

Both DTNs run the two commands over the SSH access the remote copy
already uses; the archive is removed at both ends once unpacked.
"""

import posixpath

from oslo_log import log as logging

from gvfs_openstack import exceptions
from gvfs_openstack.migration import dtnssh
from gvfs_openstack.migration import transfer

LOG = logging.getLogger(__name__)

STAGE = "DTN-to-DTN transfer (packed)"
_ARCHIVE = ".gvfs-pack.tar.zst"


def archive_path(site, job_id):
    """Where a job's archive is made (source) or lands (destination)."""
    return site.export_path(site.staging_dir(job_id), _ARCHIVE)


def pack_command(archive, sources):
    """The ``tar`` argv packing ``sources`` (paths named by image id).

    Each member is stored under its own name (the image id) whatever its
    directory: staged copies and gvfs-store files alike.
    """
    argv = ["tar", "--sparse", "--use-compress-program", "zstd -T0 -3",
            "-cf", archive]
    for path in sources:
        argv += ["-C", posixpath.dirname(path), posixpath.basename(path)]
    return argv


def unpack_command(archive, directory, names):
    """The ``tar`` argv extracting exactly ``names`` into ``directory``."""
    return ["tar", "--use-compress-program", "zstd -d", "-xf", archive,
            "-C", directory, "--"] + list(names)


def _run(session, site, argv, lead, what):
    try:
        session.run(argv)
    except OSError as e:
        # A fault of the DTN's disk or tools: another try may not help,
        # but losing the job to one broken pipe would be worse.
        raise exceptions.StageFailed(
            stage=STAGE, image=lead, transient=True,
            reason="%s on the DTN of site %s failed" % (what, site.name),
            detail=str(e)) from e


class PackedTransfer:
    """Stage 2 for all ``rows`` at once, run as the first row's stage."""

    def __init__(self, rows):
        self.rows = rows

    def run(self, ctx, row):
        source, destination = ctx.source, ctx.destination
        lead = row["image_id"]
        names = [r["image_id"] for r in self.rows]
        sent = archive_path(source, ctx.job_id)
        received = archive_path(destination, ctx.job_id)
        LOG.info("packing %d images of job %s into %s", len(names),
                 ctx.job_id, sent)
        with dtnssh.connect(source, lead, STAGE) as session:
            # Images already in the gvfs store were never staged.
            session.makedirs(posixpath.dirname(sent))
            _run(session, source, pack_command(
                sent, [r["source_path"] for r in self.rows]), lead,
                "packing")
        values = transfer.send(ctx, row, sent, received)
        with dtnssh.connect(destination, lead, STAGE) as session:
            _run(session, destination, unpack_command(
                received, posixpath.dirname(received), names), lead,
                "unpacking")
            session.remove_quietly(received)
        with dtnssh.connect(source, lead, STAGE) as session:
            session.remove_quietly(sent)
        return values
