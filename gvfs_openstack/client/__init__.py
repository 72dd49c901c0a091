# SPDX-License-Identifier: Apache-2.0
"""The asyncio NFSv3 client of the FUSE mount and the conductor.

Pipelined READ and WRITE (UNSTABLE, then COMMIT), bulk-channel writes,
over the sans-IO protocol core of :mod:`gvfs_openstack.nfs`.
"""
