# SPDX-License-Identifier: Apache-2.0
"""``/v1/golden-images/{id}/references``: why a golden image's delete is
refused, for the users who may see its image.

The target of the check is the image's owner project, as Glance shows
it to the conductor.  Compute hosts are shown only to those allowed
``gvfs:golden_image:references:host`` (admin), as Nova shows them.
"""

from gvfs_openstack.api import faults
from gvfs_openstack.api import policies
from gvfs_openstack.api import policy
from gvfs_openstack import exceptions


class GoldenImagesController:
    def __init__(self, conductor, rules):
        self.conductor = conductor
        self.rules = rules

    def references(self, request, image_id):
        try:
            found = self.conductor.golden_references(request.context,
                                                     image_id)
        except exceptions.ImageNotFound as e:
            raise faults.Fault(404, e.args[0]) from e
        target = {"project_id": found["owner"]}
        policy.authorize(self.rules, policies.GOLDEN_REFERENCES,
                         request.context, target)
        hosts = policy.allowed(self.rules, policies.GOLDEN_REFERENCE_HOSTS,
                               request.context, target)
        references = [dict(ref) for ref in found["references"]]
        if not hosts:
            for ref in references:
                ref.pop("host")
                ref.pop("holder")   # It names the host too.
        return 200, {"image_id": found["image_id"],
                     "references": references}
