# SPDX-License-Identifier: Apache-2.0
"""The proxy's counters: what ``gvfs-proxy stats`` reports.

Each part of a proxy counts into a typed object of its own, handed to it
when it is made; :class:`Counters` holds the parts a proxy has, so the
report names only what this proxy does (a server proxy has no cache).
The fields are slots: a misspelt counter fails at once instead of
starting a new one, and an increment costs an attribute store.  A
field's name is its key in the report.
"""

import dataclasses
import time

from gvfs_openstack import latency


@dataclasses.dataclass(slots=True)
class ListenerCounters:
    connections: int = 0
    peers_refused: int = 0
    protocol_errors: int = 0
    calls_too_large: int = 0
    clients_backlogged: int = 0
    max_inflight_seen: int = 0
    downstream_bytes_in: int = 0
    downstream_bytes_out: int = 0


@dataclasses.dataclass(slots=True)
class UpstreamCounters:
    """One set for all the upstream pools of a proxy (NFS and MOUNT)."""

    upstream_bytes_in: int = 0
    upstream_bytes_out: int = 0
    upstream_connects: int = 0
    upstream_resent: int = 0
    upstream_failed_calls: int = 0
    upstream_relays_cut: int = 0
    #: From a call's send to its reply, resends included.
    upstream_call_seconds: latency.Histogram = dataclasses.field(
        default_factory=latency.Histogram)


@dataclasses.dataclass(slots=True)
class RoleCounters:
    #: Calls by procedure name (``nfs_read``, ``mount_mnt``...).
    calls: dict = dataclasses.field(default_factory=dict)
    drc_hits: int = 0
    auth_refused: int = 0
    mount_refused: int = 0


@dataclasses.dataclass(slots=True)
class GuardCounters:
    handles_refused: int = 0
    handle_walks: int = 0
    handles_found_by_walk: int = 0
    #: Calls refused by ``[server] read_only_dirs``.
    read_only_refused: int = 0


@dataclasses.dataclass(slots=True)
class BulkServerCounters:
    bulk_reads: int = 0
    #: READVs answered in part because their extents would have cost
    #: more than ``bulk.MAX_READV_READS`` NFS READs: a client proxy's
    #: prefetch at the default sizes never asks for so many.
    bulk_readvs_cut_short: int = 0
    bulk_raw_bytes: int = 0
    bulk_wire_bytes: int = 0
    bulk_writes: int = 0
    bulk_write_raw_bytes: int = 0
    bulk_write_wire_bytes: int = 0


#: The per-export counters of the cache, and their first values.
EXPORT_COUNTERS = ("hits", "misses", "bytes_local", "bytes_fetched",
                   "bytes_zero_map", "dirty_bytes")


@dataclasses.dataclass(slots=True)
class CacheCounters:
    cache_hits: int = 0
    cache_misses: int = 0
    cache_bytes_local: int = 0
    cache_bytes_fetched: int = 0
    cache_bytes_zero_map: int = 0
    cache_reads: int = 0
    cache_reads_zero_map: int = 0
    cache_getattrs_answered: int = 0
    cache_invalidations: int = 0
    cache_readahead_blocks: int = 0
    cache_collapsed: int = 0
    cache_revalidations: int = 0
    cache_stale_replies: int = 0
    #: Bulk READs (a LAN host's image stream) answered from the cache.
    cache_bulk_reads_answered: int = 0
    #: Export path (``?`` when unknown) -> {name in EXPORT_COUNTERS: n}.
    cache_exports: dict = dataclasses.field(default_factory=dict)

    def export(self, export):
        """The counters of one export (made on first use)."""
        counters = self.cache_exports.get(export)
        if counters is None:
            counters = self.cache_exports[export] = dict.fromkeys(
                EXPORT_COUNTERS, 0)
        return counters


@dataclasses.dataclass(slots=True)
class SidecarCounters:
    sidecars_loaded: int = 0
    sidecars_stale: int = 0
    sidecars_invalid: int = 0


@dataclasses.dataclass(slots=True)
class ProfileCounters:
    profiles_loaded: int = 0
    profiles_stale: int = 0
    profiles_invalid: int = 0
    profiles_recorded: int = 0
    profiles_write_failed: int = 0
    prefetches: int = 0
    prefetch_blocks: int = 0
    prefetch_bytes: int = 0
    prefetch_blocks_present: int = 0
    prefetch_stopped: int = 0


@dataclasses.dataclass(slots=True)
class StreamCounters:
    streams: int = 0
    streams_done: int = 0
    streams_stopped: int = 0
    #: Streams that found no bulk channel and went on with plain READs.
    streams_plain: int = 0
    #: Streams whose first chunk came from near by (a LAN proxy).
    streams_near: int = 0
    #: Times a stream waited for its file's readers to be quiet.
    stream_waits: int = 0
    stream_blocks: int = 0
    #: Blocks a stream left to their readers: their cache set was full.
    stream_blocks_no_room: int = 0
    stream_raw_bytes: int = 0
    stream_wire_bytes: int = 0


@dataclasses.dataclass(slots=True)
class WholeFileCounters:
    wholefile_transfers: int = 0
    wholefile_chunks: int = 0
    wholefile_raw_bytes: int = 0
    wholefile_wire_bytes: int = 0
    wholefile_verified: int = 0
    wholefile_digest_mismatches: int = 0
    wholefile_failures: int = 0
    wholefile_unavailable: int = 0


@dataclasses.dataclass(slots=True)
class WritebackCounters:
    writeback_writes: int = 0
    writeback_bytes: int = 0
    writeback_commits: int = 0
    writeback_fallbacks: int = 0
    writeback_flushes: int = 0
    writeback_flushed_bytes: int = 0
    writeback_flush_errors: int = 0
    writeback_discarded_bytes: int = 0
    journal_replayed_records: int = 0
    journal_replayed_bytes: int = 0
    journal_corrupt_records: int = 0
    journal_lost_bytes: int = 0


@dataclasses.dataclass(slots=True)
class WriteBehindCounters:
    write_behind_answered: int = 0
    write_behind_bytes: int = 0
    write_behind_failed: int = 0
    write_behind_commits_failed: int = 0


class Counters:
    """The counters of one proxy: the parts it has, made on demand."""

    def __init__(self):
        self.started_at = time.time()
        self._parts = {}

    def part(self, kind):
        """The one ``kind`` (a counters class above) of this proxy."""
        made = self._parts.get(kind)
        if made is None:
            made = self._parts[kind] = kind()
        return made

    def as_dict(self):
        """Every counter of every part, by name, and ``started_at``."""
        report = {"started_at": self.started_at}
        for part in self._parts.values():
            report.update(dataclasses.asdict(part))
        return report
