# SPDX-License-Identifier: Apache-2.0
"""Freshness bookkeeping of the cached READ path (no network)."""

import asyncio
import time

import pytest

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.cache import exports
from gvfs_openstack.proxy.cache import fetch
from gvfs_openstack.proxy.cache import freshness
from gvfs_openstack.proxy.cache import reads
from gvfs_openstack.proxy.cache.store import BlockStore
from gvfs_openstack.proxy.cache.store import Geometry
from gvfs_openstack.proxy.cache import updates
from gvfs_openstack.proxy import counters

T = nfs3.NfsTime


def fattr(size, mtime):
    return nfs3.Fattr(const.FileType.NF3REG, 0o644, 1, 1, 1, size, size,
                      nfs3.SpecData(), 1, 2, T(mtime), T(mtime), T(mtime))


def wcc(before, after):
    return nfs3.WccData(
        nfs3.WccAttr(before.size, before.mtime, before.ctime)
        if before else None, after)


def make(tmp_path, policies=None, clock=None, **sizes):
    """CachedReads and its Fetcher on a real block store, no next hop."""
    store = BlockStore(str(tmp_path), Geometry(4096, 2, 16, 16))
    cache_counters = counters.CacheCounters()
    clock = clock or time.monotonic
    files = freshness.FileStates(cache_counters, clock)
    policies = policies or exports.ExportPolicies(3.0)
    fetcher = fetch.Fetcher(store, files, None, cache_counters, policies,
                            clock=clock)
    return reads.CachedReads(fetcher, files, cache_counters, policies,
                             clock=clock, sizes=reads.ReadSizes(**sizes))


def observer(cache):
    return updates.ReplyObserver(cache.fetcher, cache.files, cache.policies)


def cached_block(cache, state, block, expected_len):
    return freshness.cached_block(cache.fetcher.store, state, block,
                                  expected_len)


def test_export_policies_follow_mounts_and_lookups():
    policies = exports.ExportPolicies(3.0, {"/srv/golden": 600.0})
    policies.learn_root(b"root-g", "/srv/golden/")
    policies.learn_root(b"root-s", "/srv/scratch")
    policies.learn_child(b"root-g", b"img")
    policies.learn_child(b"img", b"deeper")
    policies.learn_child(b"unknown-dir", b"orphan")
    assert policies.revalidate_after(b"deeper") == 600.0
    assert policies.export_of(b"img") == "/srv/golden"
    assert policies.revalidate_after(b"root-s") == 3.0
    assert policies.revalidate_after(b"orphan") == 3.0
    policies.learn_root(b"sub", "/srv/golden/project")
    assert policies.revalidate_after(b"sub") == 600.0


def test_own_write_with_pre_op_attributes_keeps_other_blocks_current(
        tmp_path):
    cache = make(tmp_path)
    v1, v2 = fattr(8192, 1), fattr(8192, 2)
    state = cache.files.observe(b"fh", v1)
    cache.files.observe_own_change(b"fh", wcc(v1, v2))
    assert state.current == [freshness.attrs_of(v1), freshness.attrs_of(v2)]
    assert cache.counters.cache_invalidations == 0


def test_write_without_pre_op_attributes_invalidates(tmp_path):
    cache = make(tmp_path)
    v1, v2 = fattr(8192, 1), fattr(8192, 2)
    state = cache.files.observe(b"fh", v1)
    cache.files.observe_own_change(b"fh", wcc(None, v2))
    assert state.current == [freshness.attrs_of(v2)]
    assert cache.counters.cache_invalidations == 1


def test_someone_elses_change_invalidates(tmp_path):
    cache = make(tmp_path)
    state = cache.files.observe(b"fh", fattr(8192, 1))
    cache.files.observe_own_change(b"fh", wcc(fattr(8192, 5), fattr(8192, 6)))
    assert state.current == [freshness.attrs_of(fattr(8192, 6))]
    cache.files.observe(b"fh", fattr(9000, 7))
    assert state.current == [freshness.attrs_of(fattr(9000, 7))]
    assert cache.counters.cache_invalidations == 2


def test_setattr_keeps_only_the_new_attributes(tmp_path):
    cache = make(tmp_path)
    v1, v2 = fattr(8192, 1), fattr(0, 2)
    state = cache.files.observe(b"fh", v1)
    cache.files.observe_own_change(b"fh", wcc(v1, v2), reset=True)
    assert state.current == [freshness.attrs_of(v2)]


