# SPDX-License-Identifier: Apache-2.0
"""The process that runs one job: ``python -m gvfs_openstack.migration.runner
--config-file ... JOB_ID``.

The conductor starts one per job, as a fresh process rather than a fork of
itself: the conductor has RPC threads, and the pipeline forks its stage
workers, which is only safe from a process with one thread.  It exits 0
when the job is done, 1 when it failed or was cancelled, 2 when there is
no such job, 3 when another runner holds the job.
"""

import signal
import sys

from oslo_config import cfg
from oslo_log import log as logging

from gvfs_openstack.conf import migration as migration_conf
from gvfs_openstack import exceptions
from gvfs_openstack.migration import jobs
from gvfs_openstack.migration import pipeline
from gvfs_openstack.migration import states

LOG = logging.getLogger(__name__)


def _exit_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None):
    conf = cfg.ConfigOpts()
    logging.register_options(conf)
    conf.register_cli_opt(cfg.StrOpt("job_id", positional=True,
                                     help="The job to run or resume."))
    migration_conf.load(conf, sys.argv[1:] if argv is None else argv,
                        "gvfs-migration-runner")
    logging.setup(conf, "gvfs-migration-runner")
    # SIGTERM unwinds: the lease is released and the workers stopped.
    signal.signal(signal.SIGTERM, _exit_on_signal)
    try:
        state = pipeline.run(conf, jobs.store_url(conf), conf.job_id)
    except exceptions.JobBusy as e:
        LOG.info("%s", e)
        return 3
    except exceptions.JobNotFound as e:
        LOG.error("%s", e)
        return 2
    LOG.info("job %s: %s", conf.job_id, state)
    return 0 if state == states.DONE else 1


if __name__ == "__main__":
    sys.exit(main())
