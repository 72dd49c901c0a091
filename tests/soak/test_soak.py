# SPDX-License-Identifier: Apache-2.0
"""Many clients for minutes through a caching chain on a faulty WAN.

The functional tests each break the chain once, with one client, for
seconds.  What they cannot show is what hours of service do: a socket
kept per reconnect, memory kept per dead connection, a cache that
serves a stale block once in ten thousand reads after an eviction, a
file handle refused after the hundredth restart of the server proxy.
This test runs ``GVFS_SOAK_CLIENTS`` clients (default 16) for
``GVFS_SOAK_SECONDS`` (default 600) through a client proxy with a small
block cache, over a toxiproxy link with WAN latency, while the tunnel is
cut and the server proxy restarted (SIGTERM or SIGKILL) at seeded random
times.

Every byte read is compared with what it must be; every file's content
is checked on the export at the end.  A call that fails during a fault
(or ``GRACE`` seconds after the chain answered again) is repeated --
non-idempotent ones after looking at what the first attempt did -- and
counted as retried; a failure at any other time is an error and fails
the test, as does a wrong byte, RSS growth or descriptors that stay
open.  ``GVFS_SOAK_SEED`` replays a run's fault schedule and operation
mix; ``GVFS_SOAK_REPORT_DIR`` keeps its CSV (and PNG, with matplotlib).
"""

import asyncio
import collections
import hashlib
import os
import random
import threading
import time

from gvfs_lab import soak_monitor
from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.errors import NfsError
from gvfs_openstack.nfs.errors import RpcError
from gvfs_openstack.nfs import nfs3

KIB = 1024
MIB = 1024 * KIB

SECONDS = float(os.environ.get("GVFS_SOAK_SECONDS", "600"))
CLIENTS = int(os.environ.get("GVFS_SOAK_CLIENTS", "16"))
#: Mean seconds between faults (each gap is 0.5 to 1.5 times it); at most
#: a sixth of the run, so a short run sees every kind of fault.
FAULT_GAP = float(os.environ.get("GVFS_SOAK_FAULT_GAP", "12"))

