# SPDX-License-Identifier: Apache-2.0
"""``gvfs-conductor``: the one package above migration and replication.

It hosts both loops in one process -- the migration jobs' RPC server and
pipelines (:mod:`gvfs_openstack.migration`) and the replication
policies' reconciler and listener (:mod:`gvfs_openstack.replication`) --
and exports what both keep in the job store to Prometheus.  Replication
builds on migration (its copies are migration jobs); migration knows
nothing of replication; only this package imports both.
"""
