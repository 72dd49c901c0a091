# SPDX-License-Identifier: Apache-2.0
"""Options of the client proxy's block disk cache."""

from oslo_config import cfg

cache_group = cfg.OptGroup("cache", title="Block disk cache",
                           help="The client-side proxy's disk cache of "
                                "file blocks (GVFS paper, section 3.2.1).")

cache_opts = [
    cfg.StrOpt("directory",
               help="""Directory holding the cache banks; unset: no cache.

Created mode 0700 if missing. A cache left there by an earlier run with the
same layout is reused warm; one with another layout is discarded.
Related options: capacity_mb, block_size, associativity.
"""),
    cfg.IntOpt("capacity_mb", default=10240, min=1,
               help="Cache capacity in MiB (data frames; tags add about "
                    "0.1%)."),
    cfg.IntOpt("block_size", default=64 * 1024, min=4096,
               max=1024 * 1024,
               help="""Cache block size in bytes; a power of two.

Blocks are the unit of caching and of upstream fetches. 64 KiB matches
qcow2's default cluster size.
"""),
    cfg.IntOpt("associativity", default=8, min=1, max=64,
               help="Frames per set; the least recently used frame of a "
                    "set is replaced."),
    cfg.IntOpt("bank_size_mb", default=256, min=1,
               help="Size of one bank file in MiB; banks are created on "
                    "first use."),
    cfg.StrOpt("consistency", default="window", mutable=True, choices=[
        ("window", "trust the file's attributes for coherence_window "
                   "seconds, then ask the server (GETATTR)"),
        ("immutable", "golden images: ask the server only every "
                      "immutable_revalidate seconds, and answer GETATTR "
                      "of files checked within coherence_window")],
        help="""How often the proxy checks that cached blocks are current.

Either way a block fetched under other attributes than the file's current
ones is never served.
"""),
    cfg.DictOpt("export_consistency", default={}, mutable=True,
                help="""Per-export ``consistency``, e.g.
``/srv/golden:immutable,/srv/scratch:window``.

Exports not named here use ``consistency``. A file's export is learnt from
the MNT and LOOKUP replies that pass through the proxy.
"""),
    cfg.FloatOpt("coherence_window", default=3.0, min=0.0, mutable=True,
                 help="Seconds the file attributes are trusted under the "
                      "``window`` policy (NFS clients use 3 to 60); under "
                      "``immutable``, seconds after a check that the proxy "
                      "answers GETATTR itself."),
    cfg.FloatOpt("immutable_revalidate", default=600.0, min=0.0,
                 mutable=True,
                 help="Seconds between checks under the ``immutable`` "
                      "policy."),
    cfg.IntOpt("warm_rate_mib", default=50, min=1, mutable=True,
               help="""Default cap, in MiB/s, of ``gvfs-proxy warm``.

Keeps many hosts warming the same golden image from flooding the DTN.
"""),
    cfg.IntOpt("readahead_kb", default=4096, min=0,
               help="How far ahead of a sequential reader to fetch, in "
                    "KiB; 0 disables read-ahead."),
    cfg.BoolOpt("sidecars", default=True,
                help="""Use the files' metadata sidecars.

At the first READ of a file the proxy looks for ``.gvfs-meta.<name>`` next to
it (written by ``gvfs-meta generate`` or the Glance driver) and answers
READs of its zero extents locally. A stale or malformed sidecar is ignored.
"""),
    cfg.FloatOpt("sidecar_recheck_seconds", default=60.0, min=0.0,
                 help="Seconds before the proxy looks again for the "
                      "sidecar of a file that had none."),
    cfg.IntOpt("whole_file_chunk_mb", default=4, min=1, max=16,
               help="""Chunk size, in MiB, of whole-file transfers.

Files whose sidecar says ``whole_file`` come over the bulk channel in
zstd-compressed chunks of this size; a READ waits for the chunk holding its
range. Smaller chunks serve the first READ sooner, larger ones compress
better. At most half of ``[proxy] max_record_size`` is used.
"""),
    cfg.IntOpt("whole_file_window", default=8, min=1, max=64,
               help="Chunks of a whole-file transfer in flight at once "
                    "(the server proxy compresses them in parallel)."),
    cfg.BoolOpt("boot_profiles", default=True,
                help="""Record and replay boot profiles of the files read.

A boot profile names the blocks of an image that a boot reads, in the
order it first read them; it sits on the DTN beside the image as
``.gvfs-meta.<name>.profile``.  With this on, the proxy writes what its
readers read there (the union with what was there) once a file has been
quiet for ``profile_quiet_seconds``, and at the first READ of a file whose
profile matches it fetches the profile's blocks ahead of the reader,
``prefetch_window_kb`` in flight.  Needs ``sidecars`` (the proxy finds a
profile by the file's name).
Related options: profile_quiet_seconds, prefetch_window_kb.
"""),
    cfg.FloatOpt("profile_quiet_seconds", default=30.0, min=1.0,
                 max=3600.0,
                 help="""Seconds without a READ of a file that end its record.

Long enough to span the pause between Nova creating the overlay and the
guest's first disk read under a slow hypervisor.
Related options: boot_profiles, profile_max_seconds.
"""),
    cfg.FloatOpt("profile_max_seconds", default=600.0, min=1.0,
                 max=3600.0,
                 help="Seconds after a file's first READ at which its "
                      "recording ends however busy the file is."),
    cfg.IntOpt("prefetch_window_kb", default=4096, min=64,
               max=1024 * 1024,
               help="""Most KiB a boot profile's prefetch keeps in flight.

At least 1.5 times the bandwidth-delay product of the WAN to the next hop
(a 50 ms, 200 Mbit/s WAN: 1.25 MB; so 1.9 MB); the default covers up to
about 100 ms at 300 Mbit/s.  Within it the prefetch keeps what its path
needs: it starts with one call in flight and measures, as BBR does, the
rate its bytes arrive at and the quickest round trip (twice their product
while the rate grows, 1.5 times once it stopped), so that behind a LAN
proxy many hosts share it keeps about one call each.  A guest's own misses
go out beside the prefetch and wait behind at most this much on the link.
Related options: boot_profiles.
"""),
    cfg.BoolOpt("stream_images", default=True,
                help="""Stream the rest of a golden image into the cache.

After a file's boot profile has been fetched (or at its first READ when it
has none), the proxy fetches every non-zero block of it the cache lacks, in
file order, as zstd-compressed bulk READs in the background, until its
share of the cache (half of it, with the profile's) is spent.  The first
boot of an image no host has booted then finds most of its blocks here, and
later boots read nothing across the link.  Only files with a metadata
sidecar (golden images) are streamed.  Needs ``sidecars``.
Related options: stream_window_kb, stream_chunk_kb.
"""),
    cfg.IntOpt("stream_window_kb", default=2048, min=64, max=1024 * 1024,
               help="""Compressed bytes (KiB) the image stream keeps in flight.

About 1.5 times the bandwidth-delay product of the link to the next hop (a
50 ms, 200 Mbit/s WAN: 1.25 MB), as for ``prefetch_window_kb``: the stream
then runs at the link's rate, and a guest's own miss, sent at once beside
it, waits behind at most the window's excess over that product on the
link (some 30 ms there).  A window below the product leaves the link idle:
1024 streamed a 1 GiB golden image at half the lab link's rate, and the
first boot ever of the worst-case guest missed 93 blocks instead of 26.
Related options: stream_images.
"""),
    cfg.IntOpt("stream_chunk_kb", default=1024, min=64, max=16 * 1024,
               help="""Bytes (KiB) of the image per bulk READ of the stream.

A chunk is compressed as one piece on the DTN: larger compresses a little
better, smaller leaves less ahead of a guest's miss on the link.  At most a
quarter of ``[proxy] max_record_size`` is used.
Related options: stream_images.
"""),
    cfg.StrOpt("write_policy", default="writethrough", choices=[
        ("writethrough", "WRITEs go upstream before they are answered"),
        ("writeback", "WRITEs are answered once journalled on local disk "
                      "and written upstream later")],
        help="""What the proxy does with WRITEs.

Write-back answers a WRITE once it is in the journal (``journal_directory``)
and a COMMIT once the journal is on stable storage, so an acknowledged byte
survives a crash of the proxy or the host; it is written upstream by
``gvfs-proxy flush``, SIGUSR1 (SIGUSR2 also empties the cache), after
``writeback_idle_seconds`` without WRITEs, when the journal passes
``writeback_flush_mb``, and at a clean shutdown. Other hosts see the data
only once it is written back: use it for data one host writes, such as new
images and instance disks, not for files shared while being written.
"""),
    cfg.DictOpt("export_write_policy", default={},
                help="""Per-export ``write_policy``, e.g.
``/srv/images:writeback,/srv/shared:writethrough``.

Exports not named here use ``write_policy``.
"""),
    cfg.StrOpt("journal_directory",
               help="""Directory of the write-back journal.

Default: ``journal`` inside ``directory``. Put it on a disk that survives a
reboot; tmpfs would lose acknowledged data with the host.
"""),
    cfg.IntOpt("writeback_max_mb", default=4096, min=1,
               help="""Largest journal, in MiB.

WRITEs beyond it (or when its disk is full) are written through instead,
so clients never see an error for want of local disk.
"""),
    cfg.IntOpt("writeback_flush_mb", default=1024, min=1,
               help="Journal size, in MiB, at which writing back starts "
                    "in the background."),
    cfg.FloatOpt("writeback_idle_seconds", default=30.0, min=0.0,
                 help="Write back once no WRITE came for this many "
                      "seconds; 0 disables the idle timer."),
    cfg.FloatOpt("shutdown_flush_timeout", default=300.0, min=0.0,
                 help="""Seconds a clean shutdown spends writing back.

What is not written back by then stays in the journal and is written back
after the next start.
"""),
]


def register_opts(conf):
    conf.register_group(cache_group)
    conf.register_opts(cache_opts, group=cache_group)


def list_opts():
    return [(cache_group, cache_opts)]
