# SPDX-License-Identifier: Apache-2.0
"""Where the lab keeps what outlives one run, so the next one is quick.

``$GVFS_LAB_CACHE``, else ``gvfs-openstack/lab`` in the user's cache
directory.  Each user of it has a directory of its own (the test guest's
images, libvirt's probe of QEMU), and everything in it may be deleted at
any time: it is rebuilt.
"""

import os


def directory(name):
    """The cache directory ``name`` (not created)."""
    base = os.environ.get("GVFS_LAB_CACHE")
    if not base:
        base = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.join(
            os.path.expanduser("~"), ".cache"), "gvfs-openstack", "lab")
    return os.path.join(base, name)
