# SPDX-License-Identifier: Apache-2.0
"""``gvfs-manage``: the operator's commands on the conductor's job store.

    gvfs-manage --config-file /etc/gvfs-openstack/gvfs-conductor.conf db sync
    gvfs-manage --config-file ... db version

``db sync`` upgrades the store of ``[database] connection`` to the schema
revision this release needs; run it once after installing a release,
with the conductors stopped, before starting them.  ``db version`` prints
the store's revision and the newest.  Without ``--config-file`` it reads
the files ``gvfs-conductor`` reads by default.
"""

import datetime
import sys

from oslo_config import cfg
from oslo_db import exception as db_exception
from oslo_log import log as logging
import sqlalchemy as sa

from gvfs_openstack import conf as conf_pkg
from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration.db import engine as store_engine
from gvfs_openstack.migration.db import schema
from gvfs_openstack.migration.db import sync
from gvfs_openstack.migration import jobs
from gvfs_openstack import version

PROG = "gvfs-manage"


def _db_sync(engine, args):
    before, after = sync.sync(engine)
    if before == after:
        print("The job store is at revision %s already." % after)
    else:
        print("The job store is at revision %s (was %s)."
              % (after, before or "unversioned"))


def _db_version(engine, args):
    with engine.connect() as connection:
        revision = schema.current(connection)
        if revision is None:
            revision = ("none (empty)" if schema.is_empty(connection)
                        else "none (made before versioned schemas)")
    print("job store revision: %s" % revision)
    print("newest revision: %s" % schema.head())


def _db_purge(engine, args):
    try:
        before = datetime.datetime.fromisoformat(args.before)
    except ValueError as e:
        raise exceptions.InvalidConfig(
            option="--before", reason="%s: give a date or a time, e.g. "
            "2026-06-30 or 2026-06-30T12:00" % e) from e
    if before.tzinfo is not None:
        before = before.astimezone(datetime.timezone.utc).replace(
            tzinfo=None)
    with engine.connect() as connection:
        schema.check(connection)
    counted = jobs.purge(engine, before, dry_run=args.dry_run)
    print("%s %d finished jobs last changed before %s UTC, with %d images "
          "and %d stage runs." % (
              "Would purge" if args.dry_run else "Purged", counted["jobs"],
              before.isoformat(sep=" "), counted["images"],
              counted["stage_runs"]))


def _add_commands(subparsers):
    db = subparsers.add_parser(
        "db", help="The job store of [database] connection.")
    actions = db.add_subparsers(title="actions", dest="action")
    actions.required = True
    actions.add_parser(
        "sync", help="Upgrade the job store to the newest schema revision "
                     "(or make it, if the database is empty).").set_defaults(
        action_fn=_db_sync)
    actions.add_parser(
        "version", help="Print the job store's schema revision and the "
                        "newest.").set_defaults(action_fn=_db_version)
    purge = actions.add_parser(
        "purge", help="Delete finished jobs (done, failed, cancelled) last "
                      "changed before a date, with their images and stage "
                      "runs; jobs not finished are never touched.")
    purge.add_argument("--before", required=True,
                       help="A date or time, in UTC unless it says: "
                            "2026-06-30 or 2026-06-30T12:00+02:00.")
    purge.add_argument("--dry-run", action="store_true",
                       help="Count what would go; delete nothing.")
    purge.set_defaults(action_fn=_db_purge)


COMMAND_OPT = cfg.SubCommandOpt(
    "category", title="Commands", handler=_add_commands,
    help="What to manage.")


def _parse(argv):
    conf = cfg.ConfigOpts()
    logging.register_options(conf)
    # The log on stderr, the answers on stdout (and the log in the
    # conductor's log_file too, if it has one).
    conf.set_default("use_stderr", True)
    migration_conf.register_opts(conf)
    conf.register_cli_opt(COMMAND_OPT)
    conf(argv, project=conf_pkg.PROJECT, prog=PROG,
         default_config_files=cfg.find_config_files(
             project=conf_pkg.PROJECT, prog="gvfs-conductor"),
         version=version.string())
    return conf


def main(argv=None):
    conf = _parse(sys.argv[1:] if argv is None else argv)
    logging.setup(conf, PROG)
    engine = None
    try:
        engine = store_engine.create_engine(jobs.store_url(conf),
                                            **jobs.engine_options(conf))
        conf.category.action_fn(engine, conf.category)
    except exceptions.GvfsError as e:
        print("%s: %s" % (PROG, e), file=sys.stderr)
        return 1
    except (db_exception.DBError, sa.exc.DBAPIError) as e:
        print("%s: cannot use the job store: %s"
              % (PROG, jobs.store_error_reason(e)), file=sys.stderr)
        return 1
    finally:
        if engine is not None:
            engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
