# SPDX-License-Identifier: Apache-2.0
"""Boot profiles: the format, merging, recording and the prefetch.

The prefetch is driven against an in-memory directory that answers the
NFSv3 calls the proxy sends (LOOKUP, GETATTR, READ, CREATE, WRITE,
RENAME, REMOVE), with a gate on READs so that a test decides when each
arrives; the real chain against NFS-Ganesha is in
``tests/functional/test_boot_profiles.py``.
"""

import asyncio
import dataclasses
import json

import pytest

from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.cache import exports
from gvfs_openstack.proxy.cache import fetch
from gvfs_openstack.proxy.cache import freshness
from gvfs_openstack.proxy.cache import profiles
from gvfs_openstack.proxy.cache import reads
from gvfs_openstack.proxy.cache import sidecars
from gvfs_openstack.proxy.cache.store import BlockStore
from gvfs_openstack.proxy.cache.store import Geometry
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy.upstream_calls import CallRefused
from gvfs_openstack.sidecar import profile

BS = 4096
T = nfs3.NfsTime


# --- the format --------------------------------------------------------------

def _doc(**changes):
    doc = {"format": "gvfs-profile", "version": 1, "size": 10 * BS,
           "mtime_ns": 5, "block_size": BS, "boots": 1,
           "blocks": [[3, 0], [1, 20], [7, 20]]}
    doc.update(changes)
    return json.dumps(doc).encode()


def test_a_profile_round_trips():
    found = profile.parse(_doc())
    assert found.blocks == ((3, 0), (1, 20), (7, 20))
    assert profile.parse(found.to_bytes()) == found
    assert found.matches(10 * BS, 5) and not found.matches(10 * BS, 6)
    assert found.byte_ranges()[0] == (3 * BS, 4 * BS)


@pytest.mark.parametrize("doc, reason", [
    (b"\xff\xfe", "not JSON"),
    (b"[]", "not a gvfs-profile"),
    (_doc(version=2), "unknown version"),
    (_doc(block_size=5000), "power of two"),
    (_doc(block_size=1), "block_size"),
    (_doc(blocks=[[10, 0]]), "outside the file"),
    (_doc(blocks=[[-1, 0]]), "outside the file"),
    (_doc(blocks=[[1, 0], [1, 5]]), "named twice"),
    (_doc(blocks=[[1, -5]]), "out of range"),
    (_doc(blocks=[[1, 0.5]]), "\\[block, ms\\]"),
    (_doc(blocks=[[1, True]]), "\\[block, ms\\]"),
    (_doc(blocks=[[1]]), "\\[block, ms\\]"),
    (_doc(boots=0), "boots"),
    (_doc(size=2 ** 70), "size"),
    (_doc(blocks=[[0, 0]] * (profile.MAX_BLOCKS + 1)), "at most"),
    (b" " * (profile.MAX_BYTES + 1), "larger than"),
])
def test_hostile_profiles_are_refused_clearly(doc, reason):
    with pytest.raises(profile.ProfileError, match=reason):
        profile.parse(doc)


def test_deeply_nested_json_is_a_profile_error():
    with pytest.raises(profile.ProfileError):
        profile.parse(b"[" * 100000)


def test_merge_is_the_union_by_typical_first_touch():
    old = profile.Profile(10 * BS, 5, BS, 3, ((1, 0), (2, 100), (3, 400)))
    new = profile.Profile(10 * BS, 5, BS, 1, ((3, 0), (9, 50), (2, 100)))
    merged = profile.merge(old, new)
    # Block 3: (400 * 3 + 0) / 4 = 300; 9 only in the new one at 50.
    assert merged.blocks == ((1, 0), (9, 50), (2, 100), (3, 300))
    assert merged.boots == 4
    assert profile.adds_to(old, new)
    assert not profile.adds_to(merged, new)


def test_merge_keeps_the_weight_of_history_bounded():
    old = profile.Profile(BS, 5, BS, profile.MAX_BOOTS, ((0, 1000),))
    new = profile.Profile(BS, 5, BS, 1, ((0, 0),))
    merged = profile.merge(old, new)
    assert merged.boots == profile.MAX_BOOTS
    assert merged.blocks[0][1] < 1000


