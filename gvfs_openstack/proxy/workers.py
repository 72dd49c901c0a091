# SPDX-License-Identifier: Apache-2.0
"""``[proxy] workers``: a server proxy on several cores.

One asyncio process is one core: on a DTN that serves many LAN caches,
the server proxy's CPU (RPC framing, identity mapping, the export guard,
zstd of the bulk channel) is where a boot storm queues.  So the
supervisor, the process ``gvfs-proxy serve`` starts, binds the NFS port
once, starts the workers, and hands each connection it accepts to the
worker with the fewest open connections, over a Unix socket pair
(``SCM_RIGHTS``).  Each worker is a whole server proxy with the
connection's file descriptor as if it had accepted it (peer checks, TLS,
limits are its own).

Why the supervisor chooses rather than ``SO_REUSEPORT``: the kernel
spreads connections by a hash of their addresses, and a DTN serves a
few long-lived tunnel connections per LAN cache; eight connections
hashed onto two workers come out 5:3 or worse more often than 4:4.
Counting open connections balances them exactly.

Shared by nothing: each worker has its own upstream connections to the
NFS server, its own export guard (it learns the handles it hands out),
its own duplicate-request cache, and its own bulk channel sessions, all
bound to the connections it serves.  The one thing lost is the
duplicate-request cache across connections: a client that retransmits
a non-idempotent call on a new connection may reach another worker,
which does it again, as a server restart would.

The supervisor's control socket answers ``stats`` with every worker's
counters added up (:func:`merged`) and a ``workers`` list of what each
served; its Prometheus endpoint serves that sum.  SIGHUP is passed to
the workers (each reloads); SIGTERM stops them, then the supervisor; a
worker that dies is started again.
"""

import asyncio
import os
import signal
import socket
import sys
import time

from oslo_log import log as logging

from gvfs_openstack import exceptions
from gvfs_openstack import metrics_access
from gvfs_openstack.proxy import control
from gvfs_openstack.proxy import listener
from gvfs_openstack.proxy import metrics

LOG = logging.getLogger(__name__)

#: The environment variable that makes ``gvfs-proxy serve`` a worker:
#: ``<index>:<file descriptor of its socket pair end>:<workers>``.
WORKER_ENV = "GVFS_PROXY_WORKER"
#: More would share the cores with nothing gained.
MAX_WORKERS = 64
#: Most workers ``workers = 0`` starts: past some eight the NFS server
#: next door (its own threads, the disks) wants the cores more.
AUTO_WORKERS = 8
#: Snapshot fields that are not added up across workers.
_HIGHEST = {"max_inflight_seen"}
_LOWEST = {"started_at"}
_SAME = {"port"}
#: Seconds between the supervisor's reads of its workers' counters for
#: its Prometheus endpoint.
METRICS_EVERY = 1.0


def count(conf):
    """How many workers ``conf`` asks for.

    ``0`` (the default): one per core for a server proxy, at most
    :data:`AUTO_WORKERS`; one for a client proxy.
    """
    wanted = conf.proxy.workers
    if wanted == 0:
        if conf.proxy.role != "server":
            return 1
        wanted = min(os.cpu_count() or 1, AUTO_WORKERS)
    if wanted > 1 and conf.proxy.role != "server":
        raise exceptions.InvalidConfig(
            option="[proxy] workers",
            reason="more than one is for the server role: a client "
                   "proxy's cache and write-back belong to one process")
    return wanted


def worker_socket(control_socket, index):
    """Worker ``index``'s control socket, beside the supervisor's."""
    return "%s.%d" % (control_socket, index)


def merged(snapshots):
    """The workers' ``gvfs-proxy stats`` added up into one.

    Numbers add (counters, byte gauges, memory), but the highest
    ``max_inflight_seen`` and the earliest ``started_at``; dicts add key
    by key (calls, per-export counters, histograms); lists of numbers
    element by element (a histogram's buckets); anything else is the
    first worker's (role, upstream), as is the port they all serve.
    """
    total = {}
    for snapshot in snapshots:
        for key, value in snapshot.items():
            if key not in total:
                total[key] = _copy(value)
            elif key in _HIGHEST:
                total[key] = max(total[key], value)
            elif key in _LOWEST:
                total[key] = min(total[key], value)
            elif key in _SAME:
                continue
            else:
                total[key] = _add(total[key], value)
    return total


def counted(snapshot):
    """What of a worker's snapshot keeps counting after the worker is gone.

    Its counters (bytes, calls, per-export counts, histograms), without
    its gauges (cache size, dirty bytes, memory) and the fields that are
    not added up: what the supervisor carries forward from a worker that
    exited, so that the sum it exports never falls.
    """
    kept = {}
    for key, value in snapshot.items():
        if key in metrics.GAUGES or key in _HIGHEST | _LOWEST | _SAME:
            continue
        if key == "cache_exports" and isinstance(value, dict):
            kept[key] = {export: {field: count
                                  for field, count in fields.items()
                                  if field != metrics.EXPORT_GAUGE}
                         for export, fields in value.items()}
        elif isinstance(value, dict) or _number(value) or (
                isinstance(value, list) and all(map(_number, value))):
            kept[key] = _copy(value)
    return kept


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _copy(value):
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return list(value)
    return value


