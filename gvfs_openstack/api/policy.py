# SPDX-License-Identifier: Apache-2.0
"""Policy checks of gvfs-api: the enforcer and one ``authorize`` call.

A refusal is logged with who asked for what, so an operator can see the
attempts, and answered 403 with the rule's name.
"""

from oslo_config import cfg
from oslo_log import log as logging
from oslo_policy import policy

from gvfs_openstack.api import faults
from gvfs_openstack.api import policies

LOG = logging.getLogger(__name__)


def enforcer(conf):
    """The enforcer of ``conf`` with the rules in code registered."""
    rules = policy.Enforcer(conf)
    rules.register_defaults(policies.list_rules())
    return rules


def get_enforcer():
    """The ``oslo.policy.enforcer`` entry point.

    With it ``oslopolicy-policy-generator`` and ``oslopolicy-checker``
    see the rules an operator's ``policy.yaml`` changes.
    """
    conf = cfg.ConfigOpts()
    conf([], project="gvfs")
    return enforcer(conf)


def allowed(rules, rule, context, target):
    """Whether ``context`` may do ``rule`` on ``target`` (no refusal)."""
    try:
        return bool(rules.authorize(rule, target,
                                    context.to_policy_values()))
    except policy.InvalidScope:
        return False


def authorize(rules, rule, context, target):
    """Raise 403 unless ``context`` may do ``rule`` on ``target``."""
    if not allowed(rules, rule, context, target):
        LOG.warning("refused %s to user %s of project %s (roles %s) on "
                    "%s", rule, context.user_id, context.project_id,
                    ",".join(context.roles), target)
        raise faults.Fault(403, "Policy does not allow %s on project %s"
                           % (rule, target.get("project_id")))
