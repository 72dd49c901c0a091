# SPDX-License-Identifier: Apache-2.0
"""The mount's prefill from a boot profile: its plan and its run."""

import asyncio

import pytest

from gvfs_openstack.fuse import prefill
from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.sidecar import profile as profile_format

KIB = 1024
BLOCK = 64 * KIB


def _profile(blocks, size=64 * BLOCK, block_size=BLOCK):
    return profile_format.Profile(size, 7, block_size, 1,
                                  tuple((b, 0) for b in blocks))


def test_batches_gather_scattered_runs_into_one_readv():
    plan = prefill.batches(_profile([9, 2, 3, 10, 40, 30, 20]), BLOCK,
                           4 * BLOCK, budget=64 * BLOCK)
    # Runs in first-touch order, up to a READ's bytes in each READV.
    assert plan == [[(9 * BLOCK, 2 * BLOCK), (2 * BLOCK, 2 * BLOCK)],
                    [(40 * BLOCK, BLOCK), (30 * BLOCK, BLOCK),
                     (20 * BLOCK, BLOCK)]]


def test_a_readv_names_at_most_max_extents_runs():
    blocks = range(0, 2 * (bulk.MAX_EXTENTS + 10), 2)
    plan = prefill.batches(_profile(blocks, size=1024 * BLOCK), BLOCK,
                           1024 * BLOCK, budget=1024 * BLOCK)
    assert [len(batch) for batch in plan] == [bulk.MAX_EXTENTS, 10]


IMAGE_OWNER, DIR_OWNER, STRANGER = 4242, 990, 2003
T = nfs3.NfsTime(100, 0)


def _attrs(uid, mode=0o644, size=0, kind=const.FileType.NF3REG):
    return nfs3.Fattr(kind, mode, 1, uid, uid, size, size, nfs3.SpecData(),
                      1, 2, T, T, T)


class _Mount:
    """What a prefill calls: a directory of one image and its profile.

    The profile belongs to ``owner`` with ``mode``; ``size`` is the size
    its attributes say (its bytes' by default).  ``with_attributes``:
    whether LOOKUP replies carry attributes (they are optional in NFSv3;
    else the prefill asks for them).
    """

    def __init__(self, profile_bytes, kept=(), owner=IMAGE_OWNER,
                 mode=0o644, size=None, with_attributes=True):
        self.profile_bytes = profile_bytes
        self.kept = set(kept)
        self.fetched = []
        self.profile = _attrs(owner, mode, len(profile_bytes or b"")
                              if size is None else size)
        self.directory = _attrs(DIR_OWNER, 0o755, kind=const.FileType.NF3DIR)
        self.with_attributes = with_attributes
        self.calls = []

    async def lookup(self, dir_fh, name):
        assert dir_fh == b"dir"
        self.calls.append("lookup")
        if self.profile_bytes is None or \
                name != profile_format.profile_name("golden"):
            return None
        if not self.with_attributes:
            return nfs3.LookupOk(b"fh:profile", None, None)
        return nfs3.LookupOk(b"fh:profile", self.profile, self.directory)

    async def attributes_of(self, fh):
        self.calls.append("getattr")
        return {b"fh:profile": self.profile, b"dir": self.directory}[fh]

    async def read_file(self, fh, limit):
        assert fh == b"fh:profile"
        self.calls.append("read")
        return self.profile_bytes

    async def fetch_extents(self, inode, extents):
        self.fetched.extend((inode, offset, length)
                            for offset, length in extents)
        return sum(length for _, length in extents)

    def cached(self, inode, offset, length):
        return offset in self.kept


def _prefill(mount):
    return prefill.Prefill(mount.lookup, mount.attributes_of,
                           mount.read_file, mount.fetch_extents,
                           mount.cached, BLOCK, 16 * BLOCK, 64 * BLOCK)


@pytest.mark.asyncio
async def test_an_open_reads_the_profile_ahead_once_per_version():
    mount = _Mount(_profile([5, 20]).to_bytes(), kept={20 * BLOCK})
    filling = _prefill(mount)
    filling.opened(1, (64 * BLOCK, 7), b"dir", "golden", IMAGE_OWNER)
    # Again.
    filling.opened(1, (64 * BLOCK, 7), b"dir", "golden", IMAGE_OWNER)
    await asyncio.sleep(0.05)
    # Block 20 is in RAM already; block 5 once.
    assert mount.fetched == [(1, 5 * BLOCK, BLOCK)]
    assert filling.bytes_read == BLOCK
    # A forgotten inode keeps nothing: were its number opened again, it
    # would be a new file.
    filling.forget(1)
    mount.kept.clear()
    filling.opened(1, (64 * BLOCK, 7), b"dir", "golden", IMAGE_OWNER)
    await asyncio.sleep(0.05)
    assert len(mount.fetched) == 3
    await filling.stop()


@pytest.mark.asyncio
@pytest.mark.parametrize("case", ["none", "stale", "garbled", "sidecar"])
async def test_no_usable_profile_reads_nothing_ahead(case):
    data = {"none": None, "stale": _profile([5]).to_bytes(),
            "garbled": b"{not json", "sidecar": _profile([5]).to_bytes()}
    mount = _Mount(data[case])
    filling = _prefill(mount)
    version = (64 * BLOCK, 8 if case == "stale" else 7)
    name = ".gvfs-meta.golden" if case == "sidecar" else "golden"
    filling.opened(1, version, b"dir", name, IMAGE_OWNER)
    await asyncio.sleep(0.05)
    assert mount.fetched == []
    await filling.stop()


