# SPDX-License-Identifier: Apache-2.0
"""oslo.config options, one module per area.

Nothing here registers an option when it is imported: each program
registers its own groups on its own configuration when it starts
(``gvfs-proxy`` the proxy's, Nova's driver ``[gvfs]``, the conductor its
own), so a service that loads one of our plugins never gains another
program's groups.  :mod:`gvfs_openstack.conf.opts` lists them all.
"""

#: oslo.config's project of every program and plugin: where each looks
#: for its configuration file when given none (``/etc/gvfs-openstack/``,
#: as the docs, the systemd units and devstack have it).
PROJECT = "gvfs-openstack"