def test_a_profile_of_another_file_or_block_size_is_replaced():
    new = profile.Profile(10 * BS, 5, BS, 1, ((3, 0),))
    for old in (profile.Profile(10 * BS, 6, BS, 2, ((1, 0),)),
                profile.Profile(10 * BS, 5, 2 * BS, 2, ((1, 0),))):
        assert profile.merge(old, new) == new
        assert profile.adds_to(old, new)


def test_a_recording_keeps_first_touches_in_order():
    rec = profile.Recording(BS, started=100.0)
    rec.touch(5 * BS, 6 * BS, 100.0)
    rec.touch(BS, 3 * BS, 100.25)       # Two blocks.
    rec.touch(5 * BS + 10, 5 * BS + 20, 101.0)    # Touched before.
    rec.touch(9 * BS, 9 * BS, 102.0)    # Empty: nothing.
    made = rec.profile(8 * BS, 7)
    assert made.blocks == ((5, 0), (1, 250), (2, 250))
    assert made.size == 8 * BS and made.mtime_ns == 7 and made.boots == 1


def test_a_recording_of_a_copy_overflows_and_keeps_nothing():
    rec = profile.Recording(BS, started=0.0)
    rec.touch(0, (profile.MAX_BLOCKS + 1) * BS, 1.0)
    assert rec.overflowed and len(rec) == 0


# --- an NFS directory in memory ---------------------------------------------

def fattr(size, mtime=100):
    return nfs3.Fattr(const.FileType.NF3REG, 0o644, 1, 1, 1, size, size,
                      nfs3.SpecData(), 1, 2, T(mtime), T(mtime), T(mtime))


class Directory:
    """One directory of files by name; handles are b"fh:" + name."""

    def __init__(self):
        self.files = {}
        self.mtimes = {}
        self.calls = []
        #: READs of images (not of profiles) wait for this event when set.
        self.gate = None
        self.reads_started = asyncio.Event()
        #: Whether the bulk channel's READV is served (a server proxy).
        self.readv = True

    def add(self, name, data, mtime=100):
        self.files[name] = bytearray(data)
        self.mtimes[name] = mtime

    def attrs(self, name):
        return fattr(len(self.files[name]), self.mtimes[name])

    async def nfs(self, proc, args, cred, verf=rpc.AUTH_NONE):
        self.calls.append((proc, args))
        noent = nfs3.Result(const.NfsStat.NFS3ERR_NOENT)
        if proc == Nfs3Proc.LOOKUP:
            name = args.what.name
            if name not in self.files:
                return noent
            return nfs3.Result(0, nfs3.LookupOk(
                b"fh:" + name.encode(), self.attrs(name), None))
        if proc == Nfs3Proc.GETATTR:
            return nfs3.Result(0, nfs3.GetattrOk(
                self.attrs(bytes(args.object)[3:].decode())))
        if proc == Nfs3Proc.READ:
            return await self._read(args)
        if proc == Nfs3Proc.CREATE:
            name = args.where.name
            if name in self.files:
                return nfs3.Result(const.NfsStat.NFS3ERR_EXIST)
            self.add(name, b"")
            return nfs3.Result(0, nfs3.NewObjOk(b"fh:" + name.encode(),
                                                self.attrs(name),
                                                nfs3.WccData()))
        if proc == Nfs3Proc.WRITE:
            f = self.files[bytes(args.file)[3:].decode()]
            f[args.offset:args.offset + len(args.data)] = args.data
            return nfs3.Result(0, nfs3.WriteOk(
                nfs3.WccData(), len(args.data), args.stable, b"v" * 8))
        if proc == Nfs3Proc.RENAME:
            self.files[args.to.name] = self.files.pop(args.from_.name)
            return nfs3.Result(0, nfs3.RenameBody(nfs3.WccData(),
                                                  nfs3.WccData()))
        if proc == Nfs3Proc.REMOVE:
            self.files.pop(args.object.name, None)
            return nfs3.Result(0, nfs3.WccBody(nfs3.WccData()))
        raise AssertionError("unexpected call %s" % proc)

    async def _read(self, args):
        name = bytes(args.file)[3:].decode()
        self.reads_started.set()
        if self.gate is not None and not name.startswith(".gvfs-meta."):
            await self.gate.wait()
        if name not in self.files:
            return nfs3.Result(const.NfsStat.NFS3ERR_STALE)
        data = bytes(self.files[name][args.offset:
                                      args.offset + args.count])
        return nfs3.Result(0, nfs3.ReadOk(
            self.attrs(name), len(data),
            args.offset + len(data) >= len(self.files[name]), data))

    async def bulk(self, proc, args, cred, verf=rpc.AUTH_NONE):
        """READV as a server proxy answers it, from the same files."""
        if not self.readv or proc != bulk.BulkProc.READV:
            raise CallRefused("bulk", rpc.Reply(
                9, const.AcceptStat.PROC_UNAVAIL))
        self.calls.append(("readv", args))
        pieces = []
        for extent in args.extents:
            res = await self._read(nfs3.ReadArgs(
                args.file, extent.offset, extent.count))
            if not res.ok:
                return nfs3.Result(res.status, nfs3.AttrBody(None))
            pieces.append(res.body.data)
        return nfs3.Result(0, bulk.ReadvOk(
            res.body.file_attributes, tuple(len(p) for p in pieces),
            sum(len(p) for p in pieces), bulk.Codec.NONE,
            b"".join(pieces)))


