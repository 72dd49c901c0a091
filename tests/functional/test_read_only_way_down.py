# SPDX-License-Identifier: Apache-2.0
"""The way down to ``[server] read_only_dirs``: fixed for compute nodes.

Protecting the images in ``images/`` is not enough if ``images/`` itself
can be renamed away and a directory of a compute node's own renamed,
made or symlinked in under its name: every node and Glance would then
read that node's file as the golden image.  Each attack here is sent
through a compute node's client proxy to a server proxy with
``read_only_dirs`` in front of a real Ganesha, with the images' own uid,
and checked on disk afterwards.  What compute nodes and Glance still do
there (references, files elsewhere in the export, Glance's own uploads
through its own server proxy) passes.
"""

import asyncio
import os

import pytest

from gvfs_lab import process
from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_lab.topology import Proxy
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs.errors import RpcError
from gvfs_openstack.nfs import nfs3
from tests.functional.conftest import sha256

ROFS = const.NfsStat.NFS3ERR_ROFS
GOLDEN = bytes(range(256)) * 1024      # 256 KiB
EVIL = b"\xee" * len(GOLDEN)


@pytest.fixture(scope="module")
def compute(lab_factory, tmp_path_factory):
    """A lab, its DTN's proxy for compute nodes, and one compute node's.

    The lab's own client proxy reaches the DTN through a server proxy
    without ``read_only_dirs``: Glance's path.
    """
    lab = lab_factory("tcp")
    images = os.path.join(lab.export, "images")
    os.makedirs(os.path.join(images, "subdir"))
    with open(os.path.join(images, "golden"), "wb") as f:
        f.write(GOLDEN)
    for path in (images, os.path.join(images, "subdir"),
                 os.path.join(images, "golden")):
        os.chown(path, FILE_UID, FILE_GID)
    workdir = str(tmp_path_factory.mktemp("way-down"))
    server = Proxy(workdir, "compute-dtn-proxy", {
        "proxy": {"role": "server"},
        "listen": {"host": "127.0.0.1", "port": process.free_port(),
                   "allowed_peers": "127.0.0.1/32"},
        "server": {"nfs_port": lab.ganesha.nfs_port,
                   "mount_port": lab.ganesha.mount_port,
                   "exports": lab.export, "read_only_dirs": images,
                   "squash_uid": FILE_UID, "squash_gid": FILE_GID},
    })
    node = Proxy(workdir, "compute-node-proxy", {
        "proxy": {"role": "client"},
        "listen": {"host": "127.0.0.1", "port": process.free_port()},
        "upstream": {"tunnel": "tcp", "host": "127.0.0.1",
                     "port": server.port, "reconnect_max_delay": 1.0},
    })
    yield lab, server, node
    node.stop()
    server.stop()


def _run(port, export, scenario):
    async def session():
        async with NfsClient("127.0.0.1", port, uid=FILE_UID,
                             gid=FILE_GID, timeout=30) as nfs:
            root = await nfs.mount(export)
            return await scenario(nfs, root)

    return asyncio.run(session())


def _refused():
    return pytest.raises(NfsError, match=ROFS.name)


def _state(export):
    """What the attacks must leave as it was: ``images/`` and its file."""
    images = os.path.join(export, "images")
    st = os.lstat(images)
    return (sorted(os.listdir(export)), (st.st_ino, st.st_mode),
            sorted(os.listdir(images)),
            sha256(os.path.join(images, "golden")))


def test_images_cannot_be_swapped_from_the_export_root(compute):
    lab, server, node = compute
    before = _state(lab.export)
    refused = server.stats()["read_only_refused"]

    async def attacks(nfs, root):
        images = await nfs.lookup(root, "images")
        assert images.obj_attributes.type == const.FileType.NF3DIR
        # A directory of the node's own, with its "golden image".
        mine = await nfs.mkdir(root, "mine", 0o755)
        fake = await nfs.create(mine, "golden", 0o644)
        await nfs.write(fake, 0, EVIL, const.StableHow.FILE_SYNC)
        with _refused():
            await nfs.rename(root, "images", root, "old-images")
        with _refused():
            await nfs.rename(root, "mine", root, "images")
        with _refused():
            await nfs.symlink(root, "images", "mine")
        with _refused():
            await nfs.link(fake, root, "images")
        with _refused():
            await nfs.setattr(images.object, nfs3.Sattr(mode=0))
        with _refused():
            await nfs.rmdir(root, "images")
        with _refused():
            await nfs.mkdir(root, "images", 0o755)
        with _refused():
            await nfs.remove(root, "images")
        # Directories in it are the images' too: none made, none removed.
        with _refused():
            await nfs.mkdir(images.object, "planted", 0o755)
        with _refused():
            await nfs.rmdir(images.object, "subdir")
        await nfs.remove(mine, "golden")
        await nfs.rmdir(root, "mine")

    _run(node.port, lab.export, attacks)
    assert _state(lab.export) == before
    assert server.stats()["read_only_refused"] - refused == 10


def _garbage():
    return pytest.raises(RpcError, match="GARBAGE_ARGS")


