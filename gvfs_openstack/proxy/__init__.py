# SPDX-License-Identifier: Apache-2.0
"""The GVFS proxy, both roles (``gvfs-proxy serve``).

The server role guards a DTN's NFS server (peers, exports, identities);
the client role serves local NFS clients through a tunnel to the next hop,
with the block cache, write-back and sidecars of :mod:`.cache`.  It knows
nothing of Glance or Nova, which reach it through a mount.

A map of the room, from the top down (each group uses those below it):

* assembly: :mod:`service` builds the parts from ``CONF`` and runs
  them; :mod:`workers` spreads a server proxy over cores;
  :mod:`control`, :mod:`metrics`, :mod:`counters` and
  :mod:`upgrade_checks` are what operators see of it.
* what a call meets: :mod:`listener` accepts clients, :mod:`roles`
  decides per call (the client role asks :mod:`.cache` first),
  :mod:`drc` and :mod:`write_behind` answer some calls early,
  :mod:`bulk_server` serves the bulk channel.
* what the server proxy lets through: :mod:`access` (identities,
  exports, peers), :mod:`handles` and :mod:`exportguard` (file
  handles), :mod:`read_only` (golden images), :mod:`local_peers`,
  with :mod:`sock_diag`, :mod:`netlink` and :mod:`host_addresses`
  to tell who a local peer is.
* how the next hop is reached: :mod:`upstream_calls` (typed calls)
  over :mod:`upstream` (a pool with XID multiplexing), :mod:`relay`
  and :mod:`streams` (records relayed while they arrive), through
  :mod:`tunnel` (TCP, TLS) or :mod:`ssh_forward`; :mod:`limits` says
  what one hop carries.
"""