CALL = rpc.Call(1, const.NFS_PROGRAM, 3, Nfs3Proc.READ,
                rpc.AuthSys(0, 0, (), "test").to_opaque())


@dataclasses.dataclass
class Cache:
    """A client proxy's cache parts, built as ``proxy/service.py`` does."""

    store: object
    files: object
    counters: object
    sidecars: object
    fetcher: object
    reads: object = None
    #: None without boot profiles.
    profiles: object = None


def assemble(store, directory, max_fetch, max_read, **options):
    """A :class:`Cache` on ``store`` in front of ``directory``.

    With ``options`` (those of :class:`profiles.BootProfiles`), boot
    profiles told of every READ.
    """
    cache_counters = counters.CacheCounters()
    files = freshness.FileStates(cache_counters)
    side = sidecars.Sidecars(directory, counters.SidecarCounters())
    policies = exports.ExportPolicies(3.0)
    cache = Cache(store, files, cache_counters, side, fetch.Fetcher(
        store, files, directory, cache_counters, policies,
        max_fetch=max_fetch))
    on_read = ()
    if options:
        cache.profiles = profiles.BootProfiles(
            cache.fetcher, side, directory, counters.ProfileCounters(),
            **options)
        on_read = (cache.profiles.on_read,)
    cache.reads = reads.CachedReads(
        cache.fetcher, files, cache_counters, policies, side,
        sizes=reads.ReadSizes(max_read=max_read), on_read=on_read)
    return cache


def make(tmp_path, directory, blocks=64, max_fetch=4 * BS, **options):
    options.setdefault("quiet_seconds", 0.05)
    return assemble(BlockStore(str(tmp_path), Geometry(BS, 4, 64, 64)),
                    directory, max_fetch, 64 * BS, **options)


def read_call(name, offset, count):
    return rpc.Call(2, const.NFS_PROGRAM, 3, Nfs3Proc.READ, CALL.cred,
                    args=nfs3.encode_args(Nfs3Proc.READ, nfs3.ReadArgs(
                        b"fh:" + name.encode(), offset, count)))


async def open_file(cached, directory, name):
    """What a client's LOOKUP teaches the proxy."""
    cached.sidecars.learn(b"dir", name, b"fh:" + name.encode())


async def until(condition, timeout=5.0):
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not met within %s s" % timeout)


def image(blocks):
    return b"".join(bytes([i % 251 + 1]) * BS for i in range(blocks))


def golden_with_profile(entries):
    """A 64-block image "golden" and its profile naming ``entries``."""
    d = Directory()
    d.add("golden", image(64))
    d.add(profile.profile_name("golden"), profile.Profile(
        64 * BS, 100 * 10 ** 9, BS, 1, entries).to_bytes())
    return d


