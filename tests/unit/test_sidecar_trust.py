# SPDX-License-Identifier: Apache-2.0
"""Whose sidecars a caching proxy believes: the file's owners' only."""

import asyncio
import dataclasses

import pytest

from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc
from gvfs_openstack.nfs import nfs3
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy.cache import sidecars
from gvfs_openstack.proxy import counters
from gvfs_openstack.sidecar import format as meta_format

T = nfs3.NfsTime(100, 0)
IMAGE_OWNER, DIR_OWNER, STRANGER = 4242, 990, 2003
CALL = rpc.Call(1, const.NFS_PROGRAM, 3, Nfs3Proc.READ,
                rpc.AuthSys(0, 0, (), "test").to_opaque())


def attrs(uid, mode=0o644, size=0, kind=const.FileType.NF3REG):
    return nfs3.Fattr(kind, mode, 1, uid, uid, size, size, nfs3.SpecData(),
                      1, 2, T, T, T)


IMAGE = attrs(IMAGE_OWNER, size=8192)
SIDECAR = meta_format.Sidecar(
    8192, 100 * 10 ** 9, "sha256-nonzero", "0" * 64,
    meta_format.ZeroMap.from_extents([(0, 8192)])).to_bytes()


class Upstream:
    """The image's directory: its sidecar with the owner and mode given.

    ``dir_in_lookup``: whether LOOKUP replies carry the directory's
    attributes (post-op attributes are optional; else a GETATTR).
    """

    def __init__(self, owner, mode=0o644, dir_in_lookup=True):
        self.sidecar = attrs(owner, mode, len(SIDECAR))
        self.directory = attrs(DIR_OWNER, 0o755,
                               kind=const.FileType.NF3DIR)
        self.dir_in_lookup = dir_in_lookup
        self.calls = []

    async def nfs(self, proc, args, cred, verf=rpc.AUTH_NONE):
        self.calls.append(proc)
        if proc == Nfs3Proc.LOOKUP:
            return nfs3.Result(0, nfs3.LookupOk(
                b"fh:sidecar", self.sidecar,
                self.directory if self.dir_in_lookup else None))
        if proc == Nfs3Proc.GETATTR:
            assert bytes(args.object) == b"dir"
            return nfs3.Result(0, nfs3.GetattrOk(self.directory))
        if proc == Nfs3Proc.READ:
            return nfs3.Result(0, nfs3.ReadOk(self.sidecar, len(SIDECAR),
                                              True, SIDECAR))
        raise AssertionError("unexpected call %s" % proc)


async def _read(upstream, described=IMAGE):
    side = sidecars.Sidecars(upstream, counters.SidecarCounters())
    return await side.read_beside(CALL, b"dir", ".gvfs-meta.golden",
                                  meta_format.MAX_BYTES, described)


@pytest.mark.asyncio
@pytest.mark.parametrize("owner", [0, IMAGE_OWNER, DIR_OWNER])
@pytest.mark.parametrize("dir_in_lookup", [True, False])
async def test_root_the_files_owner_or_the_directorys_is_believed(
        owner, dir_in_lookup):
    upstream = Upstream(owner, dir_in_lookup=dir_in_lookup)
    assert await _read(upstream) == SIDECAR
    # The directory's owner is asked for only when needed.
    asked = Nfs3Proc.GETATTR in upstream.calls
    assert asked == (owner == DIR_OWNER and not dir_in_lookup)


@pytest.mark.asyncio
@pytest.mark.parametrize("dir_in_lookup", [True, False])
async def test_another_accounts_sidecar_is_refused(dir_in_lookup):
    upstream = Upstream(STRANGER, dir_in_lookup=dir_in_lookup)
    with pytest.raises(meta_format.SidecarError,
                       match="owned by uid 2003: not root, nor the owner "
                             "of the file .4242. or of its directory .990."):
        await _read(upstream)
    assert Nfs3Proc.READ not in upstream.calls


@pytest.mark.asyncio
@pytest.mark.parametrize("mode", [0o646, 0o666, 0o602])
async def test_a_sidecar_others_may_write_is_refused(mode):
    """Even the owner's: whoever may write it could have made it."""
    upstream = Upstream(IMAGE_OWNER, mode)
    with pytest.raises(meta_format.SidecarError,
                       match="writable by others"):
        await _read(upstream)


