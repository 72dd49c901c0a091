"""``gvfs-proxy``: run a GVFS proxy, or ask a running one for its counters.

    gvfs-proxy --config-file proxy.conf serve
    gvfs-proxy --config-file proxy.conf stats
    gvfs-proxy --config-file proxy.conf flush
    gvfs-proxy --config-file proxy.conf drop
    gvfs-proxy --config-file proxy.conf warm /srv/images/golden.qcow2
"""

import asyncio
import json
import sys

from oslo_config import cfg
from oslo_log import log as logging

from gvfs_openstack import conf as gvfs_conf
from gvfs_openstack import exceptions
from gvfs_openstack.gvfs import control
from gvfs_openstack.gvfs import service

CONF = gvfs_conf.CONF
LOG = logging.getLogger(__name__)


def _serve():
    try:
        proxy = service.ProxyService(CONF)
    except exceptions.InvalidConfig as e:
        LOG.error("%s", e)
        return 2
    asyncio.run(proxy.run())
    return 0


def _control(command, timeout=30.0, **args):
    path = CONF.proxy.control_socket
    if not path:
        print("gvfs-proxy: [proxy] control_socket is not set in the "
              "configuration", file=sys.stderr)
        return 2
    try:
        result = control.request(path, command, timeout, **args)
    except control.ControlError as e:
        print("gvfs-proxy: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0


_ACTIONS = {"serve": _serve,
            "stats": lambda: _control("stats"),
            "flush": lambda: _control("flush", None),
            "drop": lambda: _control("drop", None),
            "warm": lambda: _control("warm", None, path=CONF.action.path,
                                     rate_mib=CONF.action.rate_mib)}


def _add_parsers(subparsers):
    subparsers.add_parser("serve", help="run the proxy until SIGTERM")
    subparsers.add_parser("stats", help="print the running proxy's counters")
    subparsers.add_parser(
        "flush", help="write the running proxy's dirty data upstream and "
                      "wait until it is committed there")
    subparsers.add_parser(
        "drop", help="write back, then empty the running proxy's cache")
    warm = subparsers.add_parser(
        "warm", help="fetch a file into the running proxy's cache")
    warm.add_argument("path", help="absolute path of the file on the DTN "
                                   "export, e.g. /srv/images/golden.qcow2")
    warm.add_argument("--rate-mib", type=int, default=None,
                      help="cap in MiB/s (default: [cache] warm_rate_mib)")


def main(argv=None):
    logging.register_options(CONF)
    CONF.register_cli_opt(cfg.SubCommandOpt(
        "action", title="actions", handler=_add_parsers))
    CONF(sys.argv[1:] if argv is None else argv, project="gvfs-openstack",
         prog="gvfs-proxy")
    logging.setup(CONF, "gvfs-proxy")
    return _ACTIONS[CONF.action.name]()


if __name__ == "__main__":
    sys.exit(main())