@pytest.mark.asyncio
async def test_a_boot_is_recorded_beside_the_image_and_refined_later(tmp_path):
    d = Directory()
    d.add("golden", image(32))
    cached = make(tmp_path, d)
    await open_file(cached, d, "golden")
    for block in (9, 2, 30, 2):
        assert await cached.reads.read(read_call("golden", block * BS, BS))
    await until(lambda: cached.profiles.counters.profiles_recorded)
    written = profile.parse(bytes(d.files[profile.profile_name(
        "golden")]))
    assert [b for b, _ in written.blocks] == [9, 2, 30]
    assert written.matches(32 * BS, 100 * 10 ** 9)
    assert not [n for n in d.files if n.endswith(".tmp")]
    # The same reads again add nothing: nothing is written.
    for block in (9, 2):
        await cached.reads.read(read_call("golden", block * BS, BS))
    await asyncio.sleep(0.2)
    assert cached.profiles.counters.profiles_recorded == 1
    # A new block refines it: the union, from two boots.
    await cached.reads.read(read_call("golden", 5 * BS, BS))
    await until(lambda: cached.profiles.counters.profiles_recorded == 2)
    written = profile.parse(bytes(d.files[profile.profile_name(
        "golden")]))
    assert {b for b, _ in written.blocks} == {9, 2, 30, 5}
    assert written.boots == 2
    await cached.profiles.stop()


ORDER = [40, 3, 17, 18, 19, 60, 8, 9]


def _ordered_golden():
    d = Directory()
    d.add("golden", image(64))
    d.add(profile.profile_name("golden"), profile.Profile(
        64 * BS, 100 * 10 ** 9, BS, 1,
        tuple((b, i) for i, b in enumerate(ORDER))).to_bytes())
    return d


async def _all_prefetched(cached):
    await until(lambda: cached.profiles.counters.prefetch_blocks == 8)
    await until(lambda: cached.profiles.counters.prefetch_bytes ==
                8 * BS)
    state = cached.files.get(b"fh:golden")
    assert all(cached.fetcher.present(state, b, BS) for b in ORDER)
    hits = cached.counters.cache_hits
    for b in ORDER:
        await cached.reads.read(read_call("golden", b * BS, BS))
    assert cached.counters.cache_hits == hits + len(ORDER)
    await cached.profiles.stop()


