# SPDX-License-Identifier: Apache-2.0
"""Replication policies: images that keep themselves copied to a site.

:mod:`.plan` decides (no I/O), :mod:`.reconciler` looks at the source
Glance and the job store and acts on the decisions, :mod:`.listener`
starts a round when Glance announces a change, :mod:`.store` keeps the
policies and :mod:`.manager` answers the conductor's callers.
"""
