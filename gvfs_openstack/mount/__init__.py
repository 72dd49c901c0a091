# SPDX-License-Identifier: Apache-2.0
"""Mounting a DTN export through the local client proxy, for Glance and Nova.

Two kinds share one interface (:mod:`gvfs_openstack.mount.mounter`): a
kernel NFSv3 mount (at os-brick's mount point), whose root-only steps are
the privsep entry points of :mod:`gvfs_openstack.mount.privileged`, and
``gvfs-proxy mount``, the FUSE NFS client of :mod:`gvfs_openstack.fuse`.
The kernel's side of mounts (the mount table, a FUSE connection's
controls) is here too, below the FUSE file system, which starts no
mount: :mod:`gvfs_openstack.fuse` imports this package, never the
reverse.
"""
