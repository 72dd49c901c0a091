# SPDX-License-Identifier: Apache-2.0
"""``gvfs-status upgrade check``: what an operator must fix around an upgrade.

    gvfs-status --config-file /etc/gvfs-openstack/gvfs-conductor.conf \
        upgrade check

Run before starting the conductors of a new release and after: like
``nova-status upgrade check``, it reads the conductor's configuration and
job store and prints one line per check (``--json`` for machines); its
exit code is 0 when all pass, 1 with warnings, 2 with a failure.

Checks:

* the job store is at the schema revision this release needs
  (``gvfs-manage db sync``);
* no deprecated option is still set (``[conductor] job_store``);
* the conductor starts migrations only with the requester's trust
  (``[conductor] require_trust``, see the security guide);
* no site's DTN is reached over NFS as root (``[site:NAME] nfs_uid``).
"""

import sys

from oslo_config import cfg
from oslo_db import exception as db_exception
from oslo_upgradecheck import upgradecheck
import sqlalchemy as sa

from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration.db import schema
from gvfs_openstack.migration import jobs

PROG = "gvfs-status"
Code = upgradecheck.Code
Result = upgradecheck.Result


class Checks(upgradecheck.UpgradeCommands):
    """The checks, on the conductor's configuration ``conf``."""

    def __init__(self, conf):
        self.conf = conf

    def _job_store(self):
        engine = None
        try:
            engine = jobs.create_engine(jobs.store_url(self.conf),
                                        **jobs.engine_options(self.conf))
            with engine.connect() as connection:
                revision = schema.current(connection)
                empty = schema.is_empty(connection)
        except (exceptions.GvfsError, db_exception.DBError,
                sa.exc.DBAPIError) as e:
            return Result(Code.FAILURE, "Cannot read the job store: %s"
                          % jobs.store_error_reason(e))
        finally:
            if engine is not None:
                engine.dispose()
        head = schema.head()
        if revision == head:
            return Result(Code.SUCCESS, "The job store is at revision %s."
                          % head)
        if revision is not None and not schema.known(revision):
            return Result(Code.FAILURE, (
                "The job store is at revision %s, which this release does "
                "not know: a newer release upgraded it." % revision))
        return Result(Code.FAILURE, (
            "The job store is at revision %s; this release needs %s. Run "
            "gvfs-manage db sync with the conductors stopped." % (
                "none (empty)" if empty else revision or "none", head)))

    def _deprecated_options(self):
        if self.conf.conductor.job_store:
            return Result(Code.WARNING, (
                "[conductor] job_store is deprecated and will be removed: "
                "name the job store in [database] connection instead."))
        return Result(Code.SUCCESS)

    def _trusts(self):
        if not self.conf.conductor.require_trust:
            return Result(Code.WARNING, (
                "[conductor] require_trust is off: whoever can use the "
                "message bus can start migrations of any project's images "
                "with the conductor's credentials."))
        return Result(Code.SUCCESS)

    def _dtn_identity(self):
        as_root = [name for name in self.conf.conductor.sites
                   if self.conf[migration_conf.SITE_GROUP % name].nfs_uid
                   == 0]
        if as_root:
            return Result(Code.WARNING, (
                "[site:%s] nfs_uid = 0: the conductor reaches that DTN's "
                "NFS server as root. Unset it (the owner of "
                "dtn_images_dir) or name the file account."
                % ",".join(as_root)))
        return Result(Code.SUCCESS)

    _upgrade_checks = (
        ("Job store schema", _job_store),
        ("Deprecated options", _deprecated_options),
        ("Trusts", _trusts),
        ("DTN identity", _dtn_identity),
    )


def main(argv=None):
    conf = cfg.ConfigOpts()
    migration_conf.register_opts(conf)
    checks = Checks(conf)
    upgradecheck.register_cli_options(conf, checks)
    conf(sys.argv[1:] if argv is None else argv, project="gvfs", prog=PROG,
         default_config_files=cfg.find_config_files(
             project="gvfs", prog="gvfs-conductor"))
    # Not oslo.upgradecheck's main(): the [site:NAME] groups can only be
    # registered once [conductor] sites is read.  Its --json is read from
    # its module's CONF, which its main() would have set.
    migration_conf.register_sites(conf)
    upgradecheck.CONF = conf
    return upgradecheck.run(conf)


if __name__ == "__main__":
    sys.exit(main())
