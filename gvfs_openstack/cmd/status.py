# SPDX-License-Identifier: Apache-2.0
"""``gvfs-status upgrade check``: what an operator must fix around an upgrade.

    gvfs-status --config-file /etc/gvfs-openstack/gvfs-conductor.conf \
        upgrade check
    gvfs-status --config-file /etc/gvfs-openstack/gvfs-proxy-server.conf \
        upgrade check

Run before starting the services of a new release and after: like
``nova-status upgrade check``, it reads a service's configuration and
prints one line per check (``--json`` for machines); its exit code is 0
when all pass, 1 with warnings, 2 with a failure.  A file that sets
``[proxy] role`` is a proxy's (on a DTN, controller or compute node):
:mod:`gvfs_openstack.proxy.upgrade_checks`.  Any other is the
conductor's, with its job store:
:mod:`gvfs_openstack.migration.upgrade_checks`.  Each is imported only
then, so a proxy node needs only the ``proxy`` extra.
"""

import sys

from oslo_config import cfg
from oslo_upgradecheck import upgradecheck

from gvfs_openstack import conf as conf_pkg
from gvfs_openstack.conf import opts
from gvfs_openstack import version

PROG = "gvfs-status"
Code = upgradecheck.Code


class Checks(upgradecheck.UpgradeCommands):
    """``checks`` ((name, check of ``conf``), ...) as oslo.upgradecheck's."""

    def __init__(self, conf):
        self.conf = conf
        self.checks = ()

    @property
    def _upgrade_checks(self):
        return [(name, (_run, {"check": check}))
                for name, check in self.checks]


def _run(commands, check):
    return check(commands.conf)


def _proxy_opts(conf):
    for module in opts.modules("proxy") + opts.modules("metrics"):
        module.register_opts(conf)


def _conductor_opts(conf):
    from gvfs_openstack.conf import migration as migration_conf
    migration_conf.register_opts(conf)


def _parsed(argv, register):
    """``(conf, Checks)`` of ``argv``.

    Parsed with the options ``register`` adds and oslo.upgradecheck's
    command line.
    """
    conf = cfg.ConfigOpts()
    register(conf)
    commands = Checks(conf)
    upgradecheck.register_cli_options(conf, commands)
    conf(argv, project=conf_pkg.PROJECT, prog=PROG,
         default_config_files=cfg.find_config_files(
             project=conf_pkg.PROJECT, prog="gvfs-conductor"),
         version=version.string())
    return conf, commands


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # Read as a proxy's first: its options need only the proxy extra.
    try:
        conf, commands = _parsed(argv, _proxy_opts)
        role = conf.proxy.role
    except cfg.Error as e:
        print("gvfs-status: %s" % e, file=sys.stderr)
        return Code.FAILURE
    if role:
        from gvfs_openstack.proxy import upgrade_checks
    else:
        try:
            conf, commands = _parsed(argv, _conductor_opts)
            from gvfs_openstack.conf import migration as migration_conf
            from gvfs_openstack.migration import upgrade_checks
        except ImportError as e:
            print("gvfs-status: %s sets no [proxy] role, so it is read as "
                  "gvfs-conductor's, whose checks need the conductor extra "
                  "(%s)" % (", ".join(conf.config_file) or "no "
                            "configuration file", e), file=sys.stderr)
            return Code.FAILURE
        # Not oslo.upgradecheck's main(): the [site:NAME] groups can only
        # be registered once [conductor] sites is read.
        migration_conf.register_sites(conf)
    commands.checks = upgrade_checks.CHECKS
    # oslo.upgradecheck reads --json from its module's CONF, which its
    # main() would have set.
    upgradecheck.CONF = conf
    return upgradecheck.run(conf)


if __name__ == "__main__":
    sys.exit(main())
