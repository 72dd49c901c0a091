# SPDX-License-Identifier: Apache-2.0
"""``gvfs-proxy mount``: a FUSE file system that is an NFSv3 client.

It runs unprivileged where no kernel NFS client can be used, talks NFSv3
to the local client proxy, and keeps what the kernel would (inodes,
attributes, a RAM cache of reads); :mod:`gvfs_openstack.mount` starts it.
"""
