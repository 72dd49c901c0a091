# SPDX-License-Identifier: Apache-2.0
"""A DTN's server proxy for compute nodes: golden images read, not changed.

``[server] read_only_dirs`` in front of a real Ganesha.  Each attack is
what a compute node's account could send through its client proxy with
the images' own uid: rewrite, truncate, remove, rename over, plant a
sidecar beside, link, send a compressed WRITE -- also with a handle kept
from before the proxy restarted.  What compute nodes must still write
there (golden references, boot profiles) passes.
"""

import asyncio
import hashlib
import os

import pytest

from gvfs_lab import process
from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_lab.topology import Proxy
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs import nfs3
from tests.functional.conftest import sha256

ROFS = const.NfsStat.NFS3ERR_ROFS
GOLDEN = bytes(range(256)) * 4096      # 1 MiB


@pytest.fixture(scope="module")
def dtn(lab_factory, tmp_path_factory):
    lab = lab_factory("tcp")
    images = os.path.join(lab.export, "images")
    os.makedirs(images)
    golden = os.path.join(images, "golden")
    with open(golden, "wb") as f:
        f.write(GOLDEN)
    for path in (images, golden):
        os.chown(path, FILE_UID, FILE_GID)
    sections = {
        "proxy": {"role": "server"},
        "listen": {"host": "127.0.0.1", "port": process.free_port(),
                   "allowed_peers": "127.0.0.1/32"},
        "server": {"nfs_port": lab.ganesha.nfs_port,
                   "mount_port": lab.ganesha.mount_port,
                   "exports": lab.export, "read_only_dirs": images,
                   "squash_uid": FILE_UID, "squash_gid": FILE_GID},
    }
    workdir = str(tmp_path_factory.mktemp("read-only"))
    proxy = Proxy(workdir, "compute-dtn-proxy", sections)
    yield lab, proxy, (workdir, sections)
    proxy.stop()


def _run(dtn, scenario):
    lab, proxy, _ = dtn

    async def session():
        async with NfsClient("127.0.0.1", proxy.port, uid=FILE_UID,
                             gid=FILE_GID, timeout=30) as nfs:
            await nfs.mount(lab.export)
            images = await nfs.lookup_path("images")
            return await scenario(nfs, images)

    return asyncio.run(session())


def _refused(status=ROFS):
    return pytest.raises(NfsError, match=const.NfsStat(status).name)


def test_a_golden_image_cannot_be_changed_through_it(dtn):
    lab, proxy, _ = dtn
    before = proxy.stats()["read_only_refused"]

    async def attacks(nfs, images):
        golden = (await nfs.lookup(images, "golden")).object
        data = bytearray()
        async for _, piece in nfs.read_file(golden):
            data += piece
        assert bytes(data) == GOLDEN        # Read as ever.
        with _refused():
            await nfs.write(golden, 0, b"evil")
        with _refused():
            await nfs.bulk_write(golden, 0, bytes(256 * 1024))
        with _refused():
            await nfs.setattr(golden, nfs3.Sattr(size=0))
        with _refused():
            await nfs.setattr(golden, nfs3.Sattr(mode=0o666))
        with _refused():
            await nfs.remove(images, "golden")
        with _refused():
            await nfs.link(golden, images, "golden-again")
        # A sidecar planted beside it (calling its data zero) or a new
        # image: nothing is created in the directory but profiles.
        with _refused():
            await nfs.create(images, ".gvfs-meta.golden")
        with _refused():
            await nfs.symlink(images, "golden-link", "/etc/shadow")
        # Made elsewhere, then renamed over the image.
        refs = await _refs_dir(nfs, images)
        await nfs.create(refs, "bait")
        with _refused():
            await nfs.rename(refs, "bait", images, "golden")
        await nfs.remove(refs, "bait")

    _run(dtn, attacks)
    assert sha256(os.path.join(lab.export, "images", "golden")) == \
        hashlib.sha256(GOLDEN).hexdigest()
    assert proxy.stats()["read_only_refused"] - before == 9


async def _refs_dir(nfs, images):
    try:
        return await nfs.mkdir(images, ".gvfs-refs", 0o755)
    except NfsError:
        return (await nfs.lookup(images, ".gvfs-refs")).object


def test_references_and_boot_profiles_are_still_written(dtn):
    lab, _, _ = dtn

    async def work(nfs, images):
        # A golden reference, as the Nova backend makes and drops one.
        refs = await _refs_dir(nfs, images)
        held = await nfs.mkdir(refs, "golden", 0o755)
        ref = await nfs.create(held, "compute-1~instance~disk~project")
        await nfs.write(ref, 0, b"held", const.StableHow.FILE_SYNC)
        await nfs.remove(held, "compute-1~instance~disk~project")
        await nfs.rmdir(refs, "golden")
        # A boot profile, as a caching proxy records one: a temporary
        # name, then RENAME over the profile.
        temp = ".gvfs-meta.golden.profile.0123456789ab.tmp"
        fh = await nfs.create(images, temp, 0o640)
        await nfs.write(fh, 0, b"{}", const.StableHow.FILE_SYNC)
        await nfs.rename(images, temp, images, ".gvfs-meta.golden.profile")

    _run(dtn, work)
    with open(os.path.join(lab.export, "images",
                           ".gvfs-meta.golden.profile"), "rb") as f:
        assert f.read() == b"{}"


def test_a_handle_kept_across_a_restart_is_still_refused(dtn):
    """The restarted proxy has seen no LOOKUP of the image: it walks."""
    lab, proxy, (workdir, sections) = dtn
    kept = _run(dtn, lambda nfs, images: nfs.lookup(images, "golden"))
    proxy.stop()
    restarted = Proxy(workdir, "compute-dtn-proxy", sections)
    try:
        async def session():
            async with NfsClient("127.0.0.1", restarted.port, uid=FILE_UID,
                                 gid=FILE_GID, timeout=30) as nfs:
                await nfs.mount(lab.export)
                with _refused():
                    await nfs.write(kept.object, 0, b"evil")
                with _refused():
                    await nfs.setattr(kept.object, nfs3.Sattr(size=0))

        asyncio.run(session())
        stats = restarted.stats()
        assert stats["handle_walks"] >= 1
        assert stats["read_only_refused"] == 2
    finally:
        restarted.stop()
    assert sha256(os.path.join(lab.export, "images", "golden")) == \
        hashlib.sha256(GOLDEN).hexdigest()
