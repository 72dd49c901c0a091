# SPDX-License-Identifier: Apache-2.0
"""Assembles a running proxy from its configuration and runs it.

Kept apart from the command line so that tests and the lab can run a proxy
in-process as well as through ``gvfs-proxy``.
"""

import asyncio
import dataclasses
import os
import resource
import signal

from oslo_config import cfg
from oslo_log import log as logging

from gvfs_openstack import exceptions
from gvfs_openstack.files import safe_files
from gvfs_openstack import heap
from gvfs_openstack import metrics_access
from gvfs_openstack.nfs import rpc
from gvfs_openstack.proxy import access
from gvfs_openstack.proxy import bulk_server
from gvfs_openstack.proxy.cache import bulk_fetch
from gvfs_openstack.proxy.cache import exports
from gvfs_openstack.proxy.cache import fetch
from gvfs_openstack.proxy.cache import freshness
from gvfs_openstack.proxy.cache import journal
from gvfs_openstack.proxy.cache import profiles
from gvfs_openstack.proxy.cache import reads
from gvfs_openstack.proxy.cache import sidecars
from gvfs_openstack.proxy.cache import store
from gvfs_openstack.proxy.cache import stream
from gvfs_openstack.proxy.cache import updates
from gvfs_openstack.proxy.cache import warm
from gvfs_openstack.proxy.cache import writeback
from gvfs_openstack.proxy import control
from gvfs_openstack.proxy import counters
from gvfs_openstack.proxy import exportguard
from gvfs_openstack.proxy import limits
from gvfs_openstack.proxy.listener import ConnectionLimits
from gvfs_openstack.proxy.listener import Listener
from gvfs_openstack.proxy import local_peers
from gvfs_openstack.proxy import metrics
from gvfs_openstack.proxy import read_only
from gvfs_openstack.proxy import roles
from gvfs_openstack.proxy import tunnel
from gvfs_openstack.proxy.upstream import UpstreamPool
from gvfs_openstack.proxy.upstream_calls import UpstreamCalls
from gvfs_openstack.proxy import workers
from gvfs_openstack.proxy import write_behind

LOG = logging.getLogger(__name__)


def _connector(up):
    if up.port is None:
        raise exceptions.InvalidConfig(option="[upstream] port",
                                       reason="required in the client role")
    if up.tunnel == "tcp":
        return tunnel.TcpConnector(up.host, up.port)
    if up.tunnel == "tls":
        for name in ("tls_cert", "tls_key", "tls_ca"):
            if not getattr(up, name):
                raise exceptions.InvalidConfig(
                    option="[upstream] " + name,
                    reason="required with tunnel = tls")
        return tunnel.TlsConnector(up.host, up.port, up.tls_cert,
                                   up.tls_key, up.tls_ca,
                                   up.tls_server_name)
    for name in ("ssh_host", "ssh_user", "ssh_key", "ssh_known_hosts"):
        if not getattr(up, name):
            raise exceptions.InvalidConfig(option="[upstream] " + name,
                                           reason="required with tunnel = "
                                                  "ssh")
    return tunnel.SshConnector(up.host, up.port, up.ssh_host, up.ssh_port,
                               up.ssh_user, up.ssh_key, up.ssh_known_hosts,
                               ciphers=up.ssh_ciphers,
                               ssh_command=up.ssh_command)


def peak_rss_kb():
    """Peak resident memory of this process image, in KiB.

    ``VmHWM`` rather than ``getrusage``: Linux carries ``ru_maxrss`` over
    ``execve``, so a proxy started by a big parent would report the
    parent's memory as its own.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass  # Not Linux: fall back to getrusage.
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


@dataclasses.dataclass(frozen=True)
class _Cache:
    """The client proxy's cache: its parts, each handed to its users."""

    store: store.BlockStore
    files: freshness.FileStates
    upstream: UpstreamCalls
    policies: exports.ExportPolicies
    sidecars: sidecars.Sidecars
    fetcher: fetch.Fetcher
    reads: reads.CachedReads
    observer: updates.ReplyObserver
    #: :class:`profiles.BootProfiles`, or None without sidecars.
    profiles: object = None


