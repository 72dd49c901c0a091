# SPDX-License-Identifier: Apache-2.0
"""``gvfs-proxy``: run a GVFS proxy, or ask a running one for its counters.

    gvfs-proxy --config-file proxy.conf serve
    gvfs-proxy --config-file proxy.conf stats
    gvfs-proxy --config-file proxy.conf flush
    gvfs-proxy --config-file proxy.conf drop
    gvfs-proxy --config-file proxy.conf warm /srv/images/golden.qcow2
    gvfs-proxy --config-file proxy.conf mount [--export /srv/images] /mnt/x
    gvfs-proxy --config-file proxy.conf tune-mount /mnt/x   (as root)
"""

import asyncio
import json
import os
import sys
import time

from oslo_config import cfg
from oslo_log import log as logging

from gvfs_openstack import conf as conf_pkg
from gvfs_openstack.conf import opts
from gvfs_openstack import exceptions
from gvfs_openstack import heap
from gvfs_openstack import metrics_access
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs.errors import RpcError
from gvfs_openstack.proxy import control
from gvfs_openstack import sd_notify
from gvfs_openstack import version

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def _serve():
    # Imported here: the proxy (paramiko, the cache, the tunnels) took a
    # third of a second to import at every start of a mount, which a
    # compute node's first clone waits for.
    from gvfs_openstack.proxy import service
    from gvfs_openstack.proxy import workers

    worker = workers.this_worker()
    try:
        if worker is None:
            count = workers.count(CONF)
            if count > 1:
                asyncio.run(workers.Supervisor(CONF, count).run(
                    ready=_listening))
                return 0
        proxy = service.ProxyService(CONF, worker=worker)
    except exceptions.InvalidConfig as e:
        LOG.error("%s", e)
        return 2
    # A worker of a supervisor is not what systemd started.
    asyncio.run(proxy.run(ready=_listening if worker is None else None))
    return 0


def _listening(port):
    """Tell systemd the proxy serves (``Type=notify``), if it started us."""
    sd_notify.ready("listening on port %d" % port)


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


def _hangup():
    """SIGHUP of a mount: the configuration re-read, the log re-opened.

    oslo.config applies the mutable options (``debug``); a log file that
    logrotate moved away is closed and opened again at its path, so
    that the next line starts the new file.
    """
    LOG.info("SIGHUP: re-reading the configuration, re-opening the log")
    try:
        CONF.mutate_config_files()
    except (cfg.Error, ValueError) as e:
        LOG.error("SIGHUP: %s; the running configuration stays", e)
    reopen_log_files()


def reopen_log_files():
    """Close every file the root logger writes; the next line reopens it.

    oslo.log writes a log file with the standard library's file
    handlers, which open their stream again at the next record when it
    has none (they are not closed for good).
    """
    for handler in logging.getLogger().logger.handlers:
        if getattr(handler, "baseFilename", None) is None:
            continue
        with handler.lock:
            if handler.stream is not None:
                handler.stream.close()
                handler.stream = None


def _mount():
    # Imported here: pyfuse3 (the ``fuse`` extra) is needed only to mount.
    from gvfs_openstack.fuse import fusefs
    from gvfs_openstack.fuse import presentation
    from gvfs_openstack.fuse import session
    from gvfs_openstack.mount import mounter

    mount = CONF.mount
    export = CONF.action.export or mount.export
    host = mount.proxy_host or CONF.listen.host
    port = mount.proxy_port or CONF.listen.port
    problem = None
    if CONF.action.proxy_address:
        try:
            host, port = mounter.parse_address(CONF.action.proxy_address)
        except ValueError as e:
            problem = "--proxy: %s" % e
    if not export:
        problem = "no export: set [mount] export or give --export"
    elif not port and not problem:
        problem = "no proxy port: set [mount] proxy_port or [listen] " \
            "port, or give --proxy"
    if not problem and mount.metrics_port and \
            mount.metrics_port == CONF.metrics.port:
        problem = "[mount] metrics_port %d is the proxy's [metrics] " \
            "port: give the mount a port of its own" % mount.metrics_port
    if not problem:
        try:
            shown_as = presentation.for_group(mount.group, mount.identity)
        except presentation.PresentationError as e:
            problem = str(e)
    if problem:
        print("gvfs-proxy mount: " + problem, file=sys.stderr)
        return 2
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    nfs = session.ProxySession(
        host, port, export,
        io_timeout=CONF.action.io_timeout or mount.io_timeout,
        rsize=mount.rsize, wsize=mount.wsize, window=mount.write_window)
    try:
        asyncio.run(fusefs.serve(
            nfs, CONF.action.mountpoint, fusefs.MountOptions.from_conf(
                mount, trim_when_idle=CONF.proxy.heap_retain_mb > 0,
                shown_as=shown_as),
            metrics_address=None if mount.metrics_port is None
            else (CONF.metrics.host, mount.metrics_port,
                  metrics_access.read_token(CONF.metrics.token_file)),
            on_hangup=_hangup,
            on_ready=lambda: sd_notify.ready("mounted")))
    except (OSError, RuntimeError, NfsError, RpcError) as e:
        LOG.error("cannot mount %s at %s: %s", nfs.where,
                  CONF.action.mountpoint, e)
        return 1
    return 0


