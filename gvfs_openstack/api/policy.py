# SPDX-License-Identifier: Apache-2.0
"""Policy checks of gvfs-api: the enforcer and one ``authorize`` call.

A refusal is logged with who asked for what, so an operator can see the
attempts.  It is answered 403 with the rule's name, and names no
project; a refusal on an object of another project is answered as if
the object did not exist (:func:`authorize_object`), as Nova and Glance
do, so that nobody learns what exists in other projects, or whose it is.
"""

from oslo_config import cfg
from oslo_log import log as logging
from oslo_policy import policy

from gvfs_openstack.api import faults
from gvfs_openstack.api import policies
from gvfs_openstack import conf as conf_pkg

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
    conf([], project=conf_pkg.PROJECT)
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
        _refused(rule, context, target)
        raise faults.Fault(403, "Policy does not allow %s" % rule)


def authorize_object(rules, rule, context, target, not_found):
    """:func:`authorize` of an object: raise ``not_found`` for others'.

    ``not_found`` is the exception a missing object of that kind gets:
    an object of another project that the caller may not act on is
    answered exactly so.  One of the caller's own project gets the 403.
    """
    if allowed(rules, rule, context, target):
        return
    _refused(rule, context, target)
    if target.get("project_id") != context.project_id:
        raise not_found
    raise faults.Fault(403, "Policy does not allow %s" % rule)


def _refused(rule, context, target):
    LOG.warning("refused %s to user %s of project %s (roles %s) on %s",
                rule, context.user_id, context.project_id,
                ",".join(context.roles), target)
