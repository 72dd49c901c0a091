"""Stage 2, DTN to DTN: a GridFTP third-party transfer.

The conductor only drives the two DTNs' GridFTP servers (``globus-url-copy
SRC DST`` with two server URLs): the data goes straight from one DTN to
the other over parallel TCP streams (``-p``), with restart markers
(``-rst``: a broken stream goes on from the last marker instead of byte
0), a stall timeout, and the two servers comparing MD5 checksums at the
end (``-verify-checksum``).
"""

import logging
import re
import subprocess

from gvfs_openstack import exceptions
from gvfs_openstack.migration import lifeline

LOG = logging.getLogger(__name__)

STAGE = "DTN-to-DTN transfer"

#: What globus-url-copy says when retrying cannot help.
_PERMANENT = re.compile(r"No such file|Permission denied|not a directory|"
                        r"Is a directory|No space left|Checksum",
                        re.IGNORECASE)
_PERF = re.compile(r"^\s*(\d+) bytes\s")


def command(program, source, destination, source_path, destination_path):
    """The ``globus-url-copy`` argv moving one file between two DTNs.

    Parallelism, restarts, stall timeout and checksum verification are
    the source site's settings: it is the one sending.
    """
    argv = [program, "-vb", "-p", str(source.gridftp_parallel), "-fast",
            "-rst", "-rst-retries", str(source.gridftp_restarts),
            "-stall-timeout", str(source.gridftp_stall_timeout), "-cd"]
    if source.gridftp_verify_checksum:
        argv += ["-verify-checksum", "-checksum-alg", "MD5"]
    argv += [source.gridftp(source_path),
             destination.gridftp(destination_path)]
    return argv


def _pump_progress(stream, row, ctx, lines):
    """Keep the output; report each ``-vb`` byte count as progress."""
    for line in stream:
        lines.append(line)
        match = _PERF.match(line)
        if match:
            ctx.progress(row, int(match.group(1)))


def run(ctx, row):
    """Stage 2 for one image; returns the job-store values it completed."""
    send(ctx, row, row["source_path"],
         ctx.destination.staged_path(ctx.job_id, row["image_id"]))
    return {}


def send(ctx, row, source_path, destination_path):
    """Move one file between the DTNs; progress is reported on ``row``."""
    argv = command(ctx.globus_url_copy, ctx.source, ctx.destination,
                   source_path, destination_path)
    LOG.info("transfer of %s: %s", row["image_id"], " ".join(argv))
    lines = []
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, text=True,
                                preexec_fn=lifeline.preexec())
    except OSError as e:
        raise exceptions.StageFailed(
            stage=STAGE, image=row["image_id"],
            reason="cannot run %s: %s" % (argv[0], e)) from e
    with proc:
        _pump_progress(proc.stdout, row, ctx, lines)
    output = "".join(lines)
    if proc.returncode != 0:
        error = " ".join(line.strip() for line in lines
                         if line.strip())[-1000:]
        raise exceptions.StageFailed(
            stage=STAGE, image=row["image_id"],
            reason="%s exited with %d: %s" % (argv[0], proc.returncode,
                                              error),
            transient=not _PERMANENT.search(output))