class ProxyService:
    """One proxy: a listener, its role, upstream pools, a control socket."""

    def __init__(self, conf, worker=None):
        """A proxy of ``conf``; a supervisor's worker with ``worker``.

        ``worker`` (a :class:`workers.Worker`) when this is one of a
        supervisor's workers, which hands it connections; its control
        socket is then its own, its counters reach Prometheus through
        the supervisor, and it opens its share of the connections to
        the NFS server.
        """
        self.conf = conf
        self.worker = worker
        self.counters = counters.Counters()
        self.limits = limits.HopLimits(conf.proxy.max_record_size)
        self.pools = []
        self.cache = None
        self.writeback = None
        listen = conf.listen
        peers, local = _peers(conf)
        self.role = self._build_role()
        ssl_context = None
        if listen.tls_cert:
            if not (listen.tls_key and listen.tls_ca):
                raise exceptions.InvalidConfig(
                    option="[listen] tls_key/tls_ca",
                    reason="required with tls_cert (mutual TLS)")
            ssl_context = tunnel.server_tls_context(
                listen.tls_cert, listen.tls_key, listen.tls_ca)
        self.listener = Listener(
            self.role, listen.host, listen.port,
            self.counters.part(counters.ListenerCounters),
            ConnectionLimits.from_conf(conf.proxy), ssl_context, peers,
            local)
        self.control = None
        control_socket = conf.proxy.control_socket
        if control_socket and worker is not None:
            control_socket = workers.worker_socket(control_socket,
                                                   worker.index)
        if control_socket:
            self.control = control.ControlServer(
                control_socket, {"stats": self._stats,
                                 "flush": self._flush,
                                 "drop": self._drop,
                                 "warm": self._warm})
        #: ``[cache] warm_rate_mib`` as applied (at start, at a reload).
        self._warm_rate = conf.cache.warm_rate_mib
        self.metrics = None
        if conf.metrics.port is not None and worker is None:
            self.metrics = metrics.endpoint(
                conf.metrics.host, conf.metrics.port, self.snapshot,
                token=metrics_access.read_token(conf.metrics.token_file))
        self._stopping = None
        #: Hands back, once traffic stops, what ``heap_retain_mb`` kept.
        self._trimmer = None

    def _pool(self, connector, size, timeout=300.0, initial=0.05,
              maximum=5.0):
        pool = UpstreamPool(connector, size, self.conf.proxy.max_record_size,
                            timeout, initial, maximum,
                            self.counters.part(counters.UpstreamCounters))
        self.pools.append(pool)
        return pool

    def _build_cache(self, pool):
        opts = self.conf.cache
        if not opts.directory:
            return None
        if opts.block_size & (opts.block_size - 1):
            raise exceptions.InvalidConfig(option="[cache] block_size",
                                           reason="must be a power of two")
        mib = 1024 * 1024
        geometry = store.Geometry.for_capacity(
            opts.capacity_mb * mib, opts.block_size, opts.associativity,
            opts.bank_size_mb * mib)
        write_back = {"writeback": True, "writethrough": False}
        windows = _windows(opts)
        policies = exports.ExportPolicies(
            windows[0], windows[1], write_back[opts.write_policy],
            _per_export(opts.export_write_policy, write_back,
                        "[cache] export_write_policy"),
            windows[2], windows[3])
        _private(opts.directory, "[cache] directory")
        block_store = store.BlockStore(opts.directory, geometry)
        upstream = UpstreamCalls(pool)
        cache_counters = self.counters.part(counters.CacheCounters)
        files = freshness.FileStates(cache_counters)
        # A READ and its reply must fit in one RPC record.
        max_read = self.limits.io_size
        side = whole_files = None
        if opts.sidecars:
            side = sidecars.Sidecars(
                upstream, self.counters.part(counters.SidecarCounters),
                max_read, opts.sidecar_recheck_seconds)
            # So must a chunk.
            whole_files = bulk_fetch.WholeFiles(
                block_store, files, upstream,
                self.counters.part(counters.WholeFileCounters),
                min(opts.whole_file_chunk_mb * mib, max_read),
                opts.whole_file_window)
        fetcher = fetch.Fetcher(
            block_store, files, upstream, cache_counters, policies,
            max_fetch=self.conf.proxy.max_record_size // 4)
        boot_profiles = None
        if side is not None and (opts.boot_profiles or opts.stream_images):
            # A profile's prefetch and the stream after it may take half
            # the cache: the rest keeps what other images' readers use.
            share = geometry.capacity // 2
            image_stream = None
            if opts.stream_images:
                image_stream = stream.ImageStreams(
                    fetcher, upstream,
                    self.counters.part(counters.StreamCounters),
                    chunk_size=opts.stream_chunk_kb * 1024,
                    window=opts.stream_window_kb * 1024, max_bytes=share,
                    max_wait=opts.profile_max_seconds,
                    quiet_seconds=opts.profile_quiet_seconds)
            boot_profiles = profiles.BootProfiles(
                fetcher, side, upstream,
                self.counters.part(counters.ProfileCounters),
                record=opts.boot_profiles, prefetch=opts.boot_profiles,
                quiet_seconds=opts.profile_quiet_seconds,
                max_seconds=opts.profile_max_seconds,
                window=opts.prefetch_window_kb * 1024,
                max_bytes=share, max_write=max_read, stream=image_stream)
        cached_reads = reads.CachedReads(
            fetcher, files, cache_counters, policies, side, whole_files,
            reads.ReadSizes(readahead=opts.readahead_kb * 1024,
                            max_read=max_read),
            on_read=() if boot_profiles is None else (boot_profiles.on_read,))
        return _Cache(block_store, files, upstream, policies, side, fetcher,
                      cached_reads,
                      updates.ReplyObserver(fetcher, files, policies, side),
                      boot_profiles)

    def _build_writeback(self, cache):
        opts = self.conf.cache
        mib = 1024 * 1024
        if opts.writeback_flush_mb > opts.writeback_max_mb:
            raise exceptions.InvalidConfig(
                option="[cache] writeback_flush_mb",
                reason="must not exceed writeback_max_mb")
        directory = opts.journal_directory or os.path.join(opts.directory,
                                                           "journal")
        _private(directory, "[cache] journal_directory")
        return writeback.WriteBack(
            journal.Journal(directory), cache.fetcher, cache.files,
            cache.upstream, cache.policies, cache.observer,
            self.counters.part(counters.WritebackCounters),
            writeback.WriteBackLimits(
                opts.writeback_max_mb * mib, opts.writeback_flush_mb * mib,
                opts.writeback_idle_seconds,
                wsize=self.conf.proxy.max_record_size // 4,
                max_read=cache.reads.max_read))

    def _build_role(self):
        conf = self.conf
        if conf.proxy.role is None:
            raise exceptions.InvalidConfig(
                option="[proxy] role",
                reason="required: server (on the DTN) or client")
        if conf.proxy.role == "client":
            up = conf.upstream
            pool = self._pool(_connector(up), up.connections,
                              up.call_timeout, up.reconnect_initial_delay,
                              up.reconnect_max_delay)
            self.cache = self._build_cache(pool)
            behind = write_behind.WriteBehind(
                conf.proxy.write_behind_mb * 1024 * 1024,
                self.counters.part(counters.WriteBehindCounters)) \
                if conf.proxy.write_behind_mb else None
            if self.cache is None:
                return roles.ClientRole(
                    pool, self.counters.part(counters.RoleCounters),
                    limits=self.limits, write_behind=behind)
            self.writeback = self._build_writeback(self.cache)
            return roles.ClientRole(
                pool, self.counters.part(counters.RoleCounters),
                cache=self.cache.reads, writeback=self.writeback,
                observer=self.cache.observer, limits=self.limits,
                write_behind=behind)
        server = conf.server
        try:
            exports = access.ExportAllowlist(server.exports)
            read_only_dirs = read_only.ReadOnlyDirs(
                exports.inside(server.read_only_dirs))
            identity = access.IdentityMap(
                server.squash_uid, server.squash_gid,
                access.parse_id_map(server.uid_map, "uid"),
                access.parse_id_map(server.gid_map, "gid"),
                server.allow_root, server.squash_unmapped)
        except ValueError as e:
            raise exceptions.InvalidConfig(option="[server]",
                                           reason=str(e)) from e
        connections = server.upstream_connections
        if self.worker is not None:
            connections = self.worker.share(connections)
        nfs_pool = self._pool(tunnel.TcpConnector(server.nfs_host,
                                                  server.nfs_port),
                              connections)
        if server.mount_port == server.nfs_port:
            mount_pool = nfs_pool
        else:
            mount_pool = self._pool(tunnel.TcpConnector(server.nfs_host,
                                                        server.mount_port),
                                    1)
        nfs_calls = UpstreamCalls(nfs_pool)
        guard = exportguard.ExportGuard(
            nfs_calls, UpstreamCalls(mount_pool), exports,
            rpc.AuthSys(server.squash_uid, server.squash_gid, (),
                        "gvfs-proxy").to_opaque(),
            self.counters.part(counters.GuardCounters),
            server.max_admitted_handles,
            server.handle_rescan_interval, read_only=read_only_dirs)
        bulk = bulk_server.BulkServer(
            nfs_calls, self.counters.part(counters.BulkServerCounters),
            max_chunk=self.conf.proxy.max_record_size // 2,
            level=server.bulk_zstd_level)
        return roles.ServerRole(
            nfs_pool, mount_pool, identity, exports, guard, bulk,
            self.counters.part(counters.RoleCounters), limits=self.limits)

    async def _stats(self, request):
        return self.snapshot()

    def snapshot(self):
        """The counters, with the gauges read now (sizes, dirty bytes)."""
        gauges = {}
        if self.cache is not None:
            gauges.update(cache_corrupt_blocks=self.cache.store.corrupt_blocks,
                          cache_capacity=self.cache.store.geometry.capacity,
                          cache_io_errors=self.cache.store.io_errors,
                          cache_evictions=self.cache.store.evictions)
        if self.writeback is not None:
            gauges.update(
                writeback_dirty_bytes=self.writeback.dirty.dirty_bytes,
                journal_bytes=self.writeback.journal.size)
            cache_counters = self.counters.part(counters.CacheCounters)
            dirty = self.writeback.dirty_by_export()
            for export in set(dirty) | set(cache_counters.cache_exports):
                cache_counters.export(export)["dirty_bytes"] = \
                    dirty.get(export, 0)
        return dict(self.counters.as_dict(), **gauges, role=self.role.name,
                    port=self.listener.port,
                    peak_rss_kb=peak_rss_kb(),
                    drc_entries=len(self.role.drc),
                    upstream=[p.connector.describe() for p in self.pools])

    async def _flush(self, request):
        if self.writeback is None:
            return {"flushed_bytes": 0, "dirty_bytes": 0,
                    "reason": "no cache configured"}
        try:
            return await self.writeback.flush()
        except writeback.FlushError as e:
            raise exceptions.GvfsError(str(e)) from e

    async def _drop(self, request):
        """Write back, then empty the cache (dirty data is never
        dropped)."""
        if self.cache is None:
            return {"dropped": False, "reason": "no cache configured"}
        flushed = await self._flush(request)
        self.cache.fetcher.drop()
        return dict(flushed, dropped=True)

    async def _warm(self, request):
        if self.cache is None:
            raise exceptions.InvalidConfig(option="[cache] directory",
                                           reason="warming needs a cache")
        path = request.get("path")
        if not isinstance(path, str):
            raise ValueError("warm needs a path")
        cache = self.cache
        warmer = warm.Warmer(
            cache.fetcher, cache.upstream, cache.policies, cache.sidecars,
            cache.store.geometry.block_size,
            self._warm_rate, cache.profiles,
            self.conf.cache.prefetch_window_kb * 1024)
        return await warmer.warm(path, request.get("rate_mib"))

    async def start(self):
        if self.writeback is not None:
            self.writeback.replay()
        for pool in self.pools:
            await pool.start()
        if self.writeback is not None:
            self.writeback.start()
        if self.worker is None:
            port = await self.listener.start()
        else:
            port = await self.listener.start_from(self.worker.channel,
                                                  self._stop_soon)
        if self.control is not None:
            await self.control.start()
        if self.metrics is not None:
            await self.metrics.start()
        if self.conf.proxy.heap_retain_mb:
            self._trimmer = asyncio.ensure_future(
                heap.trim_when_idle(self._traffic))
        if self.worker is None:
            LOG.info("gvfs-proxy (%s role) listening on %s:%d",
                     self.role.name, self.listener.host, port)
        else:
            LOG.info("gvfs-proxy worker %d (%s role) serving for its "
                     "supervisor", self.worker.index, self.role.name)
        return port

    def _traffic(self):
        """Bytes through the listener so far, both ways."""
        moved = self.listener.counters
        return moved.downstream_bytes_in + moved.downstream_bytes_out

    async def stop(self):
        if self._trimmer is not None:
            self._trimmer.cancel()
        await self.listener.close()
        behind = getattr(self.role, "write_behind", None)
        if behind is not None and not await behind.drain(
                self.conf.cache.shutdown_flush_timeout):
            LOG.warning("stopping with %d bytes of WRITEs answered ahead of "
                        "the server still in flight: their clients send "
                        "them again at their COMMIT", behind.bytes_in_flight)
        if self.writeback is not None:
            await self.writeback.close(self.conf.cache.shutdown_flush_timeout)
        if self.cache is not None and self.cache.profiles is not None:
            await self.cache.profiles.stop()
        for pool in self.pools:
            await pool.close()
        if self.cache is not None:
            self.cache.store.close()
        if self.control is not None:
            await self.control.close()
        if self.metrics is not None:
            await self.metrics.close()
        LOG.info("gvfs-proxy stopped; counters: %s",
                 self.counters.as_dict())

    def reload(self):
        """SIGHUP: re-read the configuration files, apply what may change.

        The options marked mutable -- who may connect, the per-connection
        limits, the cache's coherence windows, the warm rate -- apply to
        new connections and calls; oslo.config logs each other option
        that changed as ignored until a restart, and oslo.log applies
        ``debug`` itself.  The proxy reads these settings from what it
        applied, not from the configuration: a file that does not hold
        (a bad network, an unknown account) is logged and every one of
        them stays as it ran.  No data is flushed or dropped: that is
        SIGUSR1 and ``gvfs-proxy flush``.
        """
        try:
            changed = self.conf.mutate_config_files()
            peers, local = _peers(self.conf)
            windows = _windows(self.conf.cache) if self.cache else None
            limits = ConnectionLimits.from_conf(self.conf.proxy)
            warm_rate = self.conf.cache.warm_rate_mib
        except (exceptions.InvalidConfig, cfg.Error, ValueError) as e:
            LOG.error("reload: %s; kept the running settings: fix the "
                      "file and reload again", e)
            return []
        names = sorted("[%s] %s" % (group or "DEFAULT", name)
                       for group, name in changed)
        listener = self.listener
        listener.peers, listener.local_peers = peers, local
        listener.limits = limits
        if windows is not None:
            self.cache.policies.set_windows(*windows)
        self._warm_rate = warm_rate
        LOG.info("reload: configuration re-read; changed: %s",
                 ", ".join(names) or "nothing that applies live")
        return names

    def _stop_soon(self):
        if self._stopping is not None:
            self._stopping.set()

    def _flush_and_drop(self):
        async def flush_and_drop():
            try:
                await self._drop({})
                LOG.info("SIGUSR2: written back and dropped the cache")
            except exceptions.GvfsError as e:
                LOG.warning("SIGUSR2: cache kept, write-back failed: %s", e)

        asyncio.ensure_future(flush_and_drop())

    async def run(self, ready=None):
        """Serve until SIGTERM or SIGINT, then shut down cleanly."""
        loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopping.set)
        loop.add_signal_handler(signal.SIGHUP, self.reload)
        if self.writeback is not None:
            loop.add_signal_handler(
                signal.SIGUSR1, self.writeback.start_flush, "SIGUSR1")
            loop.add_signal_handler(signal.SIGUSR2, self._flush_and_drop)
        port = await self.start()
        if ready is not None:
            ready(port)
        try:
            await self._stopping.wait()
        finally:
            await self.stop()


