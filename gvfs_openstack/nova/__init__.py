# SPDX-License-Identifier: Apache-2.0
"""Nova's ``gvfs`` image backend: instances cloned from golden images.

Enabled in the stock nova-compute by ``compute_driver =
gvfs.GvfsLibvirtDriver`` (the package installs the module
``nova.virt.gvfs`` that Nova's loader imports) and ``[libvirt]
images_type = qcow2``.  Supported with Nova 33 and 34 (the ``nova`` extra's
bounds in setup.cfg).
"""