def create(cache, name, fh, attrs, size=0):
    """A CREATE reply (UNCHECKED, truncating to ``size``) passes the proxy."""
    call = rpc.Call(7, const.NFS_PROGRAM, 3, Nfs3Proc.CREATE,
                    args=nfs3.encode_args(Nfs3Proc.CREATE, nfs3.CreateArgs(
                        nfs3.DirOpArgs(b"root", name), nfs3.CreateHow(
                            const.CreateMode.UNCHECKED,
                            nfs3.Sattr(mode=0o644, size=size)))))
    reply = rpc.accepted(7, results=nfs3.encode_res(
        Nfs3Proc.CREATE, nfs3.Result(0, nfs3.NewObjOk(fh, attrs,
                                                      nfs3.WccData()))))
    observer(cache).reply(call, reply)


def test_a_create_that_truncates_a_cached_file_invalidates_it(tmp_path):
    """Found by the differential test: CREATE over a cached file."""
    cache = make(tmp_path)
    v1 = fattr(1, 1)
    state = cache.files.observe(b"fh", v1)
    cache.fetcher.store.put(state.digest, 0, b"x", freshness.attrs_of(v1))
    assert cached_block(cache, state, 0, 1) == b"x"
    # Truncated within the same tick of the server's clock: by ctime
    # and size alone it would look older than what the proxy had.
    create(cache, "a", b"fh", fattr(0, 1))
    assert state.current == [freshness.attrs_of(fattr(0, 1))]
    assert state.fattr.size == 0
    assert cached_block(cache, state, 0, 1) is None
    # No attributes in the reply: nothing of the file is trusted.
    create(cache, "a", b"fh", None)
    assert cache.files.get(b"fh") is None
    # A CREATE of a file not known here teaches nothing of its bytes.
    create(cache, "b", b"fh-b", fattr(0, 2))
    assert cache.files.get(b"fh-b") is None


def test_a_truncation_answered_with_the_old_attributes_drops_the_bytes(
        tmp_path):
    """Found by the differential test in CI.

    Ganesha answered a CREATE that truncated a cached 1-byte file with
    the attributes from before it, and the old byte was then served.
    """
    cache = make(tmp_path)
    v1 = fattr(4097, 1)
    state = cache.files.observe(b"fh", v1)
    for block, data in enumerate((b"x" * 4096, b"y")):
        cache.fetcher.store.put(
            state.digest, block, data, freshness.attrs_of(v1))
    create(cache, "a", b"fh", v1, size=4095)
    assert state.current == [freshness.attrs_of(v1)]
    assert cached_block(cache, state, 0, 4096) is None
    assert cached_block(cache, state, 1, 1) is None
    # A SETATTR of the size answered the same way.
    cache.fetcher.store.put(
        state.digest, 0, b"x" * 4096, freshness.attrs_of(v1))
    call = rpc.Call(8, const.NFS_PROGRAM, 3, Nfs3Proc.SETATTR,
                    args=nfs3.encode_args(Nfs3Proc.SETATTR, nfs3.SetattrArgs(
                        b"fh", nfs3.Sattr(size=0))))
    body = nfs3.WccBody(nfs3.WccData(None, v1))
    reply = rpc.accepted(8, results=nfs3.encode_res(
        Nfs3Proc.SETATTR, nfs3.Result(0, body)))
    observer(cache).reply(call, reply)
    assert cached_block(cache, state, 0, 4096) is None
    # A CREATE that sets no size leaves the bytes alone.
    cache.fetcher.store.put(
        state.digest, 0, b"x" * 4096, freshness.attrs_of(v1))
    create(cache, "a", b"fh", v1, size=None)
    assert cached_block(cache, state, 0, 4096) == b"x" * 4096


def test_blocks_fetched_under_old_attributes_are_misses(tmp_path):
    cache = make(tmp_path)
    v1 = fattr(8192, 1)
    state = cache.files.observe(b"fh", v1)
    cache.fetcher.store.put(
        state.digest, 0, b"a" * 4096, freshness.attrs_of(v1))
    assert cached_block(cache, state, 0, 4096) == b"a" * 4096
    cache.files.observe(b"fh", fattr(8192, 2))
    assert cached_block(cache, state, 0, 4096) is None


def test_a_short_block_is_not_served_once_the_file_grew(tmp_path):
    cache = make(tmp_path)
    v1 = fattr(100, 1)
    state = cache.files.observe(b"fh", v1)
    cache.fetcher.store.put(
        state.digest, 0, b"x" * 100, freshness.attrs_of(v1))
    assert cached_block(cache, state, 0, 100) == b"x" * 100
    assert cached_block(cache, state, 0, 4096) is None


