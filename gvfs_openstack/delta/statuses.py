# SPDX-License-Identifier: Apache-2.0
"""``gvfs-meta``'s exit statuses that its callers act on.

The conductor runs ``gvfs-meta`` on a DTN over SSH and reads only its
exit status and its JSON; both sides take the numbers from here, so a
library never imports the program (``cmd``) to learn them.
"""

#: ``delta``: ``--base`` has no block signature made since it last
#: changed; the caller hands over the other DTN's.
BASE_UNKNOWN = 4

#: ``patch``: the delta does not make the image it promised.
REJECTED = 3
