# SPDX-License-Identifier: Apache-2.0
"""``gvfs-meta``: make and check metadata sidecars on the DTN.

    gvfs-meta generate /srv/images/*.img
    gvfs-meta generate --whole-file /srv/images/memory.state
    gvfs-meta verify /srv/images/golden.img

``generate`` writes ``.gvfs-meta.<name>`` next to each file (zero map,
digest, action); ``verify`` says whether a file still matches its sidecar.
Run it as the account that owns the export's files.
"""

import argparse
import hashlib
import os
import sys
import time

from gvfs_openstack.sidecar import format as meta_format
from gvfs_openstack.sidecar import scan

MIB = 1024 * 1024


def _generate(args):
    status = 0
    for path in args.files:
        if meta_format.is_sidecar(os.path.basename(path)):
            continue  # A glob may catch the sidecars themselves.
        start = time.monotonic()
        try:
            sidecar = scan.scan_file(
                path, "whole_file" if args.whole_file else "on_demand",
                args.compression if args.whole_file else "none")
            target = scan.write_sidecar(path, sidecar)
        except (OSError, scan.FileChanged) as e:
            print("gvfs-meta: %s: %s" % (path, e), file=sys.stderr)
            status = 1
            continue
        seconds = max(time.monotonic() - start, 1e-9)
        zero = sidecar.zeros.zero_bytes
        print("%s: %d bytes, %.1f%% zero in %d extents, %s, %.0f MiB/s "
              "-> %s" % (path, sidecar.size,
                         100.0 * zero / max(sidecar.size, 1),
                         len(sidecar.zeros.starts), sidecar.action,
                         sidecar.size / MIB / seconds, target))
    return status


def verify(path):
    """Why ``path`` does not match its sidecar, or None if it does."""
    with open(scan.sidecar_path(path), "rb") as f:
        sidecar = meta_format.parse(f.read(meta_format.MAX_BYTES + 1))
    st = os.stat(path)
    if not sidecar.matches(st.st_size, st.st_mtime_ns):
        return "stale: made for another size or mtime"
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        position = 0
        for start, end in sidecar.zeros.nonzero(0, sidecar.size) + [
                (sidecar.size, sidecar.size)]:
            while position < start:  # A zero extent: it must be zeros.
                chunk = f.read(min(scan.READ_SIZE, start - position))
                if not chunk:
                    return "shorter than its sidecar says"
                if chunk.count(0) != len(chunk):
                    return "a zero extent near %d holds data" % position
                position += len(chunk)
            while position < end:
                chunk = f.read(min(scan.READ_SIZE, end - position))
                if not chunk:
                    return "shorter than its sidecar says"
                digest.update(chunk)
                position += len(chunk)
    if digest.hexdigest() != sidecar.digest:
        return "digest mismatch"
    return None


def _verify(args):
    status = 0
    for path in args.files:
        try:
            problem = verify(path)
        except (OSError, meta_format.SidecarError) as e:
            problem = str(e)
        print("%s: %s" % (path, problem or "ok"))
        status |= problem is not None
    return status


def main(argv=None):
    parser = argparse.ArgumentParser(prog="gvfs-meta", description=__doc__,
                                     formatter_class=argparse.
                                     RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="action", required=True)
    generate = sub.add_parser("generate", help="write sidecars")
    generate.add_argument("files", nargs="+", metavar="FILE")
    generate.add_argument(
        "--whole-file", action="store_true",
        help="tell proxies to fetch the whole file at its first read")
    generate.add_argument("--compression", default="zstd",
                          choices=meta_format.COMPRESSIONS,
                          help="codec of the whole-file channel")
    check = sub.add_parser("verify", help="check files against sidecars")
    check.add_argument("files", nargs="+", metavar="FILE")
    args = parser.parse_args(argv)
    return {"generate": _generate, "verify": _verify}[args.action](args)


if __name__ == "__main__":
    sys.exit(main())
