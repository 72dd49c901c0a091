# SPDX-License-Identifier: Apache-2.0
"""A written-back file removed or linked, on the lab with real Ganesha.

What a client sees of a file with dirty bytes must be what Ganesha will
say once they are written back: its link count after a LINK or a REMOVE
of another link, NFS3ERR_STALE once its last link is gone.  The bytes of
a removed file are dropped, never sent over the tunnel; those of a file
still linked elsewhere are kept.
"""

import asyncio
import os
import random

import pytest

from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs.const import NfsStat
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.proxy import control

MIB = 1024 * 1024
WRITEBACK = {"capacity_mb": 64, "write_policy": "writeback",
             "writeback_idle_seconds": 0}


@pytest.fixture(scope="module")
def wb_lab(lab_factory):
    return lab_factory("tcp", cache=WRITEBACK)


def stats(lab):
    return lab.client_proxy.stats()


def flush(lab):
    return control.request(lab.client_proxy.control_socket, "flush",
                           timeout=300)


def client(lab):
    port = lab.client_proxy.port
    return NfsClient("127.0.0.1", port, port, timeout=30)


def test_a_removed_dirty_file_is_stale_and_its_bytes_never_leave(wb_lab):
    lab = wb_lab
    data = random.Random(7).randbytes(2 * MIB)

    async def scenario():
        async with client(lab) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.create(nfs.root, "removed.bin")
            await nfs.write_file(fh, [data])
            assert (await nfs.getattr(fh)).size == len(data)
            await nfs.remove(nfs.root, "removed.bin")
            for call in (nfs.getattr(fh), nfs.read(fh, 0, 4096),
                         nfs.write(fh, 0, b"again"), nfs.commit(fh)):
                with pytest.raises(NfsError) as raised:
                    await call
                assert raised.value.status == NfsStat.NFS3ERR_STALE

    before = stats(lab)
    asyncio.run(scenario())
    after = stats(lab)
    assert after["writeback_discarded_bytes"] - \
        before["writeback_discarded_bytes"] == len(data)
    assert after["writeback_dirty_bytes"] == 0
    flush(lab)
    # Only metadata crossed the tunnel, never the 2 MiB.
    assert stats(lab)["upstream_bytes_out"] - \
        before["upstream_bytes_out"] < MIB
    assert not os.path.exists(os.path.join(lab.export, "removed.bin"))


def test_a_dirty_file_shows_its_links_and_keeps_its_bytes(wb_lab):
    lab = wb_lab
    data = random.Random(8).randbytes(MIB + 3)

    async def scenario():
        async with client(lab) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.create(nfs.root, "linked.bin")
            await nfs.write_file(fh, [data])
            await nfs.link(fh, nfs.root, "linked-too.bin")
            shown = await nfs.getattr(fh)
            assert (shown.nlink, shown.size) == (2, len(data))
            found = await nfs.lookup(nfs.root, "linked-too.bin")
            assert (found.obj_attributes.nlink,
                    found.obj_attributes.size) == (2, len(data))
            await nfs.remove(nfs.root, "linked.bin")
            shown = await nfs.getattr(fh)
            assert (shown.nlink, shown.size) == (1, len(data))

    asyncio.run(scenario())
    assert stats(lab)["writeback_dirty_bytes"] == len(data)
    done = flush(lab)
    assert done["flushed_bytes"] == len(data)
    with open(os.path.join(lab.export, "linked-too.bin"), "rb") as f:
        assert f.read() == data