def test_a_name_the_dtn_would_read_otherwise_is_refused(compute):
    """A NUL in a name: NFS-Ganesha cuts ``images\0`` to ``images``.

    Every check by name would see one name and the DTN's file system
    another: the swap of ``images/``, a sidecar planted in it as a
    "profile" (``.gvfs-meta.golden\0.profile``), the way up out of an
    allowed export (``..\0``).  The server proxy refuses a name with a
    NUL or a slash in it as garbage, before any check, as Linux's nfsd
    does.  Found by an independent attack on the read-only fix.
    """
    lab, server, node = compute
    before = _state(lab.export)

    async def attacks(nfs, root):
        images = await nfs.lookup(root, "images")
        await nfs.mkdir(root, "mine", 0o755)
        try:
            with _garbage():
                await nfs.rename(root, "images\0", root, "old-images")
            with _garbage():
                await nfs.rename(root, "mine", root, "images\0")
            with _garbage():
                await nfs.rename(root, "mine", root, "images/")
            with _garbage():
                await nfs.create(images.object,
                                 ".gvfs-meta.golden\0.profile", 0o644)
            with _garbage():
                await nfs.lookup(images.object, "..\0")
            with _garbage():
                await nfs.lookup(root, "images/golden")
            with _garbage():
                await nfs.remove(images.object, "golden\0")
            # Lawful names on the same calls still pass.
            assert (await nfs.lookup(images.object, "golden")).object
        finally:
            await nfs.rmdir(root, "mine")

    _run(node.port, lab.export, attacks)
    assert _state(lab.export) == before


def test_the_export_root_cannot_be_locked(compute):
    """SETATTR mode=000 of the root would hide every image too."""
    lab, server, node = compute
    mode = os.stat(lab.export).st_mode

    async def attack(nfs, root):
        with _refused():
            await nfs.setattr(root, nfs3.Sattr(mode=0))

    _run(node.port, lab.export, attack)
    assert os.stat(lab.export).st_mode == mode


def test_references_and_files_elsewhere_are_still_written(compute):
    lab, _, node = compute

    async def work(nfs, root):
        # Files and directories beside ``images``.
        scratch = await nfs.mkdir(root, "scratch", 0o755)
        fh = await nfs.create(scratch, "file", 0o644)
        await nfs.write(fh, 0, b"ok", const.StableHow.FILE_SYNC)
        await nfs.setattr(scratch, nfs3.Sattr(mode=0o750))
        await nfs.rename(scratch, "file", root, "file")
        await nfs.remove(root, "file")
        await nfs.rmdir(root, "scratch")
        # A golden reference, as ``golden.hold`` and ``release`` make
        # and drop one: the references' directory comes and goes too.
        images = (await nfs.lookup(root, "images")).object
        refs = await nfs.mkdir(images, ".gvfs-refs", 0o755)
        held = await nfs.mkdir(refs, "golden", 0o755)
        await nfs.create(held, "compute-1~instance~disk~project")
        await nfs.remove(held, "compute-1~instance~disk~project")
        await nfs.rmdir(refs, "golden")
        await nfs.rmdir(images, ".gvfs-refs")

    _run(node.port, lab.export, work)
    assert not os.path.exists(os.path.join(lab.export, "scratch"))
    assert not os.path.exists(os.path.join(lab.export, "images",
                                           ".gvfs-refs"))


def test_glance_still_writes_images_through_its_own_proxy(compute):
    """Glance's node reaches the DTN through a proxy without the option."""
    lab, _, _ = compute

    async def upload(nfs, root):
        images = (await nfs.lookup(root, "images")).object
        fh = await nfs.create(images, ".upload-new", 0o644)
        await nfs.write(fh, 0, b"image", const.StableHow.FILE_SYNC)
        await nfs.rename(images, ".upload-new", images, "new-image")

    _run(lab.client_proxy.port, lab.export, upload)
    path = os.path.join(lab.export, "images", "new-image")
    with open(path, "rb") as f:
        assert f.read() == b"image"
    os.unlink(path)


@pytest.mark.xfail(strict=True, reason=(
    "the server proxy does not know which host a call comes from: a "
    "reference names its host, but any compute node may remove it "
    "(doc/source/admin/security.rst, golden references)"))
def test_another_hosts_reference_cannot_be_removed(compute):
    lab, server, node = compute
    refs = os.path.join(lab.export, "images", ".gvfs-refs", "golden")
    os.makedirs(refs)
    other = os.path.join(refs, "compute-2~instance~disk~project")
    open(other, "wb").close()
    for path in (os.path.dirname(refs), refs, other):
        os.chown(path, FILE_UID, FILE_GID)

    async def attack(nfs, root):
        images = (await nfs.lookup(root, "images")).object
        refs_fh = (await nfs.lookup(images, ".gvfs-refs")).object
        held = (await nfs.lookup(refs_fh, "golden")).object
        with _refused():
            await nfs.remove(held, "compute-2~instance~disk~project")

    try:
        _run(node.port, lab.export, attack)
        assert os.path.exists(other)
    finally:
        for path in (other, refs, os.path.dirname(refs)):
            if os.path.isdir(path):
                os.rmdir(path)
            elif os.path.exists(path):
                os.unlink(path)
