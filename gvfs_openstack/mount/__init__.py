"""Mounting a DTN export through the local client proxy.

Two kinds share one interface (:mod:`gvfs_openstack.mount.mounter`): a
kernel NFSv3 mount through os-brick, and ``gvfs-proxy mount``, a FUSE
frontend that is itself an NFS client of the proxy.
"""
