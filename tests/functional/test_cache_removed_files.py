# SPDX-License-Identifier: Apache-2.0
"""A file removed through a caching proxy is not served from its cache.

Once a REMOVE or a RENAME over a file went through the proxy, the old
handle gets what Ganesha says of it (NFS3ERR_STALE, or the file if
another link keeps it), even within a long coherence window in which
the proxy otherwise trusts what it knows.  On the lab with real Ganesha,
through the client proxy and through a leaf in front of it (a LAN
chain, both caching).
"""

import asyncio
import os

import pytest

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs.const import CreateMode
from gvfs_openstack.nfs.const import Nfs3Proc as P
from gvfs_openstack.nfs.const import NfsStat
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs import nfs3

KIB = 1024
#: Attributes trusted for ten minutes: only what goes through the proxy
#: tells it a file changed.
CACHE = {"capacity_mb": 64, "coherence_window": 600}


@pytest.fixture(scope="module")
def removal_lab(lab_factory):
    lab = lab_factory("tcp", cache=CACHE)
    lab.leaf = lab.add_leaf("removal-leaf", cache=CACHE)
    return lab


@pytest.fixture(params=["caching", "lan"])
def port(request, removal_lab):
    """The first hop of the chain: the client proxy, or the leaf."""
    if request.param == "lan":
        return removal_lab.leaf.port
    return removal_lab.client_proxy.port


def run(lab, port, scenario):
    async def main():
        async with NfsClient("127.0.0.1", port, port, uid=FILE_UID,
                             gid=FILE_GID, timeout=60) as nfs:
            await nfs.mount(lab.export)
            name = "d-%s" % os.urandom(4).hex()
            dir_fh = await nfs.mkdir(nfs.root, name)
            return await scenario(nfs, dir_fh)
    return asyncio.run(main())


async def cached_file(nfs, dir_fh, name, data):
    """Create ``name`` with ``data``, read it (cached), look it up."""
    fh = await nfs.create(dir_fh, name)
    await nfs.write_all(fh, 0, data)
    assert (await nfs.read(fh, 0, len(data))).data == data
    assert (await nfs.lookup(dir_fh, name)).object == fh
    assert (await nfs.read(fh, 0, len(data))).data == data
    return fh


async def status_of(call):
    try:
        await call
    except NfsError as e:
        return e.status
    return NfsStat.NFS3_OK


def test_a_removed_file_read_by_its_old_handle_is_stale(removal_lab, port):
    async def scenario(nfs, dir_fh):
        fh = await cached_file(nfs, dir_fh, "a", os.urandom(100 * KIB))
        await nfs.remove(dir_fh, "a")
        return (await status_of(nfs.read(fh, 0, 4096)),
                await status_of(nfs.getattr(fh)))

    assert run(removal_lab, port, scenario) == (
        NfsStat.NFS3ERR_STALE, NfsStat.NFS3ERR_STALE)


def test_a_file_renamed_over_is_stale_the_renamed_one_served(removal_lab,
                                                             port):
    first, second = os.urandom(70 * KIB), os.urandom(3 * KIB)

    async def scenario(nfs, dir_fh):
        fh_a = await cached_file(nfs, dir_fh, "a", first)
        fh_b = await cached_file(nfs, dir_fh, "b", second)
        await nfs.rename(dir_fh, "a", dir_fh, "b")
        return (await status_of(nfs.read(fh_b, 0, 4096)),
                bytes((await nfs.read(fh_a, 0, len(first))).data),
                (await nfs.lookup(dir_fh, "b")).object == fh_a)

    assert run(removal_lab, port, scenario) == (
        NfsStat.NFS3ERR_STALE, first, True)


def test_a_file_with_another_link_is_still_served(removal_lab, port):
    data = os.urandom(90 * KIB)

    async def scenario(nfs, dir_fh):
        fh = await cached_file(nfs, dir_fh, "a", data)
        await nfs.link(fh, dir_fh, "b")
        await nfs.remove(dir_fh, "a")
        attrs = await nfs.getattr(fh)
        read = await nfs.read(fh, 0, len(data))
        # Fresh attributes: the server's, after the REMOVE.
        return attrs.nlink, bytes(read.data), read.file_attributes.nlink

    assert run(removal_lab, port, scenario) == (1, data, 1)


def test_a_name_listed_by_readdirplus_is_forgotten_when_removed(
        removal_lab, port):
    async def scenario(nfs, dir_fh):
        fh = await nfs.create(dir_fh, "listed")
        await nfs.write_all(fh, 0, b"x" * 5000)
        # The handle as a client that lists (ls -l) has it, no LOOKUP.
        entries = {e.name: e.name_handle
                   for e in await nfs.readdirplus(dir_fh)}
        assert entries["listed"] == fh
        assert (await nfs.read(fh, 0, 5000)).data == b"x" * 5000
        await nfs.remove(dir_fh, "listed")
        return await status_of(nfs.read(fh, 0, 5000))

    assert run(removal_lab, port, scenario) == NfsStat.NFS3ERR_STALE


def test_a_file_shorter_than_its_attributes_say_is_read_as_it_is(
        removal_lab, port):
    """A fetch that brings fewer bytes than the attributes promise.

    Ganesha truncates a file by a CREATE (UNCHECKED, size 0) after a
    REMOVE in its directory and still reports its old size for a while.
    The proxy used to answer the READ with the old size as its count and
    none of the bytes: a garbled reply, and the client waited forever.
    Now the READ goes to the server, which answers it.
    """
    async def scenario(nfs, dir_fh):
        fh = await nfs.create(dir_fh, "a")
        await nfs.write_all(fh, 0, b"xy")
        other = await nfs.create(dir_fh, "c")
        await nfs.write_all(other, 0, os.urandom(6172))
        await nfs.remove(dir_fh, "c")
        await nfs._call(P.CREATE, nfs3.CreateArgs(
            nfs3.DirOpArgs(dir_fh, "a"), nfs3.CreateHow(
                CreateMode.UNCHECKED, nfs3.Sattr(mode=0o644, size=0))))
        read = await asyncio.wait_for(nfs.read(fh, 0, 4096), 30)
        return bytes(read.data), read.eof

    assert run(removal_lab, port, scenario) == (b"", True)
