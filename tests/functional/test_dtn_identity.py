# SPDX-License-Identifier: Apache-2.0
"""The conductor's NFS calls to a DTN are the file account's, not root's.

Issue 43, item 2: ``[site] nfs_uid`` defaulted to 0, so on a DTN whose
NFS server does not squash root every file a migration wrote was root's.
Unset, the conductor now acts as the owner of the images directory.
Against an NFS-Ganesha of the lab that squashes nothing, directly (the
lab's own exports squash every caller, as the deployment guide does).
"""

import asyncio
import dataclasses
import os

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_lab.topology import Lab
from gvfs_openstack.migration import localcopy
from gvfs_openstack.migration import sites


def _site(lab, **options):
    values = {f.name: None for f in dataclasses.fields(sites.Site)}
    values.update(name="dtn", dtn_export=lab.export, dtn_images_dir="images",
                  nfs_host="127.0.0.1", nfs_port=lab.ganesha.nfs_port,
                  mount_port=lab.ganesha.mount_port, nfs_wsize=1024 * 1024,
                  nfs_window=4, **options)
    return sites.Site(**values)


def _create(site, name):
    async def create():
        async with localcopy.dtn_mount(site) as nfs:
            staging = await localcopy.makedirs(nfs, "images/staging")
            await nfs.create(staging, name)
    asyncio.run(create())
    return os.stat(os.path.join(site.dtn_export, "images", "staging", name))


class _UnsquashedLab(Lab):
    """The lab with a Ganesha that passes every identity through."""

    squash_all = False


def test_files_are_the_images_owners_by_default(tmp_path):
    with _UnsquashedLab(str(tmp_path / "lab"), tunnel="tcp") as lab:
        _check_owners(lab)


def _check_owners(lab):
    images = os.path.join(lab.export, "images")
    os.makedirs(images, exist_ok=True)
    os.chown(images, FILE_UID, FILE_GID)
    made = _create(_site(lab), "copied")
    assert (made.st_uid, made.st_gid) == (FILE_UID, FILE_GID)
    # Named in the configuration: that identity, as before.
    os.chmod(os.path.join(images, "staging"), 0o777)
    named = _create(_site(lab, nfs_uid=4343, nfs_gid=4343), "named")
    assert (named.st_uid, named.st_gid) == (4343, 4343)
