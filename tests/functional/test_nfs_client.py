# SPDX-License-Identifier: Apache-2.0
"""The asyncio NFSv3 client against real NFS-Ganesha (via the proxy)."""

import asyncio
import os

from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.client.write_batch import WriteBatch

MIB = 1024 * 1024


def test_commit_after_a_server_restart_resends_unstable_writes(lab_factory):
    lab = lab_factory("tcp")
    port = lab.server_proxy.port
    payload = os.urandom(8 * MIB + 5)

    async def scenario():
        async with NfsClient("127.0.0.1", port, port, window=4,
                             timeout=120) as nfs:
            root = await nfs.mount(lab.export)
            fh = await nfs.create(root, "verifier.bin")
            batch = WriteBatch(nfs, fh)
            for offset in range(0, len(payload), MIB):
                await batch.add(offset, payload[offset:offset + MIB])
            await batch._drain()
            assert len(batch.verifiers) == 1
            # A reboot between the UNSTABLE writes and the COMMIT: the
            # server proxy reconnects, and the new verifier makes the
            # client send every uncommitted byte again.
            await asyncio.get_running_loop().run_in_executor(
                None, lab.ganesha.restart)
            await batch.commit()
            assert batch.resent_bytes == len(payload)
            data = bytearray()
            async for _, chunk in nfs.read_file(fh):
                data += chunk
            return bytes(data)

    assert asyncio.run(scenario()) == payload
    with open(os.path.join(lab.export, "verifier.bin"), "rb") as f:
        assert f.read() == payload


def test_pipelined_write_and_read_of_a_large_file(lab_factory, tmp_path):
    lab = lab_factory("tcp")
    port = lab.client_proxy.port
    payload = os.urandom(40 * MIB + 123)

    async def chunks():
        for offset in range(0, len(payload), 3 * MIB):
            yield payload[offset:offset + 3 * MIB]

    async def scenario():
        async with NfsClient("127.0.0.1", port, port, wsize=256 * 1024,
                             rsize=512 * 1024, window=8) as nfs:
            root = await nfs.mount(lab.export)
            fh = await nfs.create(root, "pipelined.bin")
            written = await nfs.write_file(fh, chunks(),
                                           commit_every=16 * MIB)
            assert written == len(payload)
            pieces = [chunk async for _, chunk in nfs.read_file(fh)]
            return b"".join(bytes(p) for p in pieces)

    assert asyncio.run(scenario()) == payload
