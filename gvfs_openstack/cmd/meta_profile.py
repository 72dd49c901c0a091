# SPDX-License-Identifier: Apache-2.0
"""``gvfs-meta profile``: an operator's hands on boot profiles.

    gvfs-meta profile show /srv/images/golden.img
    gvfs-meta profile record --trace boot.trace /srv/images/golden.img
    gvfs-meta profile copy /srv/images/old.img /srv/images/new.img
    gvfs-meta profile inherit --base old.img new.img
    gvfs-meta profile clear /srv/images/golden.img

A profile (``.gvfs-meta.<name>.profile`` beside the image) is what the
client proxies record from boots and prefetch ahead of the next ones;
these make one ahead of any boot (from a trace of a boot's reads: one
``OFFSET LENGTH [SECONDS]`` per line, in the order read), carry one to a
new version of an image (whole, or ``inherit``: only where the two
versions' block signatures match), show one, or remove one.  ``gvfs-meta
rebuild`` inherits the base's profile for the version it rebuilt.  A
profile is bound to its image's size and mtime: ``copy``, ``inherit``
and ``record`` bind it to the image named, ``show`` says whether it
still matches.
"""

import json
import os
import stat
import sys

from gvfs_openstack.delta import blocks
from gvfs_openstack.files import durable
from gvfs_openstack.sidecar import profile

#: The block size of profiles made here: the proxies' default cache block.
BLOCK_SIZE = 64 * 1024


def _identity(path):
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def load(image):
    """The profile beside ``image``, or None; ProfileError if unusable.

    Never through a symbolic link: the export's clients may plant one.
    """
    try:
        fd = os.open(profile.profile_path(image),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise profile.ProfileError("cannot open it: %s" % e) from e
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise profile.ProfileError("not a regular file")
        return profile.parse(f.read(profile.MAX_BYTES + 1))


def save(image, found):
    durable.replace_with(profile.profile_path(image), found.to_bytes(),
                         mode=0o640)


def read_trace(lines):
    """``(offset, length, seconds)`` of each line of a trace."""
    for number, line in enumerate(lines, 1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        try:
            if len(fields) not in (2, 3):
                raise ValueError("want OFFSET LENGTH [SECONDS]")
            offset, length = int(fields[0]), int(fields[1])
            seconds = float(fields[2]) if len(fields) == 3 else 0.0
            if offset < 0 or length < 0 or not 0 <= seconds < 1e9:
                raise ValueError("negative or huge")
        except ValueError as e:
            raise profile.ProfileError("trace line %d: %s" % (number, e)) \
                from e
        yield offset, length, seconds


def _show(args):
    found = load(args.image)
    if found is None:
        print("%s has no boot profile" % args.image, file=sys.stderr)
        return 1
    size, mtime_ns = _identity(args.image)
    print(json.dumps({
        "profile": profile.profile_path(args.image),
        "matches_image": found.matches(size, mtime_ns),
        "boots": found.boots, "block_size": found.block_size,
        "blocks": len(found.blocks),
        "bytes": sum(end - start for start, end in found.byte_ranges()),
        "first_blocks": [b for b, _ in found.blocks[:16]],
    }, indent=2))
    return 0


def _record(args):
    size, mtime_ns = _identity(args.image)
    recording = profile.Recording(BLOCK_SIZE, 0.0)
    with open(args.trace) as f:
        for offset, length, seconds in read_trace(f):
            recording.touch(min(offset, size), min(offset + length, size),
                            seconds)
    if recording.overflowed or not len(recording):
        print("the trace names %s blocks: no profile written" % (
            "too many" if recording.overflowed else "no"), file=sys.stderr)
        return 1
    made = recording.profile(size, mtime_ns)
    save(args.image, made)
    print(profile.profile_path(args.image))
    return 0


def _copy(args):
    found = load(args.source)
    if found is None:
        print("%s has no boot profile" % args.source, file=sys.stderr)
        return 1
    save(args.target, found.with_identity(*_identity(args.target)))
    print(profile.profile_path(args.target))
    return 0


def inherit(base, image):
    """Give ``image`` the profile of ``base`` where their blocks match.

    The path of the profile written; None if ``base`` has none or none
    of its blocks are the same in ``image``.  Signatures are read from
    their caches beside the files, or computed.
    """
    found = load(base)
    if found is None:
        return None
    base_signature = blocks.ensure(base)
    signature = blocks.ensure(image)
    if signature.block_size != base_signature.block_size:
        return None
    grain = signature.block_size

    def same(start, end):
        first, last = start // grain, -(-end // grain)
        return base_signature.digests[first * blocks.DIGEST_SIZE:
                                      last * blocks.DIGEST_SIZE] == \
            signature.digests[first * blocks.DIGEST_SIZE:
                              last * blocks.DIGEST_SIZE] and \
            last <= base_signature.count
    made = profile.inherit(found, same, signature.size, signature.mtime_ns)
    if made is None:
        return None
    save(image, made)
    return profile.profile_path(image)


def _inherit(args):
    try:
        written = inherit(args.base, args.image)
    except blocks.SignatureError as e:
        raise profile.ProfileError(str(e)) from e
    if written is None:
        print("nothing to inherit from %s" % args.base, file=sys.stderr)
        return 1
    print(written)
    return 0


def _clear(args):
    try:
        os.unlink(profile.profile_path(args.image))
    except FileNotFoundError:
        pass
    return 0


def add_parser(sub):
    """``profile`` and its commands in ``gvfs-meta``'s subparsers."""
    parser = sub.add_parser("profile", help="show, record, copy or clear "
                            "an image's boot profile")
    commands = parser.add_subparsers(dest="profile_action", required=True)
    show = commands.add_parser("show", help="print the profile as JSON "
                               "(exit 1 if there is none)")
    show.add_argument("image")
    record = commands.add_parser("record", help="make the profile from a "
                                 "trace of a boot's reads")
    record.add_argument("--trace", required=True,
                        help="OFFSET LENGTH [SECONDS] per line, in the "
                        "order read")
    record.add_argument("image")
    copy = commands.add_parser("copy", help="give TARGET the profile of "
                               "SOURCE (a new version of the image)")
    copy.add_argument("source")
    copy.add_argument("target")
    inherit_cmd = commands.add_parser(
        "inherit", help="give IMAGE the profile of its predecessor BASE "
        "where their block signatures match (exit 1: nothing to inherit)")
    inherit_cmd.add_argument("--base", required=True)
    inherit_cmd.add_argument("image")
    clear = commands.add_parser("clear", help="remove the profile")
    clear.add_argument("image")


def run(args):
    try:
        return {"show": _show, "record": _record, "copy": _copy,
                "inherit": _inherit,
                "clear": _clear}[args.profile_action](args)
    except profile.ProfileError as e:
        print("gvfs-meta profile: %s" % e, file=sys.stderr)
        return 2
