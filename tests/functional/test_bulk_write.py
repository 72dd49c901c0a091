# SPDX-License-Identifier: Apache-2.0
"""Compressed WRITEs of the bulk channel, to a real server proxy.

The server proxy in front of NFS-Ganesha decompresses each chunk and
writes it UNSTABLE; a COMMIT with the chunk's verifier makes it durable.
Chunks that lie about their size, do not decompress or are too large
are refused with the file left as it was.
"""

import asyncio
import os

import pytest

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.client.write_batch import WriteBatch
from gvfs_openstack.client import zstd_chunks
from gvfs_openstack.nfs import bulk
from tests.functional.test_wholefile import compressible

MIB = 1024 * 1024


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp")


def client(lab):
    port = lab.server_proxy.port
    return NfsClient("127.0.0.1", port, port, window=4)


def on_export(lab, name):
    with open(os.path.join(lab.export, name), "rb") as f:
        return f.read()


def test_chunks_arrive_whole_and_cross_compressed(lab, tmp_path):
    source = tmp_path / "text"
    compressible(source, 9 * MIB + 4321, seed=7)
    data = source.read_bytes()
    before = lab.server_proxy.stats()

    async def scenario():
        async with client(lab) as nfs:
            root = await nfs.mount(lab.export)
            assert await nfs.has_bulk_channel()
            fh = await nfs.create(root, "bulk.txt")
            batch = WriteBatch(nfs, fh, nfs.bulk_write)
            for offset in range(0, len(data), 2 * MIB):
                await batch.add(offset, data[offset:offset + 2 * MIB])
            await batch.commit()
            return nfs.bulk_wire_bytes

    wire = asyncio.run(scenario())
    assert on_export(lab, "bulk.txt") == data
    after = lab.server_proxy.stats()
    assert after["bulk_writes"] - before["bulk_writes"] == 5
    assert after["bulk_write_raw_bytes"] - before["bulk_write_raw_bytes"] \
        == len(data)
    assert after["bulk_write_wire_bytes"] - \
        before["bulk_write_wire_bytes"] == wire
    assert wire < len(data) / 3, "the chunks crossed uncompressed"


def test_incompressible_chunks_go_as_plain_writes(lab):
    """Even one larger than the proxy's record size could carry."""
    data = os.urandom(5 * MIB + 1)
    before = lab.server_proxy.stats()

    async def scenario():
        async with client(lab) as nfs:
            root = await nfs.mount(lab.export)
            fh = await nfs.create(root, "random.bin")
            ok = await nfs.bulk_write(fh, 0, data)
            assert ok.count == len(data)
            assert ok.verf == await nfs.commit(fh)
            return nfs.bulk_wire_bytes

    assert asyncio.run(scenario()) == len(data)
    assert on_export(lab, "random.bin") == data
    assert lab.server_proxy.stats()["bulk_writes"] == before["bulk_writes"]


def hostile_chunks():
    good = zstd_chunks.compress(b"x" * MIB, 1)
    return {
        "garbage": (MIB, bulk.Codec.ZSTD, b"\x28\xb5\x2f\xfd" + b"junk" * 9),
        # Says it holds more than the chunk's size: not decompressed.
        "lying size": (1000, bulk.Codec.ZSTD, good),
        "cut short": (MIB, bulk.Codec.ZSTD, good[:-4]),
        "short raw": (MIB, bulk.Codec.NONE, b"x" * 1000),
        "too large": (2 * MIB + 1, bulk.Codec.NONE, b"x" * 10),
    }


@pytest.mark.parametrize("kind", sorted(hostile_chunks()))
def test_a_hostile_chunk_is_refused_and_changes_nothing(lab, kind):
    raw_count, codec, data = hostile_chunks()[kind]
    name = "hostile-%s" % kind.replace(" ", "-")
    with open(os.path.join(lab.export, name), "wb") as f:
        f.write(b"before")
    os.chown(os.path.join(lab.export, name), FILE_UID, FILE_GID)

    async def scenario():
        async with client(lab) as nfs:
            root = await nfs.mount(lab.export)
            fh = (await nfs.lookup(root, name)).object
            results = await nfs.nfs.call(
                bulk.BULK_PROGRAM, bulk.BULK_VERSION, bulk.BulkProc.WRITE,
                bulk.encode_args(bulk.BulkProc.WRITE, bulk.WriteArgs(
                    fh, 0, raw_count, codec, data)))
            res = bulk.decode_res(bulk.BulkProc.WRITE, results)
            assert not res.ok
            # The proxy still serves this connection.
            await nfs.bulk_write(fh, 6, b" and after")
            await nfs.commit(fh)
            return res.status

    assert asyncio.run(scenario()) == 22   # NFS3ERR_INVAL
    assert on_export(lab, name) == b"before and after"


def test_a_plain_nfs_server_has_no_bulk_channel(lab):
    async def scenario():
        async with NfsClient("127.0.0.1", lab.ganesha.nfs_port,
                             lab.ganesha.mount_port) as nfs:
            root = await nfs.mount(lab.export)
            assert not await nfs.has_bulk_channel()
            fh = await nfs.create(root, "plain.bin")
            with pytest.raises(Exception, match="PROG_UNAVAIL"):
                await nfs.bulk_write(fh, 0, b"x" * 65536)

    asyncio.run(scenario())