#: The client proxy's cache: a quarter of the clients' read working set
#: (four files, 6.3 MiB, per client), so blocks are evicted and fetched
#: again all the time, and one bank, so its descriptors are all open
#: once anything was read.
CACHE = {"capacity_mb": max(8, CLIENTS * 6 // 4), "associativity": 4,
         "bank_size_mb": max(8, CLIENTS * 6 // 4),
         "write_policy": "writethrough", "coherence_window": 3.0}
#: Each way over the link: 16 ms round trips, a few ms of jitter.
LATENCY_MS = 8
JITTER_MS = 2
PREMADE_SIZES = (256 * KIB, MIB, 2 * MIB + 4321, 3 * MIB - 777)
#: Written files a client keeps; the oldest goes when it would have more.
MAX_WRITTEN = 6
MAX_PATCHES = 4

#: Seconds after a fault window's end in which a failure still counts as
#: caused by it: a failing call's reply can leave the client proxy just
#: after the probe's reply did.
GRACE = 2.0
#: Longest a fault may keep the chain from answering.
RECOVERY_TIMEOUT = 120.0
#: Longest one operation may keep failing before its client gives up.
GIVE_UP_SECONDS = 180.0

#: The first part of the run, when caches fill, banks open, allocator
#: arenas grow: not judged for growth.
WARM_UP = 0.2
#: RSS may grow by this fraction of its early median, or by RSS_SLACK,
#: whichever is larger.  A CPython proxy's RSS moves by several MiB with
#: allocator fragmentation alone and its buffers may legitimately hold
#: up to ``max_buffered_mb`` (32 MiB) at a busy moment; a leak of one
#: buffer per call or per reconnect passes that over ten minutes of tens
#: of thousands of calls and dozens of faults.
RSS_GROWTH = 0.25
RSS_SLACK = 32 * MIB
#: Descriptors that may be open on top of the baseline once faults have
#: settled: a reconnect or a probe's connection in progress.
FD_SLACK = 4

#: Failures a soak client sees from a chain under faults.
TRANSIENT = (NfsError, RpcError, OSError)


def now(run):
    return time.monotonic() - run.started


def content(seed, size):
    """Bytes a file or patch must hold, regenerated rather than kept."""
    return random.Random(seed).randbytes(size)


class Mismatch(AssertionError):
    """Bytes or metadata came back other than they must be."""


class FileModel:
    """What a file must contain: a base and the patches written over it."""

    def __init__(self, seed, size):
        self.seed = seed
        self.size = size
        self.patches = []

    def data(self):
        data = bytearray(content(self.seed, self.size))
        for offset, seed, length in self.patches:
            data[offset:offset + length] = content(seed, length)
        return bytes(data)

    def current_size(self):
        size = self.size
        for offset, _, length in self.patches:
            size = max(size, offset + length)
        return size


def first_difference(got, expected):
    for i, (a, b) in enumerate(zip(got, expected)):
        if a != b:
            return i
    return min(len(got), len(expected))


class Run:
    """What the clients, the fault injector and the report share."""

    def __init__(self, seed, started):
        self.seed = seed
        self.started = started
        self.stopping = threading.Event()
        #: [start, end] in run seconds; end None while the chain is down.
        self.windows = []
        self.faults = []
        #: (t, client, operation, attempt, error)
        self.failures = []
        self.mismatches = []
        self.crashes = []
        self.calls = 0
        self.ops = 0
        self.retried_ops = 0
        self.bytes_verified = 0
        self.lock = threading.Lock()

    def in_window(self, t):
        for start, end in list(self.windows):
            if start <= t and (end is None or t <= end + GRACE):
                return True
        return False

    def classified(self):
        retried = [f for f in self.failures if self.in_window(f[0])]
        errors = [f for f in self.failures if not self.in_window(f[0])]
        return retried, errors


class SoakClient:
    """One NFS client with a directory of its own and a model of it."""

    def __init__(self, index, port, export, run, premade):
        self.name = "c%02d" % index
        self.port = port
        self.export = export
        self.run = run
        self.rng = random.Random("%s-%s" % (run.seed, self.name))
        self.premade = premade
        self.written = {}
        self.serial = 0
        self.nfs = None
        self.dir_fh = None
        self.handles = {}

    # --- connection ---------------------------------------------------

    async def connect(self, retry=False):
        if self.nfs is not None:
            self.nfs.close()
        self.nfs = NfsClient("127.0.0.1", self.port, self.port, window=4,
                             timeout=60.0)
        for rpc_client in (self.nfs.nfs, self.nfs.mnt):
            rpc_client.call = self._counted(rpc_client.call)
        await self.nfs.mount(self.export)
        self.dir_fh = (await self.nfs.lookup(self.nfs.root,
                                             self.name)).object
        self.handles = {}

    def _counted(self, call):
        async def counted(*args):
            result = await call(*args)
            self.run.calls += 1
            return result
        return counted

    async def handle(self, name):
        if name not in self.handles:
            self.handles[name] = (await self.nfs.lookup(self.dir_fh,
                                                        name)).object
        return self.handles[name]

    # --- the loop ---------------------------------------------------------

    async def serve(self):
        try:
            await self.perform("mount", self.connect)
            while not self.run.stopping.is_set():
                await self.perform(*self.next_operation())
                self.run.ops += 1
        except Mismatch as e:
            self.run.mismatches.append("%.1fs %s: %s" % (now(self.run),
                                                         self.name, e))
        except Exception as e:
            self.run.crashes.append("%.1fs %s: %r" % (now(self.run),
                                                      self.name, e))
            raise
        finally:
            if self.nfs is not None:
                self.nfs.close()

    async def perform(self, kind, attempt_once):
        """Run ``attempt_once(retry)`` until it succeeds.

        Every failure is recorded with its time; whether it was excused
        by a fault is decided at the end, once the windows are known.
        """
        attempt, first = 0, time.monotonic()
        while True:
            try:
                await attempt_once(attempt > 0)
            except TRANSIENT as e:
                attempt += 1
                self.run.failures.append((now(self.run), self.name, kind,
                                          attempt, repr(e)))
                if time.monotonic() - first > GIVE_UP_SECONDS:
                    raise
                await asyncio.sleep(min(0.05 * 2 ** attempt, 1.0))
                if self.nfs is None or not self.nfs.nfs.connected or \
                        not self.nfs.mnt.connected or self.dir_fh is None:
                    await self.reconnect()
                # Handles are looked up again: a stale one is an error
                # the retry must not inherit.
                self.handles = {}
                continue
            if attempt:
                self.run.retried_ops += 1
            return

    async def reconnect(self):
        try:
            await self.connect()
        except TRANSIENT:
            self.dir_fh = None  # The next attempt fails and comes back.

    def next_operation(self):
        rng = self.rng
        roll = rng.random()
        if roll < 0.45 or not self.written and roll < 0.6:
            return self.prepare_read()
        if roll < 0.65:
            if len(self.written) >= MAX_WRITTEN:
                return self.prepare_remove()
            return self.prepare_write()
        if roll < 0.8:
            patchable = [n for n, m in self.written.items()
                         if len(m.patches) < MAX_PATCHES]
            if patchable:
                return self.prepare_patch(rng.choice(sorted(patchable)))
        return self.prepare_meta()

    # --- operations: each prepared once, attempted until it succeeds -----

    def prepare_read(self):
        rng = self.rng
        files = dict(self.premade)
        if self.written and rng.random() < 0.3:
            files = self.written
        name = rng.choice(sorted(files))
        model = files[name]
        size = model.current_size()
        if rng.random() < 0.5:
            offset = rng.randrange(0, size)
            length = rng.randrange(1, 256 * KIB)
        else:
            offset, length = 0, None

        async def attempt(retry):
            fh = await self.handle(name)
            attr = await self.nfs.getattr(fh)
            self.check(attr.size == size, "%s: size %d, not %d"
                       % (name, attr.size, size))
            expected = model.data()
            if length is None:
                await self.read_whole(name, fh, expected)
            else:
                got = await self.read_range(fh, offset, length)
                self.compare(name, got, expected[offset:offset + length],
                             offset)
        return "read", attempt

    def prepare_write(self):
        self.serial += 1
        name = "w%05d" % self.serial
        rng = self.rng
        size = rng.choice((rng.randrange(1, 4 * KIB),
                           rng.randrange(4 * KIB, 1536 * KIB)))
        model = FileModel(rng.getrandbits(64), size)

        async def attempt(retry):
            fh = await self.create(name, retry)
            self.written[name] = model
            data = model.data()
            written = await self.nfs.write_file(fh, [data])
            self.check(written == size, "%s: wrote %d of %d"
                       % (name, written, size))
            attr = await self.nfs.getattr(fh)
            self.check(attr.size == size, "%s: size %d after writing %d"
                       % (name, attr.size, size))
            await self.read_whole(name, fh, data)
        return "write", attempt

    def prepare_patch(self, name):
        rng = self.rng
        model = self.written[name]
        size = model.current_size()
        offset = rng.randrange(0, size + 1)
        length = rng.randrange(1, 128 * KIB)
        model.patches.append((offset, rng.getrandbits(64), length))
        new_size = model.current_size()

        async def attempt(retry):
            fh = await self.handle(name)
            data = model.data()
            await self.nfs.write_file(fh, [data[offset:offset + length]],
                                      offset=offset)
            attr = await self.nfs.getattr(fh)
            self.check(attr.size == new_size, "%s: size %d after a patch, "
                       "not %d" % (name, attr.size, new_size))
            # Around the patch: the old blocks the cache may still hold.
            start = max(0, offset - 64 * KIB - 3)
            end = min(new_size, offset + length + 64 * KIB + 5)
            got = await self.read_range(fh, start, end - start)
            self.compare(name, got, data[start:end], start)
        return "patch", attempt

    def prepare_remove(self):
        name = min(self.written)

        async def attempt(retry):
            try:
                await self.nfs.remove(self.dir_fh, name)
            except NfsError as e:
                # The first attempt may have removed it before failing.
                if not (retry and e.status == const.NfsStat.NFS3ERR_NOENT):
                    raise
            self.handles.pop(name, None)
            self.written.pop(name, None)
        return "remove", attempt

    def prepare_meta(self):
        self.serial += 1
        name = "m%05d" % self.serial

        async def attempt(retry):
            fh = await self.create(name, retry, mode=0o600)
            await self.nfs.setattr(fh, nfs3.Sattr(mode=0o640))
            attr = await self.nfs.getattr(fh)
            self.check(attr.mode & 0o777 == 0o640, "%s: mode %o after "
                       "SETATTR 640" % (name, attr.mode & 0o777))
            entries = await self.nfs.readdirplus(self.dir_fh)
            listed = {e.name: e for e in entries
                      if e.name not in (".", "..")}
            expected = dict(self.premade, **self.written)
            self.check(set(listed) == set(expected) | {name},
                       "READDIRPLUS lists %s, not %s" % (
                           sorted(listed), sorted(set(expected) | {name})))
            for entry_name, model in expected.items():
                attrs = listed[entry_name].name_attributes
                if attrs is not None:
                    self.check(attrs.size == model.current_size(),
                               "READDIRPLUS: %s has size %d, not %d" % (
                                   entry_name, attrs.size,
                                   model.current_size()))
            await self.nfs.remove(self.dir_fh, name)
            try:
                await self.nfs.lookup(self.dir_fh, name)
            except NfsError as e:
                if e.status != const.NfsStat.NFS3ERR_NOENT:
                    raise
            else:
                raise Mismatch("%s: still there after REMOVE" % name)
        return "meta", attempt

    # --- helpers ------------------------------------------------------------

    async def create(self, name, retry, mode=0o644):
        """GUARDED CREATE; on a retry an existing file is the first one's."""
        try:
            fh = await self.nfs.create(self.dir_fh, name, mode=mode,
                                       exclusive=True)
        except NfsError as e:
            if not (retry and e.status == const.NfsStat.NFS3ERR_EXIST):
                raise
            fh = (await self.nfs.lookup(self.dir_fh, name)).object
        self.handles[name] = fh
        return fh

    async def read_whole(self, name, fh, expected):
        got = 0
        async for offset, data in self.nfs.read_file(fh, len(expected)):
            self.compare(name, data, expected[offset:offset + len(data)],
                         offset)
            got += len(data)
        self.check(got == len(expected), "%s: read %d bytes of %d"
                   % (name, got, len(expected)))

    async def read_range(self, fh, offset, length):
        out = bytearray()
        while len(out) < length:
            ok = await self.nfs.read(fh, offset + len(out),
                                     min(length - len(out), self.nfs.rsize))
            out += ok.data
            if ok.eof or not ok.data:
                break
        return bytes(out)

    def compare(self, name, got, expected, offset):
        if got != expected:
            at = first_difference(got, expected)
            raise Mismatch("%s: %d bytes at %d differ from byte %d on "
                           "(got %d bytes, expected %d)" % (
                               name, len(expected), offset, offset + at,
                               len(got), len(expected)))
        self.run.bytes_verified += len(expected)

    def check(self, ok, message):
        if not ok:
            raise Mismatch(message)


def make_premade(export, index, seed):
    """A client's directory with its files of known content, on disk."""
    directory = os.path.join(export, "c%02d" % index)
    os.makedirs(directory)
    os.chown(directory, FILE_UID, FILE_GID)
    models = {}
    for n, size in enumerate(PREMADE_SIZES):
        name = "r%d" % n
        model = FileModel(random.Random("%s-c%02d-%s" % (seed, index, name))
                          .getrandbits(64), size)
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(model.data())
        os.chown(path, FILE_UID, FILE_GID)
        models[name] = model
    return models


def run_clients(clients):
    """The clients' event loop, in a thread of its own."""
    async def main():
        await asyncio.gather(*(c.serve() for c in clients),
                             return_exceptions=True)

    asyncio.run(main())


def probe(lab, deadline, read=False):
    """Until the whole chain answers: MNT, GETATTR and LOOKUP upstream.

    A new connection each time, as a new client would make; LOOKUP is
    never answered by the client proxy itself.  ``read``: and READ a
    file, which opens the cache's bank.
    """
    async def once():
        port = lab.client_proxy.port
        async with NfsClient("127.0.0.1", port, port, timeout=3.0) as nfs:
            await nfs.mount(lab.export)
            await nfs.getattr(nfs.root)
            fh = (await nfs.lookup(nfs.root, "c00")).object
            if read:
                fh = (await nfs.lookup(fh, "r0")).object
                async for _ in nfs.read_file(fh):
                    pass

    while True:
        try:
            asyncio.run(once())
            return
        except TRANSIENT:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def inject_faults(lab, run, rng, first, last, mean_gap):
    """Cut the tunnel or restart the server proxy, at random times.

    Between ``first`` and ``last`` (run seconds); each window lasts from
    the fault until :func:`probe` gets answers again.
    """
    kinds = ["cut", "sigterm", "sigkill"]
    rng.shuffle(kinds)  # Even a short run sees each kind once.
    next_at = first
    while True:
        wait = next_at - now(run)
        if wait > 0:
            time.sleep(wait)
        if now(run) > last:
            return
        kind = kinds.pop(0) if kinds else rng.choices(
            ["cut", "sigterm", "sigkill"], [5, 3, 2])[0]
        window = [now(run), None]
        run.windows.append(window)
        if kind == "cut":
            lab.cut_tunnel()
        else:
            lab.restart_server_proxy(kill=kind == "sigkill")
        probe(lab, time.monotonic() + RECOVERY_TIMEOUT)
        window[1] = now(run)
        run.faults.append((kind, window[0], window[1]))
        print("[soak %6.1fs] fault %d: %s; the chain answered again after "
              "%.2fs" % (window[0], len(run.faults), kind,
                         window[1] - window[0]), flush=True)
        next_at = window[1] + rng.uniform(0.5 * mean_gap, 1.5 * mean_gap)


def idle_fds(pid):
    got = soak_monitor.read_proc(pid)
    return got[1] if got else None


def test_soak(lab_factory, tmp_path):
    seed = int(os.environ.get("GVFS_SOAK_SEED") or
               random.SystemRandom().getrandbits(32))
    duration = SECONDS
    print("\n[soak] %d clients for %.0fs, seed %d (GVFS_SOAK_SEED=%d "
          "replays it)" % (CLIENTS, duration, seed, seed), flush=True)
    lab = lab_factory("tcp", link=True, cache=CACHE)
    for stream in ("upstream", "downstream"):
        lab.toxiproxy.add_toxic("wan", "latency", {"latency": LATENCY_MS,
                                                   "jitter": JITTER_MS},
                                stream)
    premade = [make_premade(lab.export, i, seed) for i in range(CLIENTS)]
    report_dir = os.environ.get("GVFS_SOAK_REPORT_DIR") or str(tmp_path)
    os.makedirs(report_dir, exist_ok=True)

    # Idle descriptors before the clients come, once the cache bank and
    # the upstream connections are open (one probe reads through).
    probe(lab, time.monotonic() + 30, read=True)
    fds_before = {"client-proxy": idle_fds(lab.client_proxy.process.pid),
                  "server-proxy": idle_fds(lab.server_proxy.process.pid)}

    run = Run(seed, time.monotonic())
    clients = [SoakClient(i, lab.client_proxy.port, lab.export, run,
                          premade[i]) for i in range(CLIENTS)]
    monitor = soak_monitor.Monitor({
        "client-proxy": lambda: lab.client_proxy.process.pid,
        "server-proxy": lambda: lab.server_proxy.process.pid,
        "harness": os.getpid,
    }, interval=min(5.0, max(1.0, duration / 120)))
    monitor.start(run.started)
    worker = threading.Thread(target=run_clients, args=(clients,),
                              name="soak-clients")
    worker.start()
    quiet = max(10.0, 0.1 * duration)
    try:
        inject_faults(lab, run, random.Random(seed),
                      first=max(5.0, 0.1 * duration),
                      last=duration - quiet,
                      mean_gap=min(FAULT_GAP, duration / 6))
        remaining = duration - now(run)
        if remaining > 0:
            time.sleep(remaining)
    finally:
        run.stopping.set()
        worker.join(GIVE_UP_SECONDS + 120)
    elapsed = now(run)
    stopped_at = elapsed
    # Let the proxies close what the clients' departure left.
    time.sleep(3)
    monitor.stop()
    assert not worker.is_alive(), "the clients did not stop"
    fds_after = {"client-proxy": idle_fds(lab.client_proxy.process.pid),
                 "server-proxy": idle_fds(lab.server_proxy.process.pid)}

    # --- the tree on the export -------------------------------------------
    tree_errors = []
    for client in clients:
        directory = os.path.join(lab.export, client.name)
        expected = dict(client.premade, **client.written)
        names = set(os.listdir(directory))
        if names != set(expected):
            tree_errors.append("%s holds %s, not %s" % (
                directory, sorted(names), sorted(expected)))
        for name, model in expected.items():
            path = os.path.join(directory, name)
            if not os.path.exists(path):
                continue
            with open(path, "rb") as f:
                on_disk = f.read()
            data = model.data()
            if hashlib.sha256(on_disk).digest() != \
                    hashlib.sha256(data).digest():
                tree_errors.append("%s: %d bytes, differ from byte %d" % (
                    path, len(on_disk), first_difference(on_disk, data)))
            else:
                run.bytes_verified += len(data)

    # --- the report ---------------------------------------------------------
    retried, errors = run.classified()
    stats = lab.client_proxy.stats()
    warm = WARM_UP * stopped_at
    quarter = (stopped_at - warm) / 4
    last_end = max((end for _, _, end in run.faults), default=0.0)
    growth, anon, fd_report, problems = {}, {}, {}, []
    for name in ("client-proxy", "server-proxy"):
        early = monitor.median(name, "rss", warm, warm + quarter)
        late = monitor.median(name, "rss", stopped_at - quarter,
                              stopped_at)
        growth[name] = (early, late)
        anon[name] = (
            monitor.median(name, "anon", warm, warm + quarter),
            monitor.median(name, "anon", stopped_at - quarter, stopped_at))
        if early is not None and late is not None and \
                late - early > max(RSS_GROWTH * early, RSS_SLACK):
            problems.append("%s RSS grew from %.1f to %.1f MiB" % (
                name, early / MIB, late / MIB))
        base = monitor.median(name, "fds", warm, warm + quarter)
        settled = monitor.median(name, "fds", last_end + GRACE, stopped_at)
        fd_report[name] = (base, settled)
        if base is not None and settled is not None and \
                settled > base + FD_SLACK:
            problems.append("%s holds %s descriptors after the faults, "
                            "%s before" % (name, settled, base))
        if fds_after[name] is not None and \
                fds_after[name] > fds_before[name] + FD_SLACK // 2:
            problems.append("%s holds %d descriptors idle after the run, "
                            "%d before it" % (name, fds_after[name],
                                              fds_before[name]))

    print("\n[soak] RSS and open descriptors (%s every %.0fs):" % (
        ", ".join(monitor.series), monitor.interval))
    for line in monitor.table(width=40):
        print(line)
    csv_path = os.path.join(report_dir, "soak.csv")
    monitor.write_csv(csv_path)
    png_path = os.path.join(report_dir, "soak.png")
    wrote_png = monitor.write_png(png_path, [(s, e)
                                             for _, s, e in run.faults])
    print("\n[soak] faults (%d):" % len(run.faults))
    for kind, start, end in run.faults:
        print("  %7.1fs  %-8s down %.2fs" % (start, kind, end - start))
    print("[soak] failures excused by a fault window (retried): %d"
          % len(retried))
    for failure in retried[:20]:
        print("  %7.1fs %s %s attempt %d: %s" % failure)
    causes = collections.Counter(f[4] for f in retried)
    for cause, count in causes.most_common(8):
        print("  %5d x %s" % (count, cause))
    print("[soak] failures outside any fault window (errors): %d"
          % len(errors))
    for failure in errors[:50]:
        print("  %7.1fs %s %s attempt %d: %s" % failure)
    cpu = {name: (s[-1].cpu or 0) for name, s in monitor.series.items()}
    print("\n[soak] summary, seed %d" % seed)
    for label, value in [
            ("clients", CLIENTS),
            ("seconds", "%.1f" % stopped_at),
            ("operations", run.ops),
            ("calls served", run.calls),
            ("calls/s", "%.0f" % (run.calls / stopped_at)),
            ("errors", len(errors)),
            ("retried calls", len(retried)),
            ("operations retried", run.retried_ops),
            ("faults injected", "%d (%s)" % (len(run.faults), ", ".join(
                "%d %s" % (sum(1 for f in run.faults if f[0] == kind), kind)
                for kind in ("cut", "sigterm", "sigkill")))),
            ("bytes verified", "%d (%.1f MiB)" % (
                run.bytes_verified, run.bytes_verified / MIB)),
            ("wrong data", len(run.mismatches) + len(tree_errors)),
            ("RSS early -> late (MiB)", ", ".join(
                "%s %.1f -> %.1f" % (n, (a or 0) / MIB, (b or 0) / MIB)
                for n, (a, b) in growth.items())),
            ("of which anonymous", ", ".join(
                "%s %.1f -> %.1f" % (n, (a or 0) / MIB, (b or 0) / MIB)
                for n, (a, b) in anon.items())),
            ("fds baseline -> settled", ", ".join(
                "%s %s -> %s" % (n, a, b) for n, (a, b) in fd_report.items())),
            ("idle fds before -> after", ", ".join(
                "%s %s -> %s" % (n, fds_before[n], fds_after[n])
                for n in fds_before)),
            ("CPU seconds", ", ".join("%s %.0f" % kv for kv in cpu.items())),
            ("upstream connects/fault", "%.0f" % (
                stats.get("upstream_connects", 0) / max(1, len(run.faults)))),
            ("client proxy", ", ".join(
                "%s %s" % (k, stats.get(k)) for k in (
                    "upstream_connects", "upstream_resent",
                    "upstream_failed_calls", "upstream_relays_cut",
                    "cache_bytes_fetched", "cache_bytes_local",
                    "cache_invalidations"))),
            ("report", csv_path + (" and " + png_path if wrote_png
                                   else " (no matplotlib: no PNG)")),
    ]:
        print("  %-26s %s" % (label, value))

    assert not run.crashes, "clients crashed:\n" + "\n".join(run.crashes)
    assert not run.mismatches, "wrong data served:\n" + "\n".join(
        run.mismatches)
    assert not tree_errors, "wrong tree on the export:\n" + "\n".join(
        tree_errors)
    assert not errors, "%d failures outside fault windows, first: %s" % (
        len(errors), errors[:5])
    assert run.faults, "no fault was injected: run longer"
    assert not problems, "; ".join(problems)
    assert run.ops > CLIENTS, "the clients hardly ran"
