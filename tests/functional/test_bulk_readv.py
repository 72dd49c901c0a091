# SPDX-License-Identifier: Apache-2.0
"""READV of the bulk channel through real proxies and NFS-Ganesha.

A client proxy answers a READV of scattered blocks from its cache and
fetches what it lacks in one READV from the server proxy, compressed
across the link; the same READV again never leaves the client proxy.
The server proxy refuses a READV naming too many extents or a handle
outside its exports, caps one asking for gigabytes, and serves the
connection on.  ``gvfs-proxy warm`` brings an image's boot set, and the
rest, in a few READVs.
"""

import asyncio
import json
import os
import random

import pytest

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import bulk
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs.errors import RpcError
from gvfs_openstack.sidecar import profile
from tests.functional.test_boot_profiles import put
from tests.functional.test_cache import gvfs_proxy
from tests.functional.test_wholefile import compressible

BLOCK = 64 * 1024
CACHE = {"capacity_mb": 64, "consistency": "immutable"}


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp", cache=CACHE)


@pytest.fixture(scope="module")
def image(lab, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readv")
    compressible(tmp / "image", 64 * BLOCK + 100, seed=3)
    data = (tmp / "image").read_bytes()
    put(lab, tmp, "scattered.img", data)
    return data


def _readv(lab, port, extents):
    async def scenario():
        async with NfsClient("127.0.0.1", port, port, uid=FILE_UID,
                             gid=FILE_GID) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path("scattered.img")
            return await nfs.bulk_readv(fh, extents)
    return asyncio.run(scenario())


def _calls(proxy, name):
    return proxy.stats()["calls"].get(name, 0)


def test_scattered_blocks_cross_once_in_one_call(lab, image):
    blocks = (40, 3, 17, 18, 60, 8)
    extents = [(b * BLOCK, BLOCK) for b in blocks] + [
        (64 * BLOCK, BLOCK),        # The file's short last block.
        (80 * BLOCK, BLOCK),        # Past its end: no bytes.
        (0, 0)]
    wanted = [image[offset:offset + count] for offset, count in extents]
    server = lab.server_proxy.stats()
    fattr, pieces = _readv(lab, lab.client_proxy.port, extents)
    assert [bytes(p) for p in pieces] == wanted
    assert fattr.size == len(image)
    after = lab.server_proxy.stats()
    # What the client proxy lacked came in one READV, compressed.
    assert after["calls"].get("bulk_readv", 0) - \
        server["calls"].get("bulk_readv", 0) == 1
    assert after.get("calls", {}).get("nfs_read", 0) - server.get(
        "calls", {}).get("nfs_read", 0) == 0
    raw = after["bulk_raw_bytes"] - server["bulk_raw_bytes"]
    wire = after["bulk_wire_bytes"] - server["bulk_wire_bytes"]
    assert raw == len(blocks) * BLOCK + 100
    assert wire < raw / 2, "the blocks crossed uncompressed"
    # Again: every block is in the client proxy's cache.
    before = _calls(lab.server_proxy, "bulk_readv")
    answered = lab.client_proxy.stats()["cache_bulk_reads_answered"]
    assert [bytes(p) for p in _readv(lab, lab.client_proxy.port, extents)[1]] \
        == wanted
    assert _calls(lab.server_proxy, "bulk_readv") == before
    assert lab.client_proxy.stats()["cache_bulk_reads_answered"] == \
        answered + 1


def test_a_hostile_readv_is_refused_and_the_proxy_serves_on(lab, image):
    port = lab.server_proxy.port

    async def scenario():
        async with NfsClient("127.0.0.1", port, port, uid=FILE_UID,
                             gid=FILE_GID) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path("scattered.img")
            # Too many extents: refused before anything is read.
            args = bytearray(bulk.encode_args(
                bulk.BulkProc.READV, bulk.ReadvArgs(fh, tuple(
                    bulk.Extent(i * BLOCK, BLOCK)
                    for i in range(bulk.MAX_EXTENTS)))))
            at = 4 + len(fh) + (-len(fh) % 4)
            args[at:at + 4] = (bulk.MAX_EXTENTS + 1).to_bytes(4, "big")
            with pytest.raises(RpcError, match="GARBAGE_ARGS"):
                await nfs.nfs.call(bulk.BULK_PROGRAM, bulk.BULK_VERSION,
                                   bulk.BulkProc.READV, bytes(args))
            # A handle of no file this proxy exports.
            with pytest.raises(NfsError, match="STALE"):
                await nfs.bulk_readv(b"\x01" * 32, [(0, BLOCK)])
            # Gigabytes asked: as much of the file's bytes as one reply
            # carries (half the proxy's record size), nothing invented;
            # the next extent is left for another call.
            _, pieces = await nfs.bulk_readv(fh, [(0, 2 ** 32 - 1),
                                                  (0, BLOCK)])
            assert len(pieces) == 1 and 0 < len(pieces[0]) <= bulk.MAX_CHUNK
            assert bytes(pieces[0]) == image[:len(pieces[0])]
            # The connection still serves.
            _, pieces = await nfs.bulk_readv(fh, [(BLOCK, 10)])
            assert bytes(pieces[0]) == image[BLOCK:BLOCK + 10]

    asyncio.run(scenario())


def test_a_plain_nfs_server_answers_no_readv(lab, image):
    """A mount or proxy in front of one falls back to READs."""
    async def scenario():
        async with NfsClient("127.0.0.1", lab.ganesha.nfs_port,
                             lab.ganesha.mount_port) as nfs:
            root = await nfs.mount(lab.export)
            fh = (await nfs.lookup(root, "scattered.img")).object
            with pytest.raises(RpcError, match="PROG_UNAVAIL"):
                await nfs.bulk_readv(fh, [(0, BLOCK)])

    asyncio.run(scenario())


def test_warm_brings_a_boot_set_in_a_few_readvs(lab, tmp_path):
    rng = random.Random(44)
    data = rng.randbytes(64 * BLOCK + 100)
    put(lab, tmp_path, "warmed.img", data)
    st = os.stat(os.path.join(lab.export, "warmed.img"))
    boot_set = rng.sample(range(65), 24)
    put(lab, tmp_path, profile.profile_name("warmed.img"), profile.Profile(
        st.st_size, st.st_mtime_ns, BLOCK, 1,
        tuple((block, 10 * i) for i, block in enumerate(boot_set))
    ).to_bytes())
    host = lab.add_client("warming-host", cache=dict(CACHE,
                                                     boot_profiles=True))
    before = lab.server_proxy.stats()["calls"]
    out = gvfs_proxy(host, "warm", lab.export + "/warmed.img")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["fetched"] == len(data)
    calls = lab.server_proxy.stats()["calls"]
    # 65 blocks, the 24 scattered ones first: 1 MiB per READV, where a
    # READ per run took some 30 calls.  What READs there were read the
    # profile.
    assert 0 < calls.get("bulk_readv", 0) - before.get("bulk_readv", 0) \
        <= 7
    assert calls.get("nfs_read", 0) - before.get("nfs_read", 0) <= 2
    hits = host.stats()["cache_hits"]
    port = host.port

    async def read_all():
        async with NfsClient("127.0.0.1", port, port, uid=FILE_UID,
                             gid=FILE_GID) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path("warmed.img")
            return b"".join([chunk async for _, chunk in nfs.read_file(fh)])

    assert asyncio.run(read_all()) == data
    assert host.stats()["cache_hits"] > hits
    assert lab.server_proxy.stats()["calls"].get("bulk_readv", 0) == \
        calls.get("bulk_readv", 0)
