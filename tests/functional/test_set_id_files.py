# SPDX-License-Identifier: Apache-2.0
"""No client makes a set-user-ID or set-group-ID file on the DTN.

Behind the server proxy every caller is the file account, so a
set-user-ID copy of a binary on the export would run as that account on
the DTN for whoever executes it.  The attack goes through the whole
chain (client proxy, tunnel, server proxy, real Ganesha): CREATE with
04755, SETATTR to 06755, MKDIR 02775, and a FIFO by MKNOD with 06644; the
file system then holds none of the bits.  Ordinary modes, and the sticky
bit of a shared directory, arrive as asked.
"""

import asyncio
import os
import stat

import pytest

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import nfs3

SET_ID = stat.S_ISUID | stat.S_ISGID


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp")


def _run(lab, scenario):
    async def session():
        async with NfsClient("127.0.0.1", lab.client_proxy.port,
                             uid=FILE_UID, gid=FILE_GID, timeout=30) as nfs:
            root = await nfs.mount(lab.export)
            return await scenario(nfs, root)

    return asyncio.run(session())


def _mode(lab, *names):
    return stat.S_IMODE(os.lstat(os.path.join(lab.export, *names)).st_mode)


def test_set_id_bits_never_reach_the_export(lab):
    async def attacks(nfs, root):
        top = await nfs.mkdir(root, "attack")
        # Nothing written after: a write would clear the bits itself.
        _, created = await nfs.create(top, "created", mode=0o4755,
                                      attributes=True)
        plain = await nfs.create(top, "chmodded", mode=0o755)
        await nfs.write_file(plain, [b"#!/bin/sh\nid\n"])
        await nfs.setattr(plain, nfs3.Sattr(mode=0o6755))
        made_dir, made = await nfs.mkdir(top, "setgid-dir", mode=0o2775,
                                         attributes=True)
        await nfs.setattr(made_dir, nfs3.Sattr(mode=0o2775))
        await nfs.mknod(top, "fifo", const.FileType.NF3FIFO, 0o6644)
        return (created, made, await nfs.getattr(plain),
                await nfs.getattr(made_dir))

    replies = _run(lab, attacks)
    on_disk = {name: _mode(lab, "attack", name)
               for name in ("created", "chmodded", "setgid-dir", "fifo")}
    assert on_disk == {"created": 0o755, "chmodded": 0o755,
                       "setgid-dir": 0o775, "fifo": 0o644}, \
        {name: oct(mode) for name, mode in on_disk.items()}
    # The replies tell the client the mode it got.
    for attrs in replies:
        assert attrs is None or not attrs.mode & SET_ID, oct(attrs.mode)


def test_ordinary_modes_and_the_sticky_bit_are_kept(lab):
    async def lawful(nfs, root):
        top = await nfs.mkdir(root, "lawful")
        await nfs.create(top, "data", mode=0o644)
        program = await nfs.create(top, "program", mode=0o700)
        await nfs.setattr(program, nfs3.Sattr(mode=0o755))
        await nfs.mkdir(top, "shared", mode=0o1777)
        await nfs.mkdir(top, "plain", mode=0o755)

    _run(lab, lawful)
    assert _mode(lab, "lawful", "data") == 0o644
    assert _mode(lab, "lawful", "program") == 0o755
    assert _mode(lab, "lawful", "shared") == 0o1777
    assert _mode(lab, "lawful", "plain") == 0o755
