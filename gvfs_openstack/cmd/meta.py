# SPDX-License-Identifier: Apache-2.0
"""``gvfs-meta``: make and check metadata sidecars on the DTN.

    gvfs-meta generate /srv/images/*.img
    gvfs-meta generate --whole-file /srv/images/memory.state
    gvfs-meta verify /srv/images/golden.img
    gvfs-meta blocks /srv/images/golden.img
    gvfs-meta delta --base-blocks golden.blocks --output new.delta new.img
    gvfs-meta delta --base golden.img --output new.delta new.img
    gvfs-meta rebuild --base golden.img --output new.img < <delta's path>
    gvfs-meta patch --base golden.img --delta new.delta --output new.img \
        [--hash-algo sha512 --hash <hex>]
    gvfs-meta profile show|record|copy|clear ...

``generate`` writes ``.gvfs-meta.<name>`` next to each file (zero map,
digest, action) and the file's block signature; ``verify`` says whether a
file still matches its sidecar; ``blocks`` makes block signatures.
``delta`` and ``rebuild`` are the migration conductor's delta transfer,
run on the two DTNs: the delta made where the new version is (against
a copy of the base there, or the base's signature handed over; its JSON
names the signature's identity), and the new version rebuilt at the
destination -- its base copied there while the delta is on its way --
and checked against the block signature the delta was made for.
``patch`` rebuilds by hand, checked by signature or by the image's hash.
``profile`` shows, records, copies and clears boot profiles (see
:mod:`gvfs_openstack.cmd.meta_profile`).
Both exit with status 3 when the delta is refused.  Run it as the
account that owns the export's files.
"""

import argparse
import contextlib
import hashlib
import json
import os
import select
import sys
import time

from gvfs_openstack.cmd import meta_profile
from gvfs_openstack.delta import apply as delta_apply
from gvfs_openstack.delta import blocks
from gvfs_openstack.delta import make as delta_make
from gvfs_openstack.delta import prefill as delta_prefill
from gvfs_openstack.delta import statuses
from gvfs_openstack.sidecar import format as meta_format
from gvfs_openstack.sidecar import scan
from gvfs_openstack import version

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
            if blocks.cached(path) is None:
                # A delta's rebuild signed it already, else read it.
                blocks.write(path, blocks.compute(path))
        except (OSError, scan.FileChanged, blocks.SignatureError) as e:
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


def _blocks(args):
    status = 0
    for path in args.files:
        try:
            blocks.ensure(path)
        except (OSError, blocks.SignatureError) as e:
            print("gvfs-meta: %s: %s" % (path, e), file=sys.stderr)
            status = 1
            continue
        print(blocks.signature_path(path))
    return status


def _delta(args):
    try:
        if args.base_blocks is not None:
            with open(args.base_blocks, "rb") as f:
                base = blocks.parse(f.read())
        else:
            base = blocks.cached(args.base)
            if base is None:
                print("gvfs-meta: %s has no block signature made since it "
                      "last changed" % args.base, file=sys.stderr)
                return statuses.BASE_UNKNOWN
        stats = delta_make.make(args.file, base, args.output,
                                args.max_bytes)
    except (OSError, blocks.SignatureError) as e:
        print("gvfs-meta: delta of %s: %s" % (args.file, e), file=sys.stderr)
        return 1
    print(json.dumps(stats.as_dict()))
    return 0


def _patch(args):
    if (args.hash_algo is None) != (args.hash is None):
        print("gvfs-meta: --hash-algo and --hash go together",
              file=sys.stderr)
        return 2
    return _apply("patch", args.base, args.delta, args.output,
                  hash_algo=args.hash_algo, expected=args.hash)


def _apply(action, base, delta, output, **kwargs):
    """Rebuild ``output``; the exit status, the reason said on stderr."""
    try:
        delta_apply.apply(base, delta, output,
                          base_signature=blocks.cached(base), **kwargs)
    except delta_apply.Rejected as e:
        print("gvfs-meta: delta rejected: %s" % e, file=sys.stderr)
        return statuses.REJECTED
    except OSError as e:
        print("gvfs-meta: %s of %s: %s" % (action, output, e),
              file=sys.stderr)
        return 1
    return 0


