# SPDX-License-Identifier: Apache-2.0
"""Golden images on the shared export, and who still needs them.

Nova's ``gvfs`` backend makes instance disks qcow2 overlays whose backing
file is the golden image itself, on the export every compute node mounts.
Removing that file (``openstack image delete``) would break every such
instance, on every host, at its next start.  So each overlay holds a
reference: a small file ``.gvfs-refs/<image id>/<holder>`` next to the
images, where any host sees it, and the Glance store refuses to delete an
image that still has one (glance-api answers 409, as for an RBD image with
clones).

Without a lock service (the export is reached with ``nolock``), taking a
reference and deleting an image are made safe against each other by
ordering: each side first writes its own mark, then reads the other's.

- ``hold``: create the reference, then check the image is still there.
- ``retire``: rename the image aside, wait ``grace`` seconds, then count
  references; any reference puts the image back and fails the delete.

A clone that created its reference before the count is seen by it; one
that created it later looks the image up more than ``grace`` seconds
after it was renamed, when no host's name cache (FUSE entry/attr timeout,
NFS ``actimeo``) can still show the old name, so it finds the image gone.
An interrupted ``retire`` leaves the image under its aside name;
``recover`` puts it back, so a crash never deletes an image.

Reference files never touch the image itself: its size, mtime and ctime
stay as the proxies cached them (a hard link would have changed the ctime
and emptied every node's cache of the image).
"""

import os
import re
import socket
import stat
import time

from oslo_log import log as logging

from gvfs_openstack import exceptions
from gvfs_openstack.images import locations

LOG = logging.getLogger(__name__)

REFS_DIR = ".gvfs-refs"
RETIRING_PREFIX = ".gvfs-retiring."
#: Created in an image's reference directory while it is being retired;
#: its own create makes the retiring host's listing of the directory fresh.
RETIRING_MARK = ".retiring"

_HOLDER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._~-]{0,254}$")


class GoldenImageGone(exceptions.GvfsError):
    message = "Golden image %(image)s is not on the export"


class GoldenImageInUse(exceptions.GvfsError):
    #: Only the count: glance-api returns this to whoever deletes the
    #: image, who may not see the disks' projects (``holders`` stays in
    #: ``kwargs`` for the service's log).
    message = ("Image %(image)s is the backing file of %(count)d instance "
               "disk(s); delete those first (openstack gvfs golden "
               "reference list shows your project's)")


def _clean(part):
    return re.sub(r"[^A-Za-z0-9._-]", "_", part)


def holder_name(instance_uuid, disk_name, host=None, project_id=None):
    """The reference name of one instance disk on one host.

    It names the instance's project too (``project_id``), so that the
    golden references API shows a project only its own instances; names
    of three parts, without it, are those of earlier releases.
    """
    parts = [host or socket.gethostname(), instance_uuid, disk_name]
    if project_id:
        parts.append(project_id)
    name = "~".join(_clean(part) for part in parts)
    if not _HOLDER.match(name):
        raise ValueError("bad reference name %r" % name)
    return name


def parse_holder(name):
    """``(host, instance uuid, disk name, project id)`` of a reference name.

    The project is None in a name made before references named it.
    """
    parts = name.split("~")
    if len(parts) == 3:
        return tuple(parts) + (None,)
    if len(parts) != 4:
        raise ValueError("%r is not a reference name" % name)
    return tuple(parts)


def image_path(datadir, image_id):
    """Where ``image_id`` is in ``datadir``; ValueError for a bad id."""
    if not locations.is_image_id(image_id):
        raise ValueError("%r is not an image id" % image_id)
    return os.path.join(datadir, image_id)


def _refs_dir(datadir, image_id):
    image_path(datadir, image_id)
    return os.path.join(datadir, REFS_DIR, image_id)


def hold(datadir, image_id, holder):
    """Reference ``image_id`` for ``holder``; raise GoldenImageGone.

    Returns the image's path.  Holding twice is harmless.  The reference
    is an empty file: its name says whose it is, its mtime since when;
    creating it is one synchronous call on the server, which is all the
    ordering needs (a clone pays a round trip to the DTN per call).
    """
    if not _HOLDER.match(holder):
        raise ValueError("bad reference name %r" % holder)
    path = image_path(datadir, image_id)
    refs = _refs_dir(datadir, image_id)
    ref = os.path.join(refs, holder)
    for attempt in range(5):
        try:
            os.close(os.open(ref, os.O_WRONLY | os.O_CREAT, 0o644))
            break
        except FileNotFoundError:
            # The image's first reference, or a delete's (or a gone
            # hold's) removal of the empty directory meanwhile: make it.
            if attempt == 4:
                raise
            os.makedirs(refs, exist_ok=True)
    try:
        st = os.stat(path, follow_symlinks=False)
        present = stat.S_ISREG(st.st_mode)
    except FileNotFoundError:
        present = False
    if not present:
        release(datadir, image_id, holder)
        _prune(refs)
        raise GoldenImageGone(image=image_id)
    return path


