# SPDX-License-Identifier: Apache-2.0
"""The FUSE operations with a RAM cache, against an in-memory NFS file.

The file's attributes only change when a test says so, as on a server
whose clock is too coarse to tell two writes apart: what the mount
writes must show even then.
"""

import asyncio
import os
import types

import pytest

from gvfs_openstack.fuse import fusefs
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs import nfs3

FH = b"file-fh"
BLOCK = 64 * 1024


class File:
    """One file on the proxy: its bytes, its times, the READs it saw."""

    def __init__(self, data):
        self.data = bytearray(data)
        self.mtime = 1
        self.reads = 0

    def attrs(self):
        t = nfs3.NfsTime(self.mtime)
        return nfs3.Fattr(const.FileType.NF3REG, 0o644, 1, 0, 0,
                          len(self.data), len(self.data), nfs3.SpecData(),
                          1, 7, t, t, t)


class Client:
    rsize = 1 << 20
    window = 4

    def __init__(self, file):
        self.file = file

    async def write_all(self, fh, offset, data):
        self.file.data[offset:offset + len(data)] = data
        return types.SimpleNamespace(verf=b"verifier", count=len(data))

    async def commit(self, fh):
        return b"verifier"


class Session:
    root = b"root-fh"
    where = "proxy:/export"

    def __init__(self, file):
        self.file = file
        self.client = Client(file)

    def deadline(self):
        return asyncio.get_running_loop().time() + 60

    async def call(self, method, fh, *args, **kwargs):
        assert fh == FH
        if method == "getattr":
            return self.file.attrs()
        assert method == "read", method
        offset, count = args
        self.file.reads += 1
        data = bytes(self.file.data[offset:offset + count])
        return types.SimpleNamespace(
            file_attributes=self.file.attrs(), data=data,
            eof=offset + len(data) >= len(self.file.data))


def mounted(data, read_cache_bytes=1 << 20):
    file = File(data)
    ops = fusefs.GvfsFuse(Session(file), fusefs.MountOptions(
        read_cache_bytes=read_cache_bytes))
    return file, ops, ops.inodes.remember(FH)


@pytest.mark.asyncio
async def test_reads_again_are_answered_from_ram():
    data = os.urandom(4 * BLOCK)
    file, ops, inode = mounted(data)
    for _ in range(3):
        info = await ops.open(inode, os.O_RDONLY, None)
        assert await ops.read(info.fh, 100, BLOCK) == data[100:100 + BLOCK]
        await ops.release(info.fh)
    assert file.reads == 1


@pytest.mark.asyncio
async def test_a_write_through_the_mount_shows_though_the_times_did_not_move():
    data, new = os.urandom(4 * BLOCK), os.urandom(BLOCK)
    file, ops, inode = mounted(data)
    info = await ops.open(inode, os.O_RDWR, None)
    assert await ops.read(info.fh, 0, 4 * BLOCK) == data
    assert await ops.write(info.fh, BLOCK + 10, new) == len(new)
    got = await ops.read(info.fh, 0, 4 * BLOCK)
    await ops.release(info.fh)
    assert got == data[:BLOCK + 10] + new + data[2 * BLOCK + 10:]


@pytest.mark.asyncio
async def test_a_truncate_through_the_mount_drops_the_file():
    data = os.urandom(4 * BLOCK)
    file, ops, inode = mounted(data)
    info = await ops.open(inode, os.O_RDWR, None)
    assert await ops.read(info.fh, 0, 4 * BLOCK) == data
    # The proxy truncated it and grew it back; the times did not move.
    file.data[:] = bytes(len(data))
    ops.session.call = _setattr_then(ops.session.call, file)
    fields = types.SimpleNamespace(
        update_mode=False, update_uid=False, update_gid=False,
        update_size=True, update_atime=False, update_mtime=False)
    attr = types.SimpleNamespace(st_mode=0, st_uid=0, st_gid=0,
                                 st_size=len(data), st_atime_ns=0,
                                 st_mtime_ns=0)
    await ops.setattr(inode, attr, fields, info.fh, None)
    got = await ops.read(info.fh, 0, BLOCK)
    await ops.release(info.fh)
    assert got == bytes(BLOCK)


def _setattr_then(call, file):
    async def with_setattr(method, fh, *args, **kwargs):
        if method == "setattr":
            return types.SimpleNamespace(
                obj_wcc=types.SimpleNamespace(after=file.attrs()))
        return await call(method, fh, *args, **kwargs)
    return with_setattr


@pytest.mark.asyncio
async def test_a_change_elsewhere_shows_from_the_next_open():
    data, new = os.urandom(2 * BLOCK), os.urandom(2 * BLOCK)
    file, ops, inode = mounted(data)
    info = await ops.open(inode, os.O_RDONLY, None)
    assert await ops.read(info.fh, 0, BLOCK) == data[:BLOCK]
    await ops.release(info.fh)
    file.data[:] = new      # Another host rewrote it.
    file.mtime += 1
    info = await ops.open(inode, os.O_RDONLY, None)
    got = await ops.read(info.fh, 0, BLOCK)
    await ops.release(info.fh)
    assert got == new[:BLOCK]


@pytest.mark.asyncio
async def test_without_a_cache_every_read_goes_to_the_proxy():
    data = os.urandom(BLOCK)
    file, ops, inode = mounted(data, read_cache_bytes=0)
    info = await ops.open(inode, os.O_RDONLY, None)
    for _ in range(3):
        assert await ops.read(info.fh, 0, BLOCK) == data
    await ops.release(info.fh)
    assert file.reads == 3
