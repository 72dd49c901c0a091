# SPDX-License-Identifier: Apache-2.0
"""New versions of images cross the DTN link as deltas (the two-site lab).

The first version migrates whole; a second that differs in 3% of its
4 KiB blocks goes as a delta against it -- found by its name family, or
named as the base -- and ends byte-identical, registered in place.  A
delta damaged on the way is refused at the destination DTN and the whole
file goes instead: the image is right, never activated with the delta's
bytes.  What GridFTP is asked to move is measured by a wrapper around
``globus-url-copy`` that notes each source file's size.
"""

import os
import random
import sys

import pytest

from gvfs_lab import drlab
from gvfs_openstack.cmd import meta as meta_cmd
from gvfs_openstack.delta import blocks
from gvfs_openstack import exceptions
from gvfs_openstack.migration import states
from gvfs_openstack.sidecar import scan
from tests.functional import test_migration

MIB = 1024 * 1024
BLOCK = 4096


def _version(path, size, seed):
    """A first version: random data with a hole in the middle."""
    rng = random.Random(seed)
    with open(path, "wb") as f:
        f.write(rng.randbytes(size // 2))
        f.seek(size // 2 + 8 * MIB)
        f.write(rng.randbytes(size // 2 - 8 * MIB))


def _changed(base, path, share, seed):
    """A copy of ``base`` with ``share`` of its data blocks rewritten."""
    rng = random.Random(seed)
    data = bytearray(base.read_bytes())
    blocks = [n for n in range(len(data) // BLOCK)
              if any(data[n * BLOCK:n * BLOCK + 64])]
    for n in rng.sample(blocks, int(len(data) // BLOCK * share)):
        data[n * BLOCK:(n + 1) * BLOCK] = rng.randbytes(BLOCK)
    path.write_bytes(bytes(data))


def _noting_copy(tmp_path, damage_deltas=False):
    """A globus-url-copy that logs the size of each file it sends.

    With ``damage_deltas`` it flips a byte in the middle of each delta
    once it arrived (past GridFTP's own checksum).
    """
    log = tmp_path / "sent.log"
    script = tmp_path / "noting-globus-url-copy"
    script.write_text("""#!/bin/sh
set -e
n=$#
source=$(eval echo \\${$((n - 1))})
target=$(eval echo \\${$n})
stat -c "%%s %%n" "/${source#ftp://*/}" >> %(log)s
globus-url-copy "$@"
case "$target" in
*.delta)
    if [ %(damage)s = yes ]; then
        file=/${target#ftp://*/}
        at=$(( $(stat -c %%s "$file") / 2 ))
        byte=$(dd if="$file" bs=1 skip=$at count=1 2>/dev/null | od -An -tu1)
        printf "\\\\$(printf %%o $(( (byte + 1) %% 256 )))" |
            dd of="$file" bs=1 seek=$at conv=notrunc 2>/dev/null
    fi;;
esac
""" % {"log": log, "damage": "yes" if damage_deltas else "no"})
    script.chmod(0o755)
    return str(script), log


def _noting_meta(tmp_path, site):
    """A gvfs-meta that logs each command line it runs at ``site``."""
    log = tmp_path / ("meta-%s.log" % site)
    script = tmp_path / ("noting-gvfs-meta-%s" % site)
    script.write_text('#!/bin/sh\necho "$*" >> %s\nexec %s "$@"\n' % (
        log, os.path.join(os.path.dirname(sys.executable), "gvfs-meta")))
    script.chmod(0o755)
    return str(script), log


def _commands(log):
    """The gvfs-meta command lines run, each a list of its words."""
    return [line.split() for line in log.read_text().splitlines()]


def _sent(log):
    """(bytes, path) of each file globus-url-copy was asked to send."""
    if not log.exists():
        return []
    return [(int(size), path) for size, path in
            (line.split(" ", 1) for line in log.read_text().splitlines())]


def _first_version(dr, tmp_path, name, size=64 * MIB):
    v1 = tmp_path / (name + "-v1.raw")
    _version(v1, size, name)
    first = dr.east.glance.add_image(name + "-v1", v1, drlab.GVFS_STORE,
                                     os_distro="debian")
    manager = test_migration._manager(dr, tmp_path, name="first")
    job = test_migration._wait(
        manager, manager.migrate([first["id"]], "west")["id"])
    assert job["state"] == states.DONE, job
    assert job["images"][0]["sent_bytes"] == size
    assert job["images"][0]["delta_base"] is None
    return v1, first


def _second_version(dr, tmp_path, name, v1):
    """A version of ``v1`` with 3% of its blocks changed, in the source."""
    v2 = tmp_path / (name + "-v2.raw")
    _changed(v1, v2, 0.03, name + "-v2")
    return v2, dr.east.glance.add_image(name + "-v2", v2, drlab.GVFS_STORE,
                                        os_distro="debian")


def _migrate_noting(dr, tmp_path, image, name, damage_deltas=False):
    """``image`` migrated west through the noting copy and gvfs-meta.

    Returns its job row and what globus-url-copy was asked to send; the
    gvfs-meta commands are in ``tmp_path``'s ``meta-east.log`` and
    ``meta-west.log`` (:func:`_commands`).
    """
    program, log = _noting_copy(tmp_path, damage_deltas=damage_deltas)
    manager = test_migration._manager(
        dr, tmp_path, name=name, globus_url_copy=program,
        east={"gvfs_meta_command": _noting_meta(tmp_path, "east")[0]},
        west={"gvfs_meta_command": _noting_meta(tmp_path, "west")[0]})
    job = test_migration._wait(
        manager, manager.migrate([image["id"]], "west")["id"])
    assert job["state"] == states.DONE, job
    [row] = job["images"]
    return row, _sent(log)


def _arrived_right(dr, image):
    """``image`` is active in the west with its bytes; nothing is staged.

    Returns the path of its file in the west's store.
    """
    there = dr.west.glance.image(image["id"])
    assert there["status"] == "active"
    assert there["os_hash_value"] == image["os_hash_value"]
    stored = os.path.join(dr.west.images, image["id"])
    assert test_migration._sha512(stored) == image["os_hash_value"]
    for site in (dr.east, dr.west):
        assert os.listdir(os.path.join(site.export, drlab.STAGING_DIR)) == []
    return stored


def test_a_new_version_crosses_as_a_delta_and_ends_identical(dr, tmp_path):
    v1, first = _first_version(dr, tmp_path, "delta-golden")
    v2, second = _second_version(dr, tmp_path, "delta-golden", v1)
    row, sent_files = _migrate_noting(dr, tmp_path, second, "second")
    # Found by its name family; about 3% of the image crossed the link.
    assert row["delta_base"] == first["id"]
    [(sent, path)] = sent_files
    assert path.endswith(second["id"] + ".delta")
    assert sent == row["sent_bytes"]
    assert 0.025 * v2.stat().st_size < sent < 0.04 * v2.stat().st_size
    assert second["os_hash_value"] == test_migration._sha512(v2)
    stored = _arrived_right(dr, second)
    # Rebuilt sparse (the hole stayed a hole), with its sidecar.  ext4
    # counts the blocks of its extent tree too: one more where the copy
    # came out in more than four extents.
    assert os.stat(stored).st_blocks * 512 <= v2.stat().st_size - 7 * MIB
    assert meta_cmd.verify(stored) is None
    # The source made the delta against its own copy of the base, whose
    # signature is the destination's; the destination copied the base
    # ahead and rebuilt in one command.
    east = _commands(tmp_path / "meta-east.log")
    [delta_cmd] = [c for c in east if c[0] == "delta"]
    assert delta_cmd[delta_cmd.index("--base") + 1] == os.path.join(
        dr.east.images, first["id"])
    west = _commands(tmp_path / "meta-west.log")
    assert [c[0] for c in west if c[0] in ("rebuild", "patch")] == \
        ["rebuild"]
    # Its signature is ready for the next version, made by the rebuild:
    # before the registration wrote the sidecar (which would have read
    # the whole file to sign it, after the sidecar, had it been missing).
    assert blocks.cached(stored) == blocks.compute(stored)
    assert os.stat(blocks.signature_path(stored)).st_mtime_ns < \
        os.stat(scan.sidecar_path(stored)).st_mtime_ns


def test_a_named_base_is_used_and_an_unrelated_image_goes_whole(
        dr, tmp_path):
    v1, first = _first_version(dr, tmp_path, "delta-named")
    # The source has no signature of the base of its own: the
    # destination's is handed over to it.
    os.unlink(blocks.signature_path(os.path.join(dr.east.images,
                                                 first["id"])))
    v2 = tmp_path / "renamed.raw"
    _changed(v1, v2, 0.03, "renamed")
    # Another name and no os_distro: no family would find the base.
    renamed = dr.east.glance.add_image("something-else", v2,
                                       drlab.GVFS_STORE)
    other = tmp_path / "unrelated.raw"
    other.write_bytes(os.urandom(4 * MIB))
    unrelated = dr.east.glance.add_image("unrelated", other,
                                         drlab.GVFS_STORE)
    manager = test_migration._manager(
        dr, tmp_path, name="named",
        east={"gvfs_meta_command": _noting_meta(tmp_path, "east")[0]})
    job = test_migration._wait(manager, manager.migrate(
        [renamed["id"]], "west", base=first["id"])["id"])
    assert job["state"] == states.DONE, job
    [row] = job["images"]
    assert row["delta_base"] == first["id"]
    [mine, handed] = [c for c in _commands(tmp_path / "meta-east.log")
                      if c[0] == "delta"]
    assert "--base" in mine and "--base-blocks" in handed
    assert row["sent_bytes"] < 0.04 * v2.stat().st_size
    assert dr.west.glance.image(renamed["id"])["os_hash_value"] == \
        renamed["os_hash_value"]
    # Named as the base of an image it shares nothing with: the delta
    # would be the whole image, so the whole file goes.
    job = test_migration._wait(manager, manager.migrate(
        [unrelated["id"]], "west", base=first["id"])["id"])
    assert job["state"] == states.DONE, job
    [row] = job["images"]
    assert row["delta_base"] is None
    assert row["sent_bytes"] == 4 * MIB


def test_a_damaged_delta_is_refused_and_the_whole_file_sent(dr, tmp_path):
    v1, first = _first_version(dr, tmp_path, "delta-damaged")
    v2, second = _second_version(dr, tmp_path, "delta-damaged", v1)
    row, sent_files = _migrate_noting(dr, tmp_path, second, "damaged",
                                      damage_deltas=True)
    # The delta went, was refused, and the whole file followed.
    [(delta, delta_path), (whole, whole_path)] = sent_files
    assert delta_path.endswith(".delta") and delta < 0.04 * whole
    assert whole == v2.stat().st_size and whole_path.endswith(second["id"])
    assert row["delta_base"] is None and row["sent_bytes"] == whole
    _arrived_right(dr, second)


def test_a_base_changed_under_a_fresh_signature_falls_back_whole(
        dr, tmp_path):
    """The rebuild checks signatures only: Glance's hash is the last word.

    A byte of the base at the destination changes and its mtime is put
    back, so its cached signature still looks fresh: the delta is made
    and rebuilt against what the signature says, and Glance, reading the
    file once to hash it, refuses it.  The whole file follows, the image
    ends active and right, and the base's signature is gone, so the next
    delta against it signs its real bytes.
    """
    v1, first = _first_version(dr, tmp_path, "delta-stale-base")
    base_there = os.path.join(dr.west.images, first["id"])
    assert blocks.cached(base_there) is not None
    st = os.stat(base_there)
    with open(base_there, "r+b") as f:
        f.seek(BLOCK)
        byte = f.read(1)
        f.seek(BLOCK)
        f.write(bytes([byte[0] ^ 0xFF]))
    os.utime(base_there, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert blocks.cached(base_there) is not None   # Looks fresh.
    v2, second = _second_version(dr, tmp_path, "delta-stale-base", v1)
    row, sent_files = _migrate_noting(dr, tmp_path, second, "stale-base")
    [(delta, delta_path), (whole, whole_path)] = sent_files
    assert delta_path.endswith(".delta") and delta < 0.04 * whole
    assert whole == v2.stat().st_size
    assert row["delta_base"] is None and row["sent_bytes"] == delta + whole
    _arrived_right(dr, second)
    assert blocks.cached(base_there) is None


def test_another_projects_private_image_is_never_a_base(dr, tmp_path):
    """Issue 43, item 7: a name is not a key to another project's image.

    beta's private first version is in the west.  alpha's image is named
    like it and shares 97% of its blocks: found by its name family it
    would be sent as a delta against beta's image, whose id the job then
    shows and whose blocks the bytes sent measure.  It goes whole; and
    beta's image named as the base of alpha's job is answered as a
    missing one.
    """
    size = 24 * MIB
    v1 = tmp_path / "beta-v1.raw"
    _version(v1, size, "beta-private")
    theirs = dr.east.glance.add_image("private-golden-v1", v1,
                                      drlab.GVFS_STORE, user="beta-member",
                                      os_distro="debian")
    assert theirs["visibility"] != "public"
    manager = test_migration._manager(dr, tmp_path, name="beta")
    beta = dr.keystone.project_id("beta")
    job = test_migration._wait(manager, manager.migrate(
        [theirs["id"]], "west", project_id=beta)["id"])
    assert job["state"] == states.DONE, job
    v2 = tmp_path / "alpha-v2.raw"
    _changed(v1, v2, 0.03, "alpha-v2")
    mine = dr.east.glance.add_image("private-golden-v2", v2,
                                    drlab.GVFS_STORE, os_distro="debian")
    alpha = dr.keystone.project_id("alpha")
    job = test_migration._wait(manager, manager.migrate(
        [mine["id"]], "west", project_id=alpha)["id"])
    assert job["state"] == states.DONE, job
    [row] = job["images"]
    assert row["delta_base"] is None and row["sent_bytes"] == size
    _arrived_right(dr, mine)
    with pytest.raises(exceptions.ImageNotFound) as refused:
        manager.migrate([mine["id"]], "west", project_id=alpha,
                        base=theirs["id"])
    assert "beta" not in str(refused.value)