def _private(directory, option):
    """See :func:`safe_files.private_directory`; errors name ``option``."""
    try:
        loose = safe_files.private_directory(directory)
    except OSError as e:
        raise exceptions.InvalidConfig(option=option, reason=str(e)) from e
    if loose:
        LOG.warning("%s %s was open to other accounts (mode bits %04o); "
                    "closed it: it holds images' blocks", option, directory,
                    loose)


def _peers(conf):
    """``(PeerAllowlist, LocalPeers)`` of ``[listen]``, checked.

    A listener exposed beyond what its role allows is refused unless
    ``trusted_network`` says so, at start and at a reload alike.
    """
    listen = conf.listen
    exposed = access.exposure(conf.proxy.role, listen.host,
                              bool(listen.tls_cert), listen.allowed_peers)
    if exposed is not None and not listen.trusted_network:
        raise exceptions.InvalidConfig(
            option="[listen] allowed_peers",
            reason=exposed + " (or set [listen] trusted_network)")
    if exposed is not None:
        LOG.warning("listening exposed on a trusted network: %s", exposed)
    try:
        peers = access.PeerAllowlist(listen.allowed_peers)
    except ValueError as e:
        raise exceptions.InvalidConfig(option="[listen] allowed_peers",
                                       reason=str(e)) from e
    try:
        local = local_peers.LocalPeers(
            local_peers.resolve_users(listen.local_users))
    except ValueError as e:
        raise exceptions.InvalidConfig(option="[listen] local_users",
                                       reason=str(e)) from e
    return peers, local


def _windows(opts):
    """The cache's coherence windows from ``[cache]``.

    In the order :meth:`exports.ExportPolicies.set_windows` takes them.
    """
    seconds = {"window": opts.coherence_window,
               "immutable": opts.immutable_revalidate}
    # GETATTR is answered by the proxy only where files do not change,
    # and only briefly: a client's GETATTR after that still reveals an
    # image changed in place against the policy.
    answers = {"window": 0.0, "immutable": opts.coherence_window}
    return (seconds[opts.consistency],
            _per_export(opts.export_consistency, seconds,
                        "[cache] export_consistency"),
            answers[opts.consistency],
            _per_export(opts.export_consistency, answers,
                        "[cache] export_consistency"))


def _per_export(table, names, option):
    """``{export path: value}`` from a DictOpt of path:policy name."""
    values = {}
    for path, name in table.items():
        if name not in names or not path.startswith("/"):
            raise exceptions.InvalidConfig(
                option=option,
                reason="%r:%r is not an absolute export path and one of %s"
                       % (path, name, ", ".join(sorted(names))))
        values[path] = names[name]
    return values
