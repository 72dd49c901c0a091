# SPDX-License-Identifier: Apache-2.0
"""Nova's ``gvfs`` image backend: instances cloned from golden images.

Enabled by ``compute_driver = gvfs.GvfsLibvirtDriver`` with nova-compute
started as ``gvfs-nova-compute`` (see :mod:`gvfs_openstack.cmd.nova_compute`
for why) and ``[libvirt] images_type = qcow2``.
"""