class _DeltaPath:
    """The delta's path, read from ``stream`` whenever it comes.

    The copy of the base asks :meth:`may_come` between its slices: an
    end of input then (the conductor gave up on the delta) stops it,
    instead of a whole copy made for nothing while the whole file waits
    to be sent.
    """

    def __init__(self, stream):
        self.stream = stream
        #: The line read, "" at the end of input, None before either.
        self.line = None

    def may_come(self):
        if self.line is None and select.select([self.stream], [], [],
                                               0)[0]:
            self.line = self.stream.readline()
        return self.line != ""

    def read(self):
        if self.line is None:
            self.line = self.stream.readline()
        return self.line.rstrip("\n")


def _rebuild(args):
    """The destination's side of a delta, the base copied meanwhile.

    Says the base's signature, copies the base to the output while the
    delta is made and sent, then reads the delta's path on its standard
    input and rebuilds from it (nothing, or end of input: the delta is
    not coming, and the copy is removed; an end of input during the copy
    stops it).
    """
    try:
        signature = blocks.ensure(args.base)
    except (OSError, blocks.SignatureError) as e:
        print("gvfs-meta: rebuild from %s: %s" % (args.base, e),
              file=sys.stderr)
        return 1
    print(signature.identity().hex(), blocks.signature_path(args.base),
          flush=True)
    delta_path = _DeltaPath(sys.stdin)
    try:
        prefilled_from = delta_prefill.prefill(
            args.base, args.output, going_on=delta_path.may_come)
    except delta_prefill.Stopped:
        return 0
    except (OSError, delta_prefill.BaseChanged) as e:
        print("gvfs-meta: the base is not copied ahead: %s" % e,
              file=sys.stderr)
        prefilled_from = None
    delta = delta_path.read()
    if not delta:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(args.output)
        return 0
    status = _apply("rebuild", args.base, delta, args.output,
                    prefilled_from=prefilled_from)
    if status == 0:
        # The new version boots much as its base did: its first boot
        # anywhere is prefetched too.
        try:
            meta_profile.inherit(args.base, args.output)
        except (OSError, blocks.SignatureError,
                meta_format.SidecarError) as e:
            print("gvfs-meta: the base's boot profile is not inherited: "
                  "%s" % e, file=sys.stderr)
    return status


def main(argv=None):
    parser = argparse.ArgumentParser(prog="gvfs-meta", description=__doc__,
                                     formatter_class=argparse.
                                     RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version",
                        version=version.string())
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
    signature = sub.add_parser(
        "blocks", help="make (or find fresh) block signatures; print "
        "their paths")
    signature.add_argument("files", nargs="+", metavar="FILE")
    delta = sub.add_parser(
        "delta", help="write the delta making FILE from a base; print "
        "its sizes as JSON")
    against = delta.add_mutually_exclusive_group(required=True)
    against.add_argument("--base-blocks",
                         help="the base's block signature")
    against.add_argument("--base",
                         help="a copy of the base here, by its cached "
                         "signature (exit status 4 if it has none still "
                         "fresh; it is never read to sign it)")
    delta.add_argument("--output", required=True, help="the delta file")
    delta.add_argument("--max-bytes", type=int,
                       help="write no delta larger than this (the JSON says "
                       "\"written\": false)")
    delta.add_argument("file", metavar="FILE")
    rebuild = sub.add_parser(
        "rebuild", help="the receiving end of a delta: print the base's "
        "signature identity and path, copy the base to OUTPUT, read the "
        "delta's path on standard input and rebuild OUTPUT from it, "
        "checked by signature (nothing on standard input: remove OUTPUT)")
    rebuild.add_argument("--base", required=True)
    rebuild.add_argument("--output", required=True)
    patch = sub.add_parser(
        "patch", help="rebuild a file from its base and a delta; check "
        "it by the block signatures the delta names (the base's must be "
        "fresh), or with --hash by its digest (the output is not synced: "
        "`sync FILE` before relying on it surviving a crash)")
    patch.add_argument("--base", required=True)
    patch.add_argument("--delta", required=True)
    patch.add_argument("--output", required=True)
    patch.add_argument("--hash-algo",
                       help="the image's os_hash_algo (with --hash)")
    patch.add_argument("--hash",
                       help="the image's os_hash_value: check the whole "
                       "file's digest too, reading all of it")
    meta_profile.add_parser(sub)
    args = parser.parse_args(argv)
    return {"generate": _generate, "verify": _verify, "blocks": _blocks,
            "delta": _delta, "rebuild": _rebuild, "patch": _patch,
            "profile": meta_profile.run}[args.action](args)


if __name__ == "__main__":
    sys.exit(main())
