# SPDX-License-Identifier: Apache-2.0
"""The mount a service's share options describe.

The Glance store and Nova's backend take the same options
(:mod:`gvfs_openstack.conf.share`); this turns them into the mounter and
share of :mod:`gvfs_openstack.mount.mounter`, naming the option that is
wrong.  Options stay below the code that acts on them: ``conf`` imports
nothing of the package outside itself.
"""

from gvfs_openstack import exceptions
from gvfs_openstack.mount import mounter


def mount_from(conf, prefix="", label=""):
    """``(mounter, share)`` from the share options of ``conf``.

    None with mount type ``none``.  Raises InvalidConfig naming the option
    (``label + prefix + name``) that is wrong.
    """
    def value(name):
        return getattr(conf, prefix + name)

    if value("mount_type") == "none":
        return None
    export = value("export") or ""
    if not export.startswith("/"):
        raise exceptions.InvalidConfig(
            option=label + prefix + "export",
            reason="the export's absolute path is needed with a mount type")
    try:
        host, port = mounter.parse_address(value("proxy"))
    except ValueError as e:
        raise exceptions.InvalidConfig(option=label + prefix + "proxy",
                                       reason=str(e)) from e
    return (mounter.make(value("mount_type"), value("mount_point_base"),
                         value("io_timeout"), value("mount_options"),
                         value("mount_config")),
            mounter.Share(host, port, export))


def check_images_dir(option, subdir):
    """Refuse an images' directory that is not inside the export."""
    if subdir and (subdir.startswith("/") or ".." in subdir.split("/")):
        raise exceptions.InvalidConfig(
            option=option, reason="with a mount type, %r must be relative "
                                  "to the export and stay inside it" % subdir)
