# SPDX-License-Identifier: Apache-2.0
"""gvfs-api's policy in code, with the secure-RBAC defaults.

A project's ``reader`` sees its project's migrations and the sites; its
``member`` migrates and cancels its project's images; ``admin`` may do
all of it for every project.  Every rule's target carries the
``project_id`` the request concerns: the owner of the images to migrate,
or the project of the job.  Keystone's implied roles (``admin`` implies
``member`` implies ``reader``) make the checks inclusive.

``oslopolicy-sample-generator --namespace gvfs_openstack`` writes the
sample; an operator's ``policy.yaml`` overrides any rule.
"""

from oslo_policy import policy

ADMIN = "role:admin"
PROJECT_MEMBER = "role:member and project_id:%(project_id)s"
PROJECT_READER = "role:reader and project_id:%(project_id)s"
ADMIN_OR_MEMBER = "rule:admin or (%s)" % PROJECT_MEMBER
ADMIN_OR_READER = "rule:admin or (%s)" % PROJECT_READER

MIGRATION_CREATE = "gvfs:migration:create"
MIGRATION_LIST = "gvfs:migration:list"
MIGRATION_LIST_ALL = "gvfs:migration:list:all_projects"
MIGRATION_SHOW = "gvfs:migration:show"
MIGRATION_CANCEL = "gvfs:migration:cancel"
GOLDEN_REFERENCES = "gvfs:golden_image:references"
GOLDEN_REFERENCE_HOSTS = "gvfs:golden_image:references:host"
REPLICATION_CREATE = "gvfs:replication:create"
REPLICATION_LIST = "gvfs:replication:list"
REPLICATION_LIST_ALL = "gvfs:replication:list:all_projects"
REPLICATION_SHOW = "gvfs:replication:show"
REPLICATION_UPDATE = "gvfs:replication:update"
REPLICATION_DELETE = "gvfs:replication:delete"
SITE_LIST = "gvfs:site:list"
SITE_SHOW = "gvfs:site:show"

_BASE = [
    policy.RuleDefault("admin", ADMIN,
                       description="Acts for every project."),
]

_MIGRATIONS = [
    policy.DocumentedRuleDefault(
        name=MIGRATION_CREATE, check_str=ADMIN_OR_MEMBER,
        scope_types=["project"],
        description="Migrate images to another site. Checked once per "
                    "image, with the image's owner as the target project: "
                    "a member migrates its own project's images.",
        operations=[{"path": "/v1/migrations", "method": "POST"}]),
    policy.DocumentedRuleDefault(
        name=MIGRATION_LIST, check_str=ADMIN_OR_READER,
        scope_types=["project"],
        description="List the migrations of the caller's project.",
        operations=[{"path": "/v1/migrations", "method": "GET"}]),
    policy.DocumentedRuleDefault(
        name=MIGRATION_LIST_ALL, check_str=ADMIN,
        scope_types=["project"],
        description="List the migrations of every project, or of the "
                    "one named by ``project_id`` in the query.",
        operations=[{"path": "/v1/migrations?all_projects=1",
                     "method": "GET"}]),
    policy.DocumentedRuleDefault(
        name=MIGRATION_SHOW, check_str=ADMIN_OR_READER,
        scope_types=["project"],
        description="Show a migration of the caller's project.",
        operations=[{"path": "/v1/migrations/{migration_id}",
                     "method": "GET"}]),
    policy.DocumentedRuleDefault(
        name=MIGRATION_CANCEL, check_str=ADMIN_OR_MEMBER,
        scope_types=["project"],
        description="Cancel a migration of the caller's project.",
        operations=[{"path": "/v1/migrations/{migration_id}/cancel",
                     "method": "POST"}]),
]

_GOLDEN = [
    policy.DocumentedRuleDefault(
        name=GOLDEN_REFERENCES, check_str=ADMIN_OR_READER,
        scope_types=["project"],
        description="List the instance disks that hold a golden image "
                    "(why its delete is refused); the image's owner "
                    "project is the target.",
        operations=[{"path": "/v1/golden-images/{image_id}/references",
                     "method": "GET"}]),
    policy.DocumentedRuleDefault(
        name=GOLDEN_REFERENCE_HOSTS, check_str=ADMIN,
        scope_types=["project"],
        description="See the compute host of each reference (hidden "
                    "from others, as Nova hides hosts).",
        operations=[{"path": "/v1/golden-images/{image_id}/references",
                     "method": "GET"}]),
]

_REPLICATIONS = [
    policy.DocumentedRuleDefault(
        name=REPLICATION_CREATE, check_str=ADMIN_OR_MEMBER,
        scope_types=["project"],
        description="Make a replication policy: the caller's project's "
                    "images it selects keep themselves copied to a site.",
        operations=[{"path": "/v1/replications", "method": "POST"}]),
    policy.DocumentedRuleDefault(
        name=REPLICATION_LIST, check_str=ADMIN_OR_READER,
        scope_types=["project"],
        description="List the replication policies of the caller's "
                    "project.",
        operations=[{"path": "/v1/replications", "method": "GET"}]),
    policy.DocumentedRuleDefault(
        name=REPLICATION_LIST_ALL, check_str=ADMIN,
        scope_types=["project"],
        description="List the replication policies of every project.",
        operations=[{"path": "/v1/replications?all_projects=1",
                     "method": "GET"}]),
    policy.DocumentedRuleDefault(
        name=REPLICATION_SHOW, check_str=ADMIN_OR_READER,
        scope_types=["project"],
        description="Show a replication policy of the caller's project, "
                    "its images and its recovery point.",
        operations=[{"path": "/v1/replications/{replication_id}",
                     "method": "GET"}]),
    policy.DocumentedRuleDefault(
        name=REPLICATION_UPDATE, check_str=ADMIN_OR_MEMBER,
        scope_types=["project"],
        description="Pause or resume a replication policy of the "
                    "caller's project.",
        operations=[{"path": "/v1/replications/{replication_id}/pause",
                     "method": "POST"},
                    {"path": "/v1/replications/{replication_id}/resume",
                     "method": "POST"}]),
    policy.DocumentedRuleDefault(
        name=REPLICATION_DELETE, check_str=ADMIN_OR_MEMBER,
        scope_types=["project"],
        description="Delete a replication policy of the caller's project "
                    "(the copies it made stay).",
        operations=[{"path": "/v1/replications/{replication_id}",
                     "method": "DELETE"}]),
]

_SITES = [
    policy.DocumentedRuleDefault(
        name=SITE_LIST, check_str=ADMIN_OR_READER,
        scope_types=["project"],
        description="List the sites images can be migrated to.",
        operations=[{"path": "/v1/sites", "method": "GET"}]),
    policy.DocumentedRuleDefault(
        name=SITE_SHOW, check_str=ADMIN_OR_READER,
        scope_types=["project"],
        description="Show a site.",
        operations=[{"path": "/v1/sites/{site}", "method": "GET"}]),
]


def list_rules():
    """Every rule, for the enforcer and ``oslo.policy.policies``."""
    return _BASE + _MIGRATIONS + _REPLICATIONS + _GOLDEN + _SITES
