# SPDX-License-Identifier: Apache-2.0
"""Stage 2, DTN to DTN: a GridFTP third-party transfer.

The conductor only drives the two DTNs' GridFTP servers (``globus-url-copy
SRC DST`` with two server URLs): the data goes straight from one DTN to
the other over parallel TCP streams (``-p``), with restart markers
(``-rst``: a broken stream goes on from the last marker instead of byte
0), a stall timeout, and the two servers comparing MD5 checksums at the
end (``-verify-checksum``).

Restart markers live only as long as one ``globus-url-copy``, and its
parallel streams write the file out of order, so when the conductor
itself stops no prefix of the file is known to have arrived.  A large
image therefore crosses in segments (``-off``/``-len``, written at the
same offsets at the destination), each recorded in the job store as it
completes: a restarted transfer goes on from the last whole segment.
``-verify-checksum`` of a segment compares the wrong ranges (the
destination's checksum is not taken over the segment), so a segmented
file is checked once whole at the end, with ``-sync -sync-level 3``: the
servers compare the whole file's checksums and send it again if they
differ.
"""

import os
import re
import subprocess

from oslo_log import log as logging

from gvfs_openstack import exceptions
from gvfs_openstack.migration import lifeline

LOG = logging.getLogger(__name__)

STAGE = "DTN-to-DTN transfer"

#: ``[site:*] gridftp_data_protection`` -> globus-url-copy's flags.
_PROTECTION_FLAGS = {"private": ["-dcpriv"], "safe": ["-dcsafe"],
                     "clear": []}
_PROTECTION_STRENGTH = ("clear", "safe", "private")

#: What globus-url-copy says when retrying cannot help.
_PERMANENT = re.compile(r"No such file|Permission denied|not a directory|"
                        r"Is a directory|No space left|Checksum",
                        re.IGNORECASE)
_PERF = re.compile(r"^\s*(\d+) bytes\s")
#: What globus-url-copy -vb prints when it starts sending a file (a sync
#: that finds the files equal prints nothing).
_SENDING = re.compile(r"^Source: ", re.MULTILINE)


def command(program, source, destination, source_path, destination_path,
            segment=None, self_checking=False):
    """The ``globus-url-copy`` argv moving one file between two DTNs.

    Parallelism, restarts, stall timeout and checksum verification are
    the source site's settings: it is the one sending.  ``segment``
    ``(offset, length)``: only those bytes, written at the same offset
    (verified later with :func:`check_command`).  A ``self_checking``
    file (a delta, which ends with a digest of all of it) is not
    checksummed again by the servers.
    """
    argv = _common(program, source, destination)
    if segment is not None:
        argv += ["-off", str(segment[0]), "-len", str(segment[1])]
    elif source.gridftp_verify_checksum and not self_checking:
        argv += ["-verify-checksum", "-checksum-alg", "MD5"]
    return argv + [source.gridftp(source_path),
                   destination.gridftp(destination_path)]


def check_command(program, source, destination, source_path,
                  destination_path):
    """Compare the whole file's checksums; send it again if they differ."""
    return _common(program, source, destination) + [
        "-sync", "-sync-level", "3", "-verify-checksum", "-checksum-alg",
        "MD5", source.gridftp(source_path),
        destination.gridftp(destination_path)]


def _common(program, source, destination):
    return [program, "-vb", "-p", str(source.gridftp_parallel), "-fast",
            "-rst", "-rst-retries", str(source.gridftp_restarts),
            "-stall-timeout", str(source.gridftp_stall_timeout), "-cd"] + \
        _PROTECTION_FLAGS[data_protection(source, destination)]


def data_protection(source, destination):
    """The data channel's protection between two sites: the stronger one.

    InvalidConfig if one site's server cannot protect it (``clear``, an
    anonymous ``ftp://`` server) and the other asks for protection:
    globus-url-copy would either fail or send in clear text.
    """
    levels = {site.name: site.gridftp_data_protection
              for site in (source, destination)}
    if "clear" in levels.values() and len(set(levels.values())) > 1:
        [clear] = [name for name, level in levels.items()
                   if level == "clear"]
        [other] = [name for name in levels if name != clear]
        raise exceptions.InvalidConfig(
            option="[site:%s] gridftp_data_protection" % clear,
            reason="site %s sends and receives in clear text and site %s "
                   "asks for %s" % (clear, other, levels[other]))
    return max(levels.values(), key=_PROTECTION_STRENGTH.index)


def segments(size, segment_bytes, done):
    """``(offset, length)`` of the segments still to send after ``done``.

    None when the file crosses in one transfer (small, or segments off).
    """
    if not segment_bytes or size is None or size <= segment_bytes:
        return None
    return [(offset, min(segment_bytes, size - offset))
            for offset in range(done, size, segment_bytes)]


def resume_point(row):
    """Where a restarted transfer of ``row`` goes on (whole segments)."""
    return row.get("transfer_done") or 0


def _pump_progress(stream, row, ctx, lines, base):
    """Keep the output; report each ``-vb`` byte count as progress."""
    for line in stream:
        lines.append(line)
        match = _PERF.match(line)
        if match and ctx is not None:
            ctx.progress(row, base + int(match.group(1)))


def run(ctx, row):
    """Stage 2 for one image; returns the job-store values it completed."""
    send(ctx, row, row["source_path"],
         ctx.destination.staged_path(ctx.job_id, row["image_id"]),
         row["size"])
    return {}


def send(ctx, row, source_path, destination_path, size=None,
         self_checking=False):
    """Move one file between the DTNs; progress is reported on ``row``.

    A file of known ``size`` larger than the source site's segment size
    crosses in segments, from the row's resume point.  A
    ``self_checking`` one (:func:`command`) is sent whole.
    """
    program, source, destination = ctx.globus_url_copy, ctx.source, \
        ctx.destination
    done = resume_point(row)
    parts = None if self_checking else segments(
        size, source.gridftp_segment_bytes, done)
    if parts is None:
        _run(row, command(program, source, destination, source_path,
                          destination_path, self_checking=self_checking),
             ctx)
        return
    if done:
        LOG.info("transfer of %s goes on at byte %d of %d",
                 row["image_id"], done, size)
        ctx.progress(row, done)
    for offset, length in parts:
        _run(row, command(program, source, destination, source_path,
                          destination_path, (offset, length)), ctx, offset)
        ctx.record(row, transfer_done=offset + length)
    if source.gridftp_verify_checksum:
        output = _run(row, check_command(program, source, destination,
                                         source_path, destination_path))
        if _SENDING.search(output):
            LOG.warning("transfer of %s: the file at the destination "
                        "differed from the source when whole; it was "
                        "sent again and verified", row["image_id"])


def _run(row, argv, ctx=None, base=0):
    """Run one globus-url-copy; its output, or StageFailed.

    With ``ctx``, its byte counts are the stage's progress from ``base``.
    """
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
        _pump_progress(proc.stdout, row, ctx, lines, base)
    output = "".join(lines)
    if proc.returncode != 0:
        error = " ".join(line.strip() for line in lines
                         if line.strip())[-1000:]
        raise exceptions.StageFailed(
            stage=STAGE, image=row["image_id"],
            reason="%s exited with %d" % (os.path.basename(argv[0]),
                                          proc.returncode),
            detail=error, transient=not _PERMANENT.search(output))
    return output