@pytest.mark.asyncio
async def test_the_file_accounts_group_may_write_it():
    assert await _read(Upstream(IMAGE_OWNER, 0o660)) == SIDECAR


@pytest.mark.asyncio
async def test_a_sidecar_without_attributes_is_asked_for_them():
    upstream = Upstream(STRANGER)
    upstream.dir_in_lookup = True
    plain = upstream.nfs

    async def no_attributes(proc, args, cred, verf=rpc.AUTH_NONE):
        if proc == Nfs3Proc.GETATTR and \
                bytes(args.object) == b"fh:sidecar":
            return nfs3.Result(0, nfs3.GetattrOk(upstream.sidecar))
        res = await plain(proc, args, cred, verf)
        if proc == Nfs3Proc.LOOKUP:
            return nfs3.Result(0, dataclasses.replace(
                res.body, obj_attributes=None))
        return res

    upstream.nfs = no_attributes
    with pytest.raises(meta_format.SidecarError, match="owned by uid 2003"):
        await _read(upstream)


@pytest.mark.asyncio
async def test_an_oversized_sidecar_is_refused_before_it_is_read():
    upstream = Upstream(IMAGE_OWNER)
    upstream.sidecar = attrs(IMAGE_OWNER, size=meta_format.MAX_BYTES + 1)
    with pytest.raises(meta_format.SidecarError,
                       match="not a regular file of at most %d bytes"
                             % meta_format.MAX_BYTES):
        await _read(upstream)
    assert Nfs3Proc.READ not in upstream.calls


def _sidecar_of_a_file(extents):
    """An image of ``extents`` 8 KiB pieces and its sidecar.

    Each piece is half zeros: one zero extent a piece, 17 to 20 bytes
    of JSON.
    """
    size = extents * 8192
    image = attrs(IMAGE_OWNER, size=size)
    return image, meta_format.Sidecar(
        size, image.mtime.nanoseconds, "sha256-nonzero", "0" * 64,
        meta_format.ZeroMap.from_extents(
            [(i * 8192, 4096) for i in range(extents)])).to_bytes()


class _Directory:
    """Images and their sidecars, by name, all of the images' owner."""

    def __init__(self, sidecars):
        self.sidecars = sidecars

    async def nfs(self, proc, args, cred, verf=rpc.AUTH_NONE):
        if proc == Nfs3Proc.LOOKUP:
            name = args.what.name
            return nfs3.Result(0, nfs3.LookupOk(
                b"fh:" + name.encode(), attrs(IMAGE_OWNER, size=len(
                    self.sidecars[name])), attrs(DIR_OWNER, 0o755,
                                                 kind=const.FileType.NF3DIR)))
        if proc == Nfs3Proc.READ:
            data = self.sidecars[bytes(args.file)[3:].decode()]
            piece = data[args.offset:args.offset + args.count]
            return nfs3.Result(0, nfs3.ReadOk(
                None, len(piece), args.offset + len(piece) >= len(data),
                piece))
        raise AssertionError("unexpected call %s" % proc)


@dataclasses.dataclass
class _State:
    fh: bytes
    fattr: nfs3.Fattr


@pytest.mark.asyncio
@pytest.mark.timeout(60)
async def test_other_readers_are_answered_while_a_large_sidecar_is_parsed():
    """Off the event loop, another file gets its sidecar meanwhile.

    The largest sidecar a proxy takes is some 2 s of parsing; a third of
    it is enough to tell.
    """
    large_image, large = _sidecar_of_a_file(300 * 1024)
    small_image, small = _sidecar_of_a_file(4)
    side = sidecars.Sidecars(_Directory({".gvfs-meta.large": large,
                                         ".gvfs-meta.small": small}),
                             counters.SidecarCounters(),
                             max_read=meta_format.MAX_BYTES)
    side.learn(b"dir", "large", b"fh-large")
    side.learn(b"dir", "small", b"fh-small")
    loading = asyncio.ensure_future(side.sidecar_of(
        CALL, _State(b"fh-large", large_image)))
    await asyncio.sleep(0.05)  # Read, and being parsed.
    assert not loading.done()
    found = await side.sidecar_of(CALL, _State(b"fh-small", small_image))
    assert found is not None and found.size == 4 * 8192
    assert not loading.done(), "the small one waited for the large one"
    found = await loading
    assert found is not None and found.size == 300 * 1024 * 8192
    assert side.counters.sidecars_loaded == 2
