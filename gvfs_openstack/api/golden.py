# SPDX-License-Identifier: Apache-2.0
"""``/v1/golden-images/{id}/references``: why a golden image's delete is
refused, for the users who may see its image.

The target of the check is the image's owner project, as Glance shows
it to the conductor; another project's image the caller may not see is
answered as a missing one.  Compute hosts, and the instances of other
projects, are shown only to those allowed
``gvfs:golden_image:references:host`` (admin), as Nova shows them: the
owner of a public image learns how many disks hold it, not whose.
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
        context = request.context
        try:
            # The image first (Glance only): nobody makes the conductor
            # walk a DTN for an image they may not see.
            [image] = self.conductor.find_images(context, [image_id])
            target = {"project_id": image["owner"]}
            policy.authorize_object(
                self.rules, policies.GOLDEN_REFERENCES, context, target,
                exceptions.ImageNotFound(image=image_id,
                                         site=image.get("site")))
            found = self.conductor.golden_references(context, image["id"])
        except exceptions.ImageNotFound as e:
            raise faults.Fault(404, e.args[0]) from e
        hosts = policy.allowed(self.rules, policies.GOLDEN_REFERENCE_HOSTS,
                               request.context, target)
        references = [dict(ref) for ref in found["references"]]
        if not hosts:
            for ref in references:
                ref.pop("host")
                ref.pop("holder")   # It names the host too.
                if ref.pop("project_id", None) != context.project_id:
                    # Another project's instance, or one whose reference
                    # (made by an earlier release) does not say.
                    ref.update(instance_id=None, disk=None)
        return 200, {"image_id": found["image_id"],
                     "references": references}