def _tune_mount():
    """Tune a mount made by an unprivileged user, as root.

    Sets [mount] max_background and read_ahead_kb.  Waits for the mount to
    appear: systemd runs this right after starting the mount process.
    """
    from gvfs_openstack.mount import fusectl

    requests = CONF.mount.max_background
    read_ahead = CONF.mount.read_ahead_kb
    if not requests and not read_ahead:
        return 0
    deadline = time.monotonic() + CONF.action.wait
    while True:
        try:
            connection = None
            if requests:
                connection = fusectl.tune(CONF.action.mountpoint, requests)
            if read_ahead:
                # Returns once the daemon has answered the kernel's INIT,
                # which would undo a read-ahead set before it.
                os.stat(CONF.action.mountpoint)
                fusectl.tune_read_ahead(CONF.action.mountpoint, read_ahead)
        except fusectl.NotMounted:
            if time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            print("gvfs-proxy tune-mount: nothing is mounted at %s"
                  % CONF.action.mountpoint, file=sys.stderr)
            return 1
        except fusectl.FusectlError as e:
            print("gvfs-proxy tune-mount: %s" % e, file=sys.stderr)
            return 1
        if requests:
            print("%s: up to %d requests in flight (fusectl connection %s)"
                  % (CONF.action.mountpoint, requests, connection))
        if read_ahead:
            print("%s: %d KiB read-ahead" % (CONF.action.mountpoint,
                                             read_ahead))
        return 0


_ACTIONS = {"serve": _serve,
            "stats": lambda: _control("stats"),
            "flush": lambda: _control("flush", None),
            "drop": lambda: _control("drop", None),
            "warm": lambda: _control("warm", None, path=CONF.action.path,
                                     rate_mib=CONF.action.rate_mib),
            "mount": _mount,
            "tune-mount": _tune_mount}
#: The actions that relay records for as long as they run.
_RELAYING = ("serve", "mount")


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
    mount = subparsers.add_parser(
        "mount", help="serve an export of the DTN at a local directory "
                      "through FUSE, in the foreground, until SIGTERM")
    mount.add_argument("mountpoint", help="an existing empty directory")
    mount.add_argument("--export", default=None,
                       help="path of the export on the DTN (default: "
                            "[mount] export)")
    mount.add_argument("--proxy", dest="proxy_address", default=None,
                       metavar="HOST:PORT",
                       help="the client proxy (default: [mount] "
                            "proxy_host/proxy_port, else [listen])")
    mount.add_argument("--io-timeout", type=float, default=None,
                       help="seconds (default: [mount] io_timeout)")
    tune = subparsers.add_parser(
        "tune-mount", help="as root: let the kernel keep [mount] "
                           "max_background requests in flight to a "
                           "mount made by an unprivileged user")
    tune.add_argument("mountpoint", help="the mounted directory")
    tune.add_argument("--wait", type=float, default=30.0,
                      help="seconds to wait for the mount to appear "
                           "(default: 30)")


def register_opts(conf):
    """The groups ``gvfs-proxy`` reads: roles, cache, mount, metrics."""
    for module in opts.modules("proxy") + opts.modules("metrics"):
        module.register_opts(conf)


def _parse(argv):
    """Parse ``argv`` (and the files it names, or the project's) into CONF."""
    register_opts(CONF)
    logging.register_options(CONF)
    CONF.register_cli_opt(cfg.SubCommandOpt(
        "action", title="actions", handler=_add_parsers))
    CONF(argv, project=conf_pkg.PROJECT, prog="gvfs-proxy",
         version=version.string())
    return CONF


def main(argv=None):
    _parse(sys.argv[1:] if argv is None else argv)
    logging.setup(CONF, "gvfs-proxy")
    if CONF.action.name in _RELAYING:
        heap.retain_freed(CONF.proxy.heap_retain_mb * 1024 * 1024)
    return _ACTIONS[CONF.action.name]()


if __name__ == "__main__":
    sys.exit(main())