@pytest.mark.asyncio
async def test_a_guest_read_waits_for_its_block_on_its_way():
    """Not a second READ of it: the READV brings it a moment later."""
    mount = _Mount(_profile([1, 10, 20]).to_bytes())
    gate = asyncio.Event()
    fetched = mount.fetch_extents

    async def slow(inode, extents):
        await gate.wait()
        return await fetched(inode, extents)

    mount.fetch_extents = slow
    filling = _prefill(mount)
    filling.opened(1, (64 * BLOCK, 7), b"dir", "golden", IMAGE_OWNER)
    await asyncio.sleep(0.05)
    waiting = asyncio.ensure_future(
        filling.arrived(1, 10 * BLOCK + 5, 10 * BLOCK + 100))
    elsewhere = asyncio.ensure_future(
        filling.arrived(1, 11 * BLOCK, 12 * BLOCK))
    other_file = asyncio.ensure_future(
        filling.arrived(2, 10 * BLOCK, 11 * BLOCK))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    # Blocks on no READV's way, or of another file: nothing to wait for.
    assert elsewhere.done() and other_file.done()
    gate.set()
    await asyncio.wait_for(waiting, 1)
    assert mount.fetched == [(1, BLOCK, BLOCK), (1, 10 * BLOCK, BLOCK),
                             (1, 20 * BLOCK, BLOCK)]
    await filling.stop()


@pytest.mark.asyncio
async def test_a_failed_readv_stops_the_prefill_and_frees_its_waiters():
    mount = _Mount(_profile(range(0, 64, 2)).to_bytes())
    calls = []

    async def failing(inode, extents):
        calls.append(extents)
        await asyncio.sleep(0.01)
        raise OSError("the proxy went away")

    mount.fetch_extents = failing
    filling = prefill.Prefill(mount.lookup, mount.attributes_of,
                              mount.read_file, failing, mount.cached, BLOCK,
                              4 * BLOCK, 64 * BLOCK)
    filling.opened(1, (64 * BLOCK, 7), b"dir", "golden", IMAGE_OWNER)
    await asyncio.sleep(0.05)
    # The window's READVs went out; none after they failed.
    assert len(calls) == prefill.WINDOW
    await asyncio.wait_for(filling.arrived(1, 0, 64 * BLOCK), 1)
    await filling.stop()


async def _prefilled(mount):
    """What one open of the image read ahead, once its prefill is over."""
    filling = _prefill(mount)
    filling.opened(1, (64 * BLOCK, 7), b"dir", "golden", IMAGE_OWNER)
    await asyncio.gather(*filling._tasks)
    await filling.stop()
    return mount.fetched


@pytest.mark.asyncio
@pytest.mark.parametrize("with_attributes", [True, False])
async def test_a_profile_planted_by_another_account_is_not_read(
        with_attributes, caplog):
    """On an all-squash export every writer could plant one: only the
    image's owners' is believed, as by the caching proxy."""
    mount = _Mount(_profile(range(0, 64, 2)).to_bytes(), owner=STRANGER,
                   with_attributes=with_attributes)
    assert await _prefilled(mount) == []
    assert "read" not in mount.calls
    assert "ignoring the boot profile of 'golden': owned by uid 2003" \
        in caplog.text


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [0o646, 0o666, 0o602], ids=oct)
async def test_a_profile_others_may_write_is_not_read(mode, caplog):
    """Even the image owner's: whoever may write it could have made it."""
    mount = _Mount(_profile([5]).to_bytes(), mode=mode)
    assert await _prefilled(mount) == []
    assert "read" not in mount.calls
    assert "writable by others" in caplog.text


@pytest.mark.asyncio
async def test_an_oversized_profile_is_ignored_before_it_is_read(caplog):
    mount = _Mount(_profile([5]).to_bytes(),
                   size=profile_format.MAX_BYTES + 1)
    await asyncio.wait_for(_prefilled(mount), 1)
    assert mount.fetched == [] and "read" not in mount.calls
    assert "not a regular file of at most %d bytes" \
        % profile_format.MAX_BYTES in caplog.text


@pytest.mark.asyncio
@pytest.mark.parametrize("owner", [0, IMAGE_OWNER, DIR_OWNER])
@pytest.mark.parametrize("with_attributes", [True, False])
@pytest.mark.parametrize("mode", [0o644, 0o660], ids=oct)
async def test_the_owners_profile_is_used(owner, with_attributes, mode):
    """The control: root's, the image owner's or the directory owner's,
    group-writable or not, with attributes in the LOOKUP or asked for."""
    mount = _Mount(_profile([5, 9]).to_bytes(), owner=owner, mode=mode,
                   with_attributes=with_attributes)
    assert await _prefilled(mount) == [(1, 5 * BLOCK, BLOCK),
                                       (1, 9 * BLOCK, BLOCK)]
    # The directory's attributes are asked for only when they decide.
    asked_dir = mount.calls.count("getattr") == 2
    assert asked_dir == (owner == DIR_OWNER and not with_attributes)