def _add(into, value):
    if isinstance(into, bool) or isinstance(value, bool):
        return into
    if isinstance(into, (int, float)) and isinstance(value, (int, float)):
        return into + value
    if isinstance(into, dict) and isinstance(value, dict):
        for key, more in value.items():
            into[key] = _copy(more) if key not in into \
                else _add(into[key], more)
        return into
    if isinstance(into, list) and isinstance(value, list) and \
            len(into) == len(value) and all(
                isinstance(v, (int, float)) for v in into + value):
        return [a + b for a, b in zip(into, value)]
    return into


class _Worker:
    """One worker process and the supervisor's end of its socket pair."""

    def __init__(self, index):
        self.index = index
        self.process = None
        self.channel = None
        self.connections = 0
        self.started = 0.0


class Supervisor:
    """Accepts connections and deals them to ``workers`` processes."""

    def __init__(self, conf, workers, argv=None):
        self.conf = conf
        self.workers = [_Worker(i) for i in range(workers)]
        #: How a worker is started: this program again, as it was run
        #: (``gvfs-proxy --config-file ... serve``, or ``python -m``).
        self.argv = argv or [sys.executable] + sys.orig_argv[1:]
        self._sock = None
        #: The port bound (the configured one, or the one picked for 0).
        self.port = None
        self._stopping = None
        self._control = None
        self._metrics = None
        self._snapshot = {}
        #: Each worker's last answer to ``stats``, by index: a worker
        #: slow to answer one scrape counts as it last did, so the sum
        #: does not fall (Prometheus would read a fall as a reset).
        self._last = {}
        #: The counters of workers that exited (:func:`counted`), added
        #: to the live workers' so that a restart is no reset either.
        self._retired = {}
        self._tasks = set()

    # --- starting and keeping workers ------------------------------------

    async def _start_worker(self, worker):
        # Messages, not a stream: one file descriptor per message.
        ours, theirs = socket.socketpair(socket.AF_UNIX,
                                         socket.SOCK_SEQPACKET)
        env = dict(os.environ)
        env[WORKER_ENV] = "%d:%d:%d" % (worker.index, theirs.fileno(),
                                        len(self.workers))
        try:
            worker.process = await asyncio.create_subprocess_exec(
                *self.argv, env=env, pass_fds=(theirs.fileno(),))
        finally:
            theirs.close()
        ours.setblocking(False)
        worker.channel = ours
        worker.connections = 0
        worker.started = time.monotonic()
        loop = asyncio.get_running_loop()
        loop.add_reader(ours, self._closed_on, worker)
        self._spawn(self._watch(worker, worker.process))
        LOG.info("worker %d started (pid %d)", worker.index,
                 worker.process.pid)

    def _spawn(self, coroutine):
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _watch(self, worker, process):
        status = await process.wait()
        if self._stopping.is_set() or worker.process is not process:
            return
        LOG.error("worker %d (pid %d) exited with status %s; starting it "
                  "again", worker.index, process.pid, status)
        self._retire(worker)
        self._drop_channel(worker)
        # A worker that dies at once (a bad file, a port it cannot use)
        # is not restarted in a tight loop.
        await asyncio.sleep(max(
            0.0, 1.0 - (time.monotonic() - worker.started)))
        if not self._stopping.is_set():
            await self._start_worker(worker)

    def _retire(self, worker):
        """Carry an exited worker's counters into the sum from now on."""
        last = self._last.pop(worker.index, None)
        if last is not None:
            self._retired = merged([self._retired, counted(last)])

    def _drop_channel(self, worker):
        if worker.channel is not None:
            asyncio.get_running_loop().remove_reader(worker.channel)
            worker.channel.close()
            worker.channel = None

    def _closed_on(self, worker):
        try:
            ended = worker.channel.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            ended = b""
        if not ended:
            self._drop_channel(worker)
            return
        worker.connections = max(0, worker.connections - ended.count(
            listener.CONNECTION_ENDED))

    # --- dealing connections --------------------------------------------

    def _accept(self):
        while True:
            try:
                conn, _ = self._sock.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                LOG.warning("accept: %s", e)
                return
            with conn:
                self._deal(conn)

    def _deal(self, conn):
        ready = [w for w in self.workers if w.channel is not None]
        if not ready:
            LOG.warning("no worker running: connection refused")
            return
        worker = min(ready, key=lambda w: (w.connections, w.index))
        try:
            socket.send_fds(worker.channel, [b"f"], [conn.fileno()])
        except OSError as e:
            LOG.warning("worker %d did not take a connection: %s",
                        worker.index, e)
            return
        worker.connections += 1

    # --- control and metrics --------------------------------------------

    async def _worker_stats(self):
        path = self.conf.proxy.control_socket
        snapshots, served = [], []
        for worker in self.workers:
            asked = worker.process
            try:
                snapshot = await asyncio.to_thread(
                    control.request, worker_socket(path, worker.index),
                    "stats", 5.0)
            except control.ControlError as e:
                LOG.debug("worker %d: %s", worker.index, e)
                snapshot = self._last.get(worker.index)
                if snapshot is None:
                    continue
            else:
                # Unless it exited meanwhile: _watch has then retired
                # its last snapshot, and this one would count it twice.
                if worker.process is asked and asked is not None and \
                        asked.returncode is None:
                    self._last[worker.index] = snapshot
            snapshots.append(snapshot)
            served.append({
                "worker": worker.index,
                "pid": worker.process.pid if worker.process else None,
                "connections": worker.connections,
                "downstream_bytes_out": snapshot.get(
                    "downstream_bytes_out", 0),
                "downstream_bytes_in": snapshot.get(
                    "downstream_bytes_in", 0)})
        # The port the supervisor bound: the workers know the configured
        # one, which is 0 when the supervisor picked a free port.
        if self._retired:
            snapshots.append(self._retired)
        return dict(merged(snapshots), workers=served, port=self.port)

    async def _stats(self, request):
        return await self._worker_stats()

    async def _refresh_metrics(self):
        while True:
            self._snapshot = await self._worker_stats()
            await asyncio.sleep(METRICS_EVERY)

    def _forward(self, signum):
        for worker in self.workers:
            if worker.process is not None and \
                    worker.process.returncode is None:
                worker.process.send_signal(signum)

    # --- the run --------------------------------------------------------

    def _listen(self):
        listen = self.conf.listen
        family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((listen.host, listen.port))
        sock.listen(1024)
        sock.setblocking(False)
        return sock

    async def run(self, ready=None):
        """Serve until SIGTERM or SIGINT, then stop every worker."""
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._sock = self._listen()
        self.port = port = self._sock.getsockname()[1]
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopping.set)
        loop.add_signal_handler(signal.SIGHUP, self._forward,
                                signal.SIGHUP)
        try:
            for worker in self.workers:
                await self._start_worker(worker)
            path = self.conf.proxy.control_socket
            if path:
                self._control = control.ControlServer(
                    path, {"stats": self._stats})
                await self._control.start()
                if self.conf.metrics.port is not None:
                    self._metrics = metrics.endpoint(
                        self.conf.metrics.host, self.conf.metrics.port,
                        lambda: self._snapshot,
                        token=metrics_access.read_token(
                            self.conf.metrics.token_file))
                    await self._metrics.start()
                    self._spawn(self._refresh_metrics())
            elif self.conf.metrics.port is not None:
                LOG.warning("[metrics] port needs [proxy] control_socket "
                            "with workers: the supervisor reads the "
                            "workers' counters there; no metrics served")
            loop.add_reader(self._sock, self._accept)
            LOG.info("gvfs-proxy (server role) listening on %s:%d with %d "
                     "workers", self.conf.listen.host, port,
                     len(self.workers))
            if ready is not None:
                ready(port)
            await self._stopping.wait()
        finally:
            await self._stop()

    async def _stop(self):
        self._stopping.set()    # Also when the start failed: no restarts.
        loop = asyncio.get_running_loop()
        if self._sock is not None:
            loop.remove_reader(self._sock)
            self._sock.close()
        self._forward(signal.SIGTERM)
        for worker in self.workers:
            if worker.process is not None:
                try:
                    await asyncio.wait_for(worker.process.wait(), 60)
                except asyncio.TimeoutError:
                    LOG.error("worker %d did not stop: killed",
                              worker.index)
                    worker.process.kill()
                    await worker.process.wait()
            self._drop_channel(worker)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._metrics is not None:
            await self._metrics.close()
        if self._control is not None:
            await self._control.close()
        LOG.info("gvfs-proxy stopped with its %d workers",
                 len(self.workers))


class Worker:
    """What a worker process knows of its place among the workers."""

    def __init__(self, index, channel, count):
        self.index = index
        #: Its end of the socket pair: connections in, their ends out.
        self.channel = channel
        self.count = count

    def share(self, total):
        """Its share of ``total``, at least one.

        Of the NFS server's connections, which the workers split rather
        than multiply: more connections each carrying fewer calls cost
        more CPU per byte (a reply per read instead of several).
        """
        return max(1, -(-total // self.count))


def this_worker():
    """The :class:`Worker` this process is, or None if it is none."""
    value = os.environ.pop(WORKER_ENV, None)
    if value is None:
        return None
    index, fd, count = (int(part) for part in value.split(":"))
    return Worker(index, socket.socket(fileno=fd), count)
