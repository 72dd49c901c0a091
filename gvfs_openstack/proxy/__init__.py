# SPDX-License-Identifier: Apache-2.0
"""The GVFS proxy, both roles (``gvfs-proxy serve``).

The server role guards a DTN's NFS server (peers, exports, identities);
the client role serves local NFS clients through a tunnel to the next hop,
with the block cache, write-back and sidecars of :mod:`.cache`.  It knows
nothing of Glance or Nova, which reach it through a mount.
"""
