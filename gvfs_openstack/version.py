# SPDX-License-Identifier: Apache-2.0
"""The installed release's version, as every program's ``--version`` says.

pbr's, from the installed distribution's metadata (or git in a source
tree), as OpenStack's own services report theirs.
"""

from pbr import version as pbr_version

#: The distribution, as pbr knows it.
INFO = pbr_version.VersionInfo("gvfs-openstack")


def string():
    """The release, e.g. ``0.1.0`` (a development build: ``0.0.1.dev351``)."""
    return INFO.version_string_with_vcs()