def test_read_ahead_waits_for_a_run_of_three_reads(tmp_path):
    """Two READs that touch by chance get little; a stream gets it all."""
    cache = make(tmp_path)  # 4 MiB of read-ahead by default
    stream = freshness.ReadStream()
    windows = []
    for streak in range(1, 9):
        stream.streak = streak
        windows.append(cache._window(stream, 64 * 1024) // 1024)
    assert windows == [128, 128, 4096, 4096, 4096, 4096, 4096, 4096]
    stream.streak = 1
    assert cache._window(stream, 1 << 20) == 2 << 20
    assert cache._window(stream, 4 << 20) == 4 << 20
    off = make(tmp_path, readahead=0)
    assert off._window(stream, 1 << 20) == 0


def test_each_sequential_reader_keeps_its_own_stream(tmp_path):
    """Four readers of one image, interleaved, and scattered reads."""
    cache = make(tmp_path)
    state = cache.files.observe(b"fh", fattr(64 << 20, 1))
    mib = 1 << 20
    starts = [0, 16 * mib, 32 * mib, 48 * mib]
    assert freshness.stream_for(state, 0, mib).streak == 1
    # The others start mid-file: their first READ starts no read-ahead.
    for start in starts[1:]:
        assert freshness.stream_for(state, start, start + mib) is None
    for step in range(1, 4):
        for start in starts:
            stream = freshness.stream_for(state, start + step * mib,
                                          start + (step + 1) * mib)
            assert stream is not None
            assert stream.streak == step + (start == 0)
        # Scattered reads in between push out none of the four.
        for k in range(freshness.MAX_STREAMS * 2):
            assert freshness.stream_for(state, (7 + k) * 4096 + 1,
                                        (7 + k) * 4096 + 100) is None
    assert len(state.streams) == freshness.MAX_STREAMS
    # A READ at offset 0 starts its reader afresh.
    assert freshness.stream_for(state, 0, mib).streak == 1


def getattr_call(fh, xid=9):
    return rpc.Call(xid, const.NFS_PROGRAM, 3, Nfs3Proc.GETATTR,
                    args=nfs3.encode_args(Nfs3Proc.GETATTR,
                                          nfs3.GetattrArgs(fh)))


def answered(cache, fh):
    """The attributes of the proxy's own GETATTR reply, or None."""
    reply = cache.attributes(getattr_call(fh))
    if reply is None:
        return None
    reply = rpc.decode_message(reply)
    assert reply.xid == 9
    return nfs3.decode_res(Nfs3Proc.GETATTR, reply.results) \
        .body.obj_attributes


def golden_cache(tmp_path, now):
    """A cache whose ``/srv/golden`` is ``immutable`` (clock: ``now[0]``)."""
    policies = exports.ExportPolicies(3.0, {"/srv/golden": 600.0},
                                      answer_overrides={"/srv/golden": 3.0})
    cache = make(tmp_path, policies, clock=lambda: now[0])
    policies.learn_root(b"root-g", "/srv/golden")
    return cache, policies


def test_getattr_is_answered_only_in_immutable_exports(tmp_path):
    now = [1000.0]
    cache, policies = golden_cache(tmp_path, now)
    policies.learn_root(b"root-s", "/srv/scratch")
    policies.learn_child(b"root-g", b"img")
    policies.learn_child(b"root-s", b"scratch")
    policies.learn_child(b"root-g", b"dir")
    assert answered(cache, b"img") is None  # Never checked: ask.
    cache.files.observe(b"img", fattr(4096, 1))
    cache.files.observe(b"scratch", fattr(4096, 1))
    directory = nfs3.Fattr(const.FileType.NF3DIR, 0o755, 2, 1, 1, 4096,
                           4096, nfs3.SpecData(), 1, 3, T(1), T(1), T(1))
    cache.files.observe(b"dir", directory)
    assert answered(cache, b"img") == fattr(4096, 1)
    assert cache.counters.cache_getattrs_answered == 1
    assert answered(cache, b"scratch") is None  # window: every GETATTR.
    assert answered(cache, b"dir") is None  # Entries are not cached.
    now[0] += 3.0
    assert answered(cache, b"img") is None  # Checked too long ago.
    # What this proxy saw change is what it answers.
    cache.files.observe(b"img", fattr(8192, 2))
    assert answered(cache, b"img") == fattr(8192, 2)
    garbled = rpc.Call(9, const.NFS_PROGRAM, 3, Nfs3Proc.GETATTR,
                       args=b"\0")
    # Forwarded: the server says what's wrong.
    assert cache.attributes(garbled) is None


def lookup(cache, dir_fh, name, fh, attrs, dirty=()):
    """A LOOKUP reply naming ``fh`` with ``attrs`` passes the proxy."""
    call = rpc.Call(7, const.NFS_PROGRAM, 3, Nfs3Proc.LOOKUP,
                    args=nfs3.encode_args(Nfs3Proc.LOOKUP, nfs3.LookupArgs(
                        nfs3.DirOpArgs(dir_fh, name))))
    reply = rpc.accepted(7, results=nfs3.encode_res(
        Nfs3Proc.LOOKUP, nfs3.Result(0, nfs3.LookupOk(fh, attrs, None))))
    observer(cache).reply(call, reply, dirty)


def test_a_lookup_reply_is_as_fresh_as_a_getattr(tmp_path):
    """Look up, open, read: the open's GETATTR needs no round trip."""
    now = [1000.0]
    cache, _ = golden_cache(tmp_path, now)
    lookup(cache, b"root-g", "img", b"img", fattr(4096, 1))
    assert answered(cache, b"img") == fattr(4096, 1)
    # A later LOOKUP that finds the file changed invalidates like a
    # GETATTR would, and is what the proxy answers from then on.
    state = cache.files.observe(b"img", fattr(4096, 1))
    cache.fetcher.store.put(state.digest, 0, b"a" * 4096, freshness.attrs_of(
        fattr(4096, 1)))
    now[0] += 10.0
    lookup(cache, b"root-g", "img", b"img", fattr(4096, 2))
    assert cached_block(cache, state, 0, 4096) is None
    assert answered(cache, b"img") == fattr(4096, 2)
    # The server's attributes of a file with bytes written back here are
    # behind: they are not taken.
    now[0] += 10.0
    lookup(cache, b"root-g", "img", b"img", fattr(0, 3), dirty={b"img"})
    assert answered(cache, b"img") is None
    assert state.fattr == fattr(4096, 2)


def sized(size, tick):
    """Attributes after a change at server clock ``tick``."""
    return fattr(size, tick)


def test_write_replies_out_of_order_leave_the_newest_attributes(tmp_path):
    """Two WRITEs in flight in one tick of the server's clock."""
    cache = make(tmp_path)
    empty, head, whole = sized(0, 1), sized(65536, 2), sized(196608, 2)
    state = cache.files.observe(b"fh", empty)
    # The second WRITE's reply, then the first's.
    cache.files.observe_own_change(b"fh", wcc(head, whole))
    cache.files.observe_own_change(b"fh", wcc(empty, head))
    assert state.fattr == whole
    assert cache.counters.cache_stale_replies == 1
    # A GETATTR answered before the WRITEs is past news too.
    cache.files.observe(b"fh", empty)
    assert state.fattr == whole
    assert cache.counters.cache_stale_replies == 2


def test_a_revalidation_nothing_overtook_is_believed(tmp_path):
    """Someone truncated the file in the same tick as the last change."""
    cache = make(tmp_path)
    state = cache.files.observe(b"fh", sized(8192, 5))
    cache.files.observe(b"fh", sized(100, 5))
    assert state.fattr.size == 8192    # Could be a reply overtaken.
    cache.files.observe(b"fh", sized(100, 5), cache.files.reports_of(b"fh"))
    assert state.fattr.size == 100
    assert state.current == [freshness.attrs_of(sized(100, 5))]


async def fill(cache, state):
    """Send the READ of block 0; its answer to set, and the block."""
    answer = asyncio.get_running_loop().create_future()

    async def read_range(call, fh, start, end):
        return await answer
    cache.fetcher._read_range = read_range
    futures = cache.fetcher.fetch(None, state, 0, 1)
    await asyncio.sleep(0)
    return answer, futures[0]


@pytest.mark.asyncio
async def test_a_read_answered_from_before_a_write_is_not_kept(tmp_path):
    cache = make(tmp_path)
    old, new = sized(4096, 1), sized(4096, 2)
    state = cache.files.observe(b"fh", old)
    answer, block = await fill(cache, state)
    cache.fetcher.discard_range(b"fh", 0, 10)
    cache.files.observe_own_change(b"fh", wcc(old, new))
    answer.set_result((b"o" * 4096, old, True))
    chunk, _ = await block
    assert bytes(chunk) == b"o" * 4096   # The reader asked meanwhile.
    assert cached_block(cache, state, 0, 4096) is None
    assert state.fattr == new


@pytest.mark.asyncio
async def test_a_read_overtaken_by_a_write_of_its_block_is_not_kept(tmp_path):
    """Same attributes both sides (one tick, same size): the discard."""
    cache = make(tmp_path)
    attrs = sized(8192, 1)
    state = cache.files.observe(b"fh", attrs)
    answer, block = await fill(cache, state)
    cache.fetcher.discard_range(b"fh", 0, 10)
    answer.set_result((b"o" * 4096, attrs, False))
    await block
    assert cached_block(cache, state, 0, 4096) is None
    # The next fetch of it is kept.
    answer, block = await fill(cache, state)
    answer.set_result((b"n" * 4096, attrs, False))
    await block
    assert cached_block(cache, state, 0, 4096) == b"n" * 4096