def release(datadir, image_id, holder):
    """Drop one reference; a missing one is already released.

    The image's reference directory stays while the image does: the
    next clone's ``hold`` then creates one file in it instead of making
    two directories first, across the WAN (0.68 s against 0.37 s on the
    lab's 50 ms link).  ``retire`` removes it with the image.
    """
    try:
        os.unlink(os.path.join(_refs_dir(datadir, image_id), holder))
    except FileNotFoundError:
        pass


def forget(datadir, image_id):
    """Remove the reference directory of an image that is gone, if empty.

    ``release`` leaves it for the next clone; an image deleted without
    ``retire`` (its file already missing) leaves it behind.
    """
    _prune(_refs_dir(datadir, image_id))


def _prune(refs):
    """Remove an image's reference directory, and the top one, if empty.

    Other holders, a retire's mark, or another image keep them.
    """
    for path in (refs, os.path.dirname(refs)):
        try:
            os.rmdir(path)
        except OSError:
            return


def holders(datadir, image_id):
    """The names of the references ``image_id`` has now."""
    try:
        names = os.listdir(_refs_dir(datadir, image_id))
    except FileNotFoundError:
        return []
    return sorted(n for n in names if not n.startswith("."))


def held_by_host(datadir, host=None):
    """``{(image id, holder): (instance uuid, disk name)}`` of one host."""
    host = _clean(host or socket.gethostname())
    found = {}
    try:
        images = os.listdir(os.path.join(datadir, REFS_DIR))
    except FileNotFoundError:
        return found
    for image_id in images:
        if image_id.startswith("."):
            continue
        for name in holders(datadir, image_id):
            try:
                ref_host, instance, disk, _ = parse_holder(name)
            except ValueError:
                continue
            if ref_host == host:
                found[(image_id, name)] = (instance, disk)
    return found


def retire(datadir, image_id, grace):
    """Take ``image_id`` out of use unless a reference holds it.

    Returns the path it was renamed to, for the caller to remove (an
    interrupted removal is undone by ``recover``).  Raises
    FileNotFoundError if there is no such image and GoldenImageInUse, with
    the image back in place, if it is held.
    """
    path = image_path(datadir, image_id)
    aside = os.path.join(datadir, RETIRING_PREFIX + image_id)
    refs = _refs_dir(datadir, image_id)
    os.rename(path, aside)
    mark = os.path.join(refs, RETIRING_MARK)
    try:
        os.makedirs(refs, exist_ok=True)
        os.close(os.open(mark, os.O_WRONLY | os.O_CREAT, 0o644))
        time.sleep(grace)
        names = holders(datadir, image_id)
    except BaseException:
        os.rename(aside, path)
        raise
    if names:
        os.rename(aside, path)
        _unmark(refs, mark)
        raise GoldenImageInUse(image=image_id, count=len(names),
                               holders=", ".join(names[:5]) +
                               (", ..." if len(names) > 5 else ""))
    _unmark(refs, mark)
    return aside


def _unmark(refs, mark):
    try:
        os.unlink(mark)
    except FileNotFoundError:
        pass
    _prune(refs)


def recover(datadir):
    """Put back the images an interrupted ``retire`` left aside.

    A crash must not delete an image; the delete can be asked again.
    Returns the ids put back.
    """
    restored = []
    for name in os.listdir(datadir):
        if not name.startswith(RETIRING_PREFIX):
            continue
        image_id = name[len(RETIRING_PREFIX):]
        try:
            path = image_path(datadir, image_id)
        except ValueError:
            continue
        if os.path.lexists(path):
            LOG.warning("both %s and %s exist; leaving both for the "
                        "operator", path, name)
            continue
        os.rename(os.path.join(datadir, name), path)
        _unmark(_refs_dir(datadir, image_id),
                os.path.join(_refs_dir(datadir, image_id), RETIRING_MARK))
        LOG.warning("put back image %s whose deletion was interrupted",
                    image_id)
        restored.append(image_id)
    return restored