def _readvs(d):
    return [[(e.offset // BS, e.count // BS) for e in a.extents]
            for p, a in d.calls if p == "readv"]


@pytest.mark.asyncio
async def test_a_profile_is_fetched_ahead_in_its_order_with_a_window(tmp_path):
    d = _ordered_golden()
    cached = make(tmp_path, d, window=2 * BS)
    await open_file(cached, d, "golden")
    d.gate = asyncio.Event()
    # Not at offset 0: no read-ahead, only the prefetch reads ahead.
    first = asyncio.ensure_future(cached.reads.read(read_call(
        "golden", 50 * BS, BS)))
    await until(lambda: cached.profiles.counters.prefetches)
    await asyncio.sleep(0.05)
    # The reader's own block by READ; beside it one READV of the first
    # runs, a fetch's size of them (4 blocks here, one run past it):
    # the next waits for room in the window.
    reads_sent = [(a.offset // BS, a.count // BS) for p, a in d.calls
                  if p == Nfs3Proc.READ and bytes(a.file) == b"fh:golden"]
    assert reads_sent == [(50, 1)]
    assert _readvs(d) == [[(40, 1), (3, 1), (17, 3)]]
    d.gate.set()
    assert bytes((await first)[1]) == bytes([50 % 251 + 1]) * BS
    await until(lambda: len(_readvs(d)) == 2)
    assert _readvs(d)[1] == [(60, 1), (8, 2)]
    await _all_prefetched(cached)


@pytest.mark.asyncio
async def test_a_next_hop_without_readv_gets_a_read_per_run(tmp_path):
    d = _ordered_golden()
    d.readv = False
    cached = make(tmp_path, d, window=2 * BS)
    await open_file(cached, d, "golden")
    await cached.reads.read(read_call("golden", 50 * BS, BS))
    await until(lambda: cached.profiles.counters.prefetch_blocks == 8)
    fetches = [(a.offset // BS, a.count // BS) for p, a in d.calls
               if p == Nfs3Proc.READ and bytes(a.file) == b"fh:golden"
               and a.offset != 50 * BS]
    # In the profile's order, runs of neighbours in one READ.
    assert fetches == [(40, 1), (3, 1), (17, 3), (60, 1), (8, 2)]
    assert not _readvs(d)
    await _all_prefetched(cached)


@pytest.mark.asyncio
async def test_a_demand_miss_goes_out_beside_the_prefetch(tmp_path):
    """The guest's own miss is not queued behind the profile's blocks."""
    d = golden_with_profile(tuple((b, 0) for b in range(10, 50)))
    cached = make(tmp_path, d, window=4 * BS)
    await open_file(cached, d, "golden")
    d.gate = asyncio.Event()
    asyncio.ensure_future(cached.reads.read(read_call("golden", 0, BS)))
    await until(lambda: cached.profiles.counters.prefetch_blocks)
    demand = asyncio.ensure_future(
        cached.reads.read(read_call("golden", 62 * BS, BS)))
    await asyncio.sleep(0.05)
    offsets = [a.offset // BS for p, a in d.calls
               if p == Nfs3Proc.READ and bytes(a.file) == b"fh:golden"]
    # Sent while the prefetch still had 35 blocks to go.
    assert 62 in offsets
    assert cached.profiles.counters.prefetch_blocks < 40
    d.gate.set()
    reply = await demand
    assert bytes(reply[1]) == bytes([62 % 251 + 1]) * BS
    await cached.profiles.stop()


@pytest.mark.asyncio
async def test_a_block_a_reader_fetched_meanwhile_is_not_prefetched(
        tmp_path):
    d = golden_with_profile(((10, 0), (20, 1), (30, 2)))
    # A block per fetch: each run its own READV, each waiting for room.
    cached = make(tmp_path, d, max_fetch=BS, window=BS)
    await open_file(cached, d, "golden")
    d.gate = asyncio.Event()
    asyncio.ensure_future(cached.reads.read(read_call("golden", 50 * BS, BS)))
    # The prefetch sent block 10 and waits for room to send block 20.
    await until(lambda: cached.profiles.counters.prefetch_blocks == 1)
    await asyncio.sleep(0.05)
    demand = asyncio.ensure_future(
        cached.reads.read(read_call("golden", 20 * BS, BS)))
    await asyncio.sleep(0.05)
    d.gate.set()
    assert bytes((await demand)[1]) == bytes([20 % 251 + 1]) * BS
    await until(lambda: cached.profiles.counters.prefetch_blocks +
                cached.profiles.counters.prefetch_blocks_present == 3)
    await asyncio.sleep(0.05)
    offsets = [a.offset // BS for p, a in d.calls
               if p == Nfs3Proc.READ and bytes(a.file) == b"fh:golden"]
    offsets += [run[0] for runs in _readvs(d) for run in runs]
    assert sorted(offsets) == [10, 20, 30, 50], offsets
    assert cached.profiles.counters.prefetch_blocks_present == 1
    await cached.profiles.stop()


@pytest.mark.asyncio
async def test_stale_and_hostile_profiles_are_ignored_and_reads_go_on(
        tmp_path):
    for body, counter in (
            (profile.Profile(64 * BS, 1, BS, 1, ((5, 0),)).to_bytes(),
             "profiles_stale"),
            (b'{"format": "gvfs-profile", "version": 1, "size": '
             b'1e999}', "profiles_invalid")):
        d = Directory()
        d.add("golden", image(64))
        d.add(profile.profile_name("golden"), body)
        cached = make(tmp_path / counter, d, record=False)
        await open_file(cached, d, "golden")
        reply = await cached.reads.read(read_call("golden", 5 * BS, BS))
        assert bytes(reply[1]) == bytes([5 % 251 + 1]) * BS
        await until(lambda: getattr(cached.profiles.counters, counter))
        assert cached.profiles.counters.prefetch_blocks == 0
        await cached.profiles.stop()


@pytest.mark.asyncio
async def test_a_prefetch_stops_at_its_share_of_the_cache(tmp_path):
    d = golden_with_profile(tuple((b, 0) for b in range(0, 64, 2)))
    cached = make(tmp_path, d, max_bytes=5 * BS, record=False)
    await open_file(cached, d, "golden")
    await cached.reads.read(read_call("golden", BS, 10))
    await until(lambda: cached.profiles.counters.prefetch_stopped)
    # What it took before the share ran out is still fetched; no more.
    await until(lambda: cached.profiles.counters.prefetch_blocks == 5)
    await asyncio.sleep(0.05)
    assert cached.profiles.counters.prefetch_blocks == 5
    await cached.profiles.stop()


@pytest.mark.asyncio
async def test_a_prefetch_stops_when_the_image_is_deleted(tmp_path):
    d = golden_with_profile(tuple((b, 0) for b in range(1, 64, 2)))
    cached = make(tmp_path, d, window=BS, record=False)
    await open_file(cached, d, "golden")
    d.gate = asyncio.Event()
    asyncio.ensure_future(cached.reads.read(read_call("golden", 0, BS)))
    await until(lambda: cached.profiles.counters.prefetch_blocks)
    del d.files["golden"]
    d.gate.set()
    await until(lambda: cached.profiles.counters.prefetch_stopped)
    assert cached.profiles.counters.prefetch_blocks < 32
    await cached.profiles.stop()


def test_reading_most_of_a_large_file_is_a_copy_not_a_boot():
    size = 80 * 1024 * 1024
    rec = profile.Recording(64 * 1024, started=0.0)
    rec.touch(0, size // 10, 1.0)
    assert not rec.is_copy(size)
    rec.touch(size // 10, size * 6 // 10, 2.0)
    assert rec.is_copy(size) and not rec.overflowed
    # All of a small image is a boot's to read.
    small = profile.Recording(64 * 1024, started=0.0)
    small.touch(0, 16 * 1024 * 1024, 1.0)
    assert not small.is_copy(16 * 1024 * 1024)


@pytest.mark.asyncio
async def test_a_snapshot_read_after_a_boot_does_not_join_its_profile(
        tmp_path):
    """qemu-img convert reads the whole golden image: not a boot."""
    size = 80 * 1024 * 1024
    d = Directory()
    d.add("golden", bytes(size))
    cached = make(tmp_path, d, prefetch=False)
    await open_file(cached, d, "golden")
    state = await cached.fetcher.state_of(CALL, b"fh:golden")
    for block in (700, 3, 9000):
        cached.profiles.on_read(CALL, state, block * BS,
                                (block + 1) * BS)
    await until(lambda: cached.profiles.counters.profiles_recorded)
    for offset in range(0, size * 6 // 10, 256 * BS):
        cached.profiles.on_read(CALL, state, offset, offset + 256 * BS)
    await asyncio.sleep(0.3)
    assert cached.profiles.counters.profiles_recorded == 1
    kept = profile.parse(bytes(d.files[profile.profile_name(
        "golden")]))
    assert [b for b, _ in kept.blocks] == [700, 3, 9000]
    await cached.profiles.stop()


@pytest.mark.asyncio
async def test_a_copy_of_the_whole_file_is_not_a_profile(tmp_path):
    d = Directory()
    d.add("big", bytes(BS) * (profile.MAX_BLOCKS + 2))
    cached = make(tmp_path, d, prefetch=False)
    await open_file(cached, d, "big")
    for offset in range(0, (profile.MAX_BLOCKS + 2) * BS, 64 * BS):
        cached.profiles.on_read(CALL, await cached.fetcher.state_of(
            CALL, b"fh:big"), offset, offset + 64 * BS)
    await asyncio.sleep(0.3)
    assert profile.profile_name("big") not in d.files
    assert cached.profiles.counters.profiles_recorded == 0
    await cached.profiles.stop()


# --- gvfs-meta profile -------------------------------------------------------

def test_gvfs_meta_records_shows_copies_and_clears(tmp_path, capsys):
    from gvfs_openstack.cmd import meta
    image = tmp_path / "golden.img"
    image.write_bytes(bytes(1024 * 1024))
    trace = tmp_path / "boot.trace"
    trace.write_text("# offset length seconds\n"
                     "0 512 0.0\n655360 4096 0.5\n65536 131072 1.25\n"
                     "10 20 2\n")
    assert meta.main(["profile", "record", "--trace", str(trace),
                      str(image)]) == 0
    written = profile.parse((tmp_path / profile.profile_name(
        "golden.img")).read_bytes())
    assert written.blocks == ((0, 0), (10, 500), (1, 1250), (2, 1250))
    capsys.readouterr()
    assert meta.main(["profile", "show", str(image)]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["matches_image"] and shown["blocks"] == 4
    new = tmp_path / "new.img"
    new.write_bytes(bytes(3 * 65536))
    assert meta.main(["profile", "copy", str(image), str(new)]) == 0
    copied = profile.parse((tmp_path / profile.profile_name(
        "new.img")).read_bytes())
    # Bound to the new version; blocks past its end left out.
    assert copied.blocks == ((0, 0), (1, 1250), (2, 1250))
    st = new.stat()
    assert copied.matches(st.st_size, st.st_mtime_ns)
    assert meta.main(["profile", "clear", str(image)]) == 0
    assert meta.main(["profile", "show", str(image)]) == 1


def test_gvfs_meta_refuses_bad_traces_and_planted_links(tmp_path, capsys):
    from gvfs_openstack.cmd import meta
    image = tmp_path / "golden.img"
    image.write_bytes(bytes(65536))
    trace = tmp_path / "bad.trace"
    trace.write_text("0 -5\n")
    assert meta.main(["profile", "record", "--trace", str(trace),
                      str(image)]) == 2
    assert "trace line 1" in capsys.readouterr().err
    secret = tmp_path / "secret"
    secret.write_text("not for you")
    (tmp_path / profile.profile_name("golden.img")).symlink_to(secret)
    assert meta.main(["profile", "show", str(image)]) == 2
    assert "cannot open" in capsys.readouterr().err


def test_a_rebuilt_version_inherits_the_profile_where_blocks_match(
        tmp_path, monkeypatch, capsys):
    """gvfs-meta rebuild: the new version's first boot is prefetched too."""
    import os
    import random
    import sys

    from gvfs_openstack.cmd import meta
    from gvfs_openstack.delta import blocks
    from gvfs_openstack.delta import make as delta_make

    big = 64 * 1024
    rng = random.Random(44)
    base_data = rng.randbytes(16 * big)
    new_data = bytearray(base_data)
    new_data[big + 100:big + 200] = rng.randbytes(100)     # block 1
    new_data[4 * big:5 * big] = bytes(big)                  # block 4
    base = tmp_path / "base.img"
    base.write_bytes(base_data)
    new = tmp_path / "new.img"
    new.write_bytes(bytes(new_data))
    delta = str(tmp_path / "new.delta")
    delta_make.make(str(new), blocks.ensure(str(base)), delta)
    st = base.stat()
    (tmp_path / profile.profile_name("base.img")).write_bytes(
        profile.Profile(st.st_size, st.st_mtime_ns, big, 3, (
            (0, 0), (1, 5), (4, 9), (10, 20), (15, 30))).to_bytes())
    output = tmp_path / "staged.img"
    read, write = os.pipe()
    os.write(write, (delta + "\n").encode())
    os.close(write)
    with os.fdopen(read) as given:
        monkeypatch.setattr(sys, "stdin", given)
        assert meta.main(["rebuild", "--base", str(base), "--output",
                          str(output)]) == 0
    assert output.read_bytes() == bytes(new_data)
    inherited = profile.parse((tmp_path / profile.profile_name(
        "staged.img")).read_bytes())
    st = output.stat()
    assert inherited.matches(st.st_size, st.st_mtime_ns)
    assert inherited.blocks == ((0, 0), (10, 20), (15, 30))
    assert inherited.boots == 3
    # By hand, for a version made otherwise; a base with no profile
    # leaves nothing to inherit.
    capsys.readouterr()
    assert meta.main(["profile", "inherit", "--base", str(base),
                      str(new)]) == 0
    assert meta.main(["profile", "inherit", "--base", str(new),
                      str(base)]) == 0
    assert meta.main(["profile", "clear", str(new)]) == 0
    assert meta.main(["profile", "inherit", "--base", str(new),
                      str(output)]) == 1
