# SPDX-License-Identifier: Apache-2.0
"""``gvfs://<store id>/<image id>``: where an image of the gvfs store is.

One definition for the Glance store, which makes and reads these
locations, and Nova's backend, which finds golden images by them; and one
rule for what an image id may be, since it becomes a file name on the
export.
"""

import re
import urllib.parse

SCHEME = "gvfs"
_IMAGE_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$")


def is_image_id(name):
    """Whether ``name`` is a plain file name that may name an image.

    Never a path, ``.``/``..``, or a hidden name (the store's own files
    -- uploads, sidecars, references -- start with a dot).
    """
    return isinstance(name, str) and bool(_IMAGE_ID.match(name))


def url(store_id, image_id):
    return "%s://%s/%s" % (SCHEME, store_id, image_id)


def parse(location):
    """``(store id, image id)`` of a location; ValueError says why not."""
    pieces = urllib.parse.urlparse(location)
    if pieces.scheme != SCHEME or pieces.params or pieces.query or \
            pieces.fragment or not pieces.netloc:
        raise ValueError("%r is not gvfs://<store id>/<image id>"
                         % location)
    path = pieces.path
    if not path.startswith("/") or "/" in path[1:]:
        raise ValueError("%r does not name one image" % location)
    image_id = urllib.parse.unquote(path[1:])
    if not is_image_id(image_id):
        raise ValueError("image id %r is not a plain file name"
                         % (image_id,))
    return pieces.netloc, image_id
