# SPDX-License-Identifier: Apache-2.0
"""A discrete-event model of a boot storm across the GVFS hierarchy.

The lab's storm (:mod:`tools.bench.storm`) runs every compute host, LAN
proxy and the DTN on one machine's two cores: past a few hosts its
figures say how much CPU a boot costs more than how the hierarchy
behaves.  The model keeps the two apart.  It simulates, block by block,
what the lab runs --

* each host's guest reading its boot (the recorded trace: its order,
  and the guest's work between reads), its client proxy prefetching the
  boot profile with as many blocks in flight as the proxies' own rule
  allows (:class:`~gvfs_openstack.proxy.cache.window.PathEstimate`: the
  measured bandwidth-delay product, at most ``window`` blocks), a read
  that finds its block on its way waiting for it (collapsed forwarding)
  and one that does not fetching it at once;
* each LAN proxy doing the same for the hosts behind it: one fetch per
  block across the WAN, each block sent to every host that asked;
* the DTN's server proxy answering each block from its NFS server,
  compressed on the WAN as the lab measured;
* each link a port that sends one block after another at its rate (with
  TCP/IP and Ethernet headers on 1500-byte frames), then its one-way
  delay; each tier's processing a CPU cost per block on the cores it
  has --

with costs measured in the lab (:func:`calibrate`, from the storm's
single-host case alone) and validated against the lab's other cases
with the lab's machine (every tier on the same cores).  Then the same
model, with each host, LAN proxy and DTN worker on cores of its own as
in a cloud, sizes one (:func:`size`).

No I/O: everything here is computation.
"""

import collections
import dataclasses
import heapq
import itertools

from gvfs_openstack.proxy.cache.window import PathEstimate

BLOCK = 64 * 1024
#: Bytes on the wire per byte of payload: a 1448-byte TCP segment in a
#: 1514-byte Ethernet frame (what ``tbf`` counts).
FRAMING = 1514 / 1448
#: Blocks of one prefetch call (a READV of 1 MiB): at least this many are
#: in flight once a prefetch has begun.
BATCH_BLOCKS = 16


@dataclasses.dataclass(frozen=True)
class Costs:
    """CPU seconds per 64 KiB block in each tier, as measured in the lab.

    ``host``: a host's proxy and mount, the kernel's part of bringing
    the block to the host (and, in the lab, what no tier's process was
    charged for); ``host_per_peer``: what that grows by for each other
    host on the same cores (the lab's: their processes evict each
    other's caches; zero where hosts have cores of their own);
    ``read``: a guest's read of a block the host has (the FUSE round
    trip), on the host's cores; ``lan``: a LAN (or site) proxy, per
    block sent on, and ``lan_fetch`` per block it fetched; ``dtn``: the
    DTN (server proxy, NFS server), per block sent across the WAN.
    """

    host: float
    lan: float
    dtn: float
    read: float = 0.0
    lan_fetch: float = 0.0
    host_per_peer: float = 0.0
    #: Bytes on the WAN per byte of a block (the server proxy compresses
    #: READV replies).
    wan_ratio: float = 1.0


@dataclasses.dataclass(frozen=True)
class Tree:
    """One storm: who boots, behind what, over which links.

    Rates are in Mbit/s, delays in seconds one way.  ``shared_cores``
    set: every tier shares that many cores (the lab's machine);
    otherwise each host has ``host_cores``, each LAN proxy ``lan_cores``
    and the DTN ``dtn_cores`` (its server proxy's workers).
    """

    hosts: int
    lan_proxies: int
    wan_mbit: float
    wan_rtt: float
    lan_mbit: float
    host_mbit: float
    lan_delay: float = 0.0001
    window_blocks: int = 64
    shared_cores: int = 0
    host_cores: int = 2
    lan_cores: int = 1
    dtn_cores: int = 1
    #: Round trips a proxy spends loading a profile before it prefetches.
    profile_round_trips: int = 2
    #: DTNs (each with ``dtn_cores`` and its own WAN link of
    #: ``wan_mbit``); LAN proxies, or direct hosts, are spread over them.
    dtns: int = 1
    #: With two LAN proxies or more, a site proxy in front of them (one
    #: per DTN), so that a block crosses the WAN once; its port's rate.
    site_proxy: bool = True
    site_mbit: float = 10000


class _Clock:
    def __init__(self):
        self.now = 0.0
        self._events = []
        self._order = itertools.count()

    def at(self, when, action, *args):
        heapq.heappush(self._events, (when, next(self._order), action, args))

    def after(self, delay, action, *args):
        self.at(self.now + delay, action, *args)

    def run(self):
        while self._events:
            self.now, _, action, args = heapq.heappop(self._events)
            action(*args)


class _Cpu:
    """Cores doing one piece of work each; a guest's reads go first.

    A reader woken by its block preempts bulk work on Linux (a sleeper
    gets the core soon after it wakes), so a read waits for a core to
    finish its piece, not for every fetch queued before it.
    """

    def __init__(self, clock, cores):
        self.clock = clock
        self.idle = cores
        self.queues = (collections.deque(), collections.deque())
        self.busy = 0.0

    def run(self, seconds, action, *args, urgent=False):
        if self.idle:
            self.idle -= 1
            self._start(seconds, action, args)
        else:
            self.queues[0 if urgent else 1].append((seconds, action, args))

    def _start(self, seconds, action, args):
        self.busy += seconds
        self.clock.after(seconds, self._done, action, args)

    def _done(self, action, args):
        waiting = self.queues[0] or self.queues[1]
        if waiting:
            self._start(*waiting.popleft())
        else:
            self.idle += 1
        action(*args)


class _Port:
    """A link's sending side: a block at a time at its rate, then delay."""

    def __init__(self, clock, mbit, delay, ratio=1.0):
        self.clock = clock
        self.seconds_per_block = BLOCK * ratio * FRAMING * 8 / (mbit * 1e6)
        self.delay = delay
        self.free_at = 0.0

    def send(self, action, *args):
        start = max(self.clock.now, self.free_at)
        self.free_at = start + self.seconds_per_block
        self.clock.at(self.free_at + self.delay, action, *args)


def _through(ports, action):
    """Send a block through ``ports`` in turn, then ``action()``."""
    if not ports:
        action()
        return
    ports[0].send(_through, ports[1:], action)


class _Cache:
    """A proxy with a cache: a host's, or a LAN proxy.

    ``upstream(block, back)`` asks the next hop for a block; ``back()``
    is called when it arrived here.  ``cost`` is this tier's CPU per block,
    charged when the block is stored (a host's) or sent (a LAN
    proxy's).
    """

    def __init__(self, clock, cpu, profile, window, upstream, up_delay,
                 profile_round_trips):
        self.clock = clock
        self.cpu = cpu
        self.profile = profile
        self.upstream = upstream
        self.up_delay = up_delay
        self.profile_wait = profile_round_trips * 2 * up_delay
        self.have = set()
        self.waiting = {}
        self.started = False
        self._next = 0
        self._prefetching = 0
        self._path = PathEstimate(window * BLOCK)
        #: block -> the estimate's token of its prefetch
        self._tokens = {}

    def want(self, block, waiter):
        """``waiter()`` once ``block`` is here; fetch it if nobody has."""
        if block in self.have:
            waiter()
            return
        if block not in self.waiting:
            self._fetch(block)
        self.waiting[block].append(waiter)
        if not self.started:
            self.started = True
            self.clock.after(self.profile_wait, self._prefetch)

    def _fetch(self, block, prefetch=False):
        self.waiting[block] = []
        if prefetch:
            self._prefetching += 1
            self._tokens[block] = self._path.sent(self.clock.now)
        self.clock.after(self.up_delay, self.upstream, block,
                         lambda: self._arrived(block, prefetch))

    def _arrived(self, block, prefetch):
        self.have.add(block)
        if prefetch:
            self._prefetching -= 1
            self._path.arrived(self._tokens.pop(block), BLOCK,
                               self.clock.now)
        for waiter in self.waiting.pop(block):
            waiter()
        self._prefetch()

    def _prefetch(self):
        window = max(BATCH_BLOCKS, int(self._path.limit // BLOCK))
        while self._prefetching < window and \
                self._next < len(self.profile):
            block = self.profile[self._next]
            self._next += 1
            if block not in self.have and block not in self.waiting:
                self._fetch(block, prefetch=True)


class _Host(_Cache):
    """A host's proxy and mount; its guest replays the trace."""

    def __init__(self, clock, cpu, costs, trace, window, upstream,
                 up_delay, profile_round_trips):
        super().__init__(clock, cpu, [b for b, _ in trace], window,
                         upstream, up_delay, profile_round_trips)
        self.cost = costs.host
        self.read_cost = costs.read
        self.trace = trace
        self.done_at = None
        self._read = 0
        self._last_at = 0.0

    def _arrived(self, block, prefetch):
        # The proxy stores it, the mount takes it: this host's CPU.
        self.cpu.run(self.cost, super()._arrived, block, prefetch)

    def boot(self):
        self._step()

    def _step(self):
        if self._read == len(self.trace):
            self.done_at = self.clock.now
            return
        block, at = self.trace[self._read]
        think = at - self._last_at
        self._last_at = at
        self._read += 1
        self.clock.after(think, self.want, block, self._read_done)

    def _read_done(self):
        self.cpu.run(self.read_cost, self._step, urgent=True)


class _Lan(_Cache):
    """A LAN proxy: one fetch per block across the WAN, sent to each."""

    def __init__(self, clock, cpu, costs, port, profile, window, upstream,
                 up_delay, profile_round_trips):
        super().__init__(clock, cpu, profile, window, upstream, up_delay,
                         profile_round_trips)
        self.cost = costs.lan
        self.fetch_cost = costs.lan_fetch
        self.port = port

    def _arrived(self, block, prefetch):
        self.cpu.run(self.fetch_cost, super()._arrived, block, prefetch)

    def serve(self, block, back, down):
        """A host's request arrived: send the block through ``down``."""
        self.want(block, lambda: self.cpu.run(
            self.cost, _through, [self.port] + down, back))


class _Dtn:
    def __init__(self, cpu, cost, wan_port):
        self.cpu = cpu
        self.cost = cost
        self.wan_port = wan_port
        self.served = 0

    def serve(self, block, back, down):
        """Send the block across the WAN, then through ``down``."""
        self.served += 1
        self.cpu.run(self.cost, _through, [self.wan_port] + down, back)


@dataclasses.dataclass(frozen=True)
class Storm:
    """What one simulated storm gave."""

    #: Each host's boot, in seconds from the storm's start, host order.
    seconds: list
    #: Blocks the DTNs sent across the WAN.
    wan_blocks: int

    @property
    def last(self):
        return max(self.seconds)


def simulate(tree, costs, trace):
    """The :class:`Storm` of ``tree``.

    ``trace``: the recorded boot, ``(block, seconds after the first
    read)`` pairs; every host starts it at time 0.
    """
    clock = _Clock()
    shared = _Cpu(clock, tree.shared_cores) if tree.shared_cores else None

    def cpu(cores):
        return shared or _Cpu(clock, cores)

    profile = [b for b, _ in trace]
    dtns = [_Dtn(cpu(tree.dtn_cores), costs.dtn,
                 _Port(clock, tree.wan_mbit, tree.wan_rtt / 2,
                       costs.wan_ratio))
            for _ in range(tree.dtns)]
    segments = max(1, tree.lan_proxies)
    # What a segment's LAN proxy sends (or, with no LAN proxy, what the
    # segment's gateway forwards from the WAN) shares its port.
    segment_ports = [_Port(clock, tree.lan_mbit, tree.lan_delay)
                     for _ in range(segments)]
    # What sends a LAN proxy its blocks: a site proxy per DTN, or the
    # DTN itself; and the one-way delay to it.
    fronts = [(lambda block, back, dtn=dtn: dtn.serve(block, back, []),
               tree.wan_rtt / 2) for dtn in dtns]
    if tree.site_proxy and tree.lan_proxies > 1:
        sites = [_Lan(clock, cpu(tree.lan_cores), costs,
                      _Port(clock, tree.site_mbit, tree.lan_delay),
                      profile, tree.window_blocks, upstream, delay,
                      tree.profile_round_trips)
                 for upstream, delay in fronts]
        fronts = [(lambda block, back, site=site: site.serve(
            block, back, []), tree.lan_delay) for site in sites]
    lans = []
    for index in range(tree.lan_proxies):
        upstream, delay = fronts[index % len(fronts)]
        lans.append(_Lan(
            clock, cpu(tree.lan_cores), costs, segment_ports[index],
            profile, tree.window_blocks, upstream, delay,
            tree.profile_round_trips))
    hosts = []
    # On shared cores each host's processes slow the others'.
    host_costs = dataclasses.replace(costs, host=costs.host + (
        costs.host_per_peer * (tree.hosts - 1) if shared else 0.0))
    for index in range(tree.hosts):
        port = _Port(clock, tree.host_mbit, tree.lan_delay)
        segment = index % segments
        if lans:
            lan = lans[segment]
            upstream = (lambda block, back, lan=lan, port=port:
                        lan.serve(block, back, [port]))
            delay = tree.lan_delay
        else:
            dtn = dtns[index % len(dtns)]
            upstream = (lambda block, back, dtn=dtn, port=port,
                        seg=segment_ports[segment]:
                        dtn.serve(block, back, [seg, port]))
            delay = tree.wan_rtt / 2
        host = _Host(clock, cpu(tree.host_cores), host_costs, trace,
                     tree.window_blocks, upstream, delay,
                     tree.profile_round_trips)
        hosts.append(host)
        clock.at(0.0, host.boot)
    clock.run()
    return Storm([host.done_at for host in hosts],
                 sum(dtn.served for dtn in dtns))


def _host_cpu_per_block(case, trace_blocks):
    """Host-tier CPU per block of ``case``: what no other tier was charged."""
    return (case["machine_cpu"] - case["cpu"]["lan"] -
            case["cpu"]["server"]) / (case["hosts"] * trace_blocks)


def _line(xs, ys):
    """``(intercept, slope)`` of the least-squares line through points."""
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    if not spread:
        return mean_y, 0.0
    slope = sum((x - mean_x) * (y - mean_y)
                for x, y in zip(xs, ys)) / spread
    return mean_y - slope * mean_x, slope


def _two(us, vs, ys):
    """``(a, b)`` minimising the squares of ``y - a u - b v``."""
    uu = sum(u * u for u in us)
    vv = sum(v * v for v in vs)
    uv = sum(u * v for u, v in zip(us, vs))
    uy = sum(u * y for u, y in zip(us, ys))
    vy = sum(v * y for v, y in zip(vs, ys))
    det = uu * vv - uv * uv
    if not det:
        return (uy / uu if uu else 0.0), 0.0
    return (uy * vv - vy * uv) / det, (vy * uu - uy * uv) / det


def _fetching_proxies(case):
    """LAN proxies that fetch the boot, a site proxy in front included."""
    k = case["lan_proxies"]
    return k + (1 if k > 1 else 0)


def calibrate(single, storms, trace_blocks):
    """:class:`Costs` measured in a storm run (its JSON rows).

    ``single``: one host alone behind one LAN proxy, whose reads found
    their blocks there (the profile's prefetch ran ahead): what a read
    costs.  ``storms``: those behind LAN proxies, whose CPU gives, by
    least squares over all of them (no case's congestion decides alone):

    * the host tier's CPU per block, and how it grows with the hosts
      sharing the cores (the machine's CPU not charged to the LAN or DTN
      tier -- the hosts' processes, the replays, the kernel, the NFS
      server, the WAN's emulation -- is the host tier's);
    * a LAN proxy's CPU per block it sends a host, and per block it (or
      the site proxy) fetches;
    * the DTN's per block it serves, from the storm that served most.
    """
    blocks = trace_blocks
    read = single["read_seconds"] / blocks
    host, per_peer = _line(
        [c["hosts"] - 1 for c in storms],
        [_host_cpu_per_block(c, blocks) - read for c in storms])
    lan, lan_fetch = _two(
        [c["hosts"] * blocks for c in [single] + storms],
        [_fetching_proxies(c) * blocks for c in [single] + storms],
        [c["cpu"]["lan"] for c in [single] + storms])
    most = max(storms, key=lambda c: c["cpu"]["server"])
    # What the DTN served, raw: its CPU is per block read and sent.
    raw = most.get("wan_raw_bytes", most["wan_bytes"])
    wan_blocks = max(1.0, raw / BLOCK)
    return Costs(host=max(0.0, host), lan=max(0.0, lan),
                 dtn=most["cpu"]["server"] / wan_blocks, read=read,
                 lan_fetch=max(0.0, lan_fetch),
                 host_per_peer=max(0.0, per_peer),
                 wan_ratio=most["wan_bytes"] / raw if raw else 1.0)


def lab_tree(case, metrics):
    """The :class:`Tree` the lab ran ``case`` on.

    Its site proxy sends to the LAN proxies over loopback, unshaped.
    """
    return Tree(hosts=case["hosts"], lan_proxies=case["lan_proxies"],
                wan_mbit=metrics["wan_mbit"],
                wan_rtt=metrics["rtt_ms"] / 1000.0,
                lan_mbit=metrics["lan_mbit"], host_mbit=metrics["lan_mbit"],
                shared_cores=metrics["cores"], site_mbit=100000)


def validate(metrics, trace):
    """Costs, and ``(case, modelled last, measured last)`` of each case.

    The costs come from the CPU the single host and the storms behind
    LAN proxies spent (:func:`calibrate`); every case's time is then
    predicted, those included.
    """
    single = metrics["singles"][-1]
    behind = [c for c in metrics["storms"] if c["lan_proxies"]]
    costs = calibrate(single, behind, len(trace))
    rows = []
    for case in metrics["singles"][-1:] + metrics["storms"]:
        modelled = simulate(lab_tree(case, metrics), costs, trace).last
        rows.append((case, modelled, case["last"]))
    return costs, rows


#: The cloud the docs size: a research network's WAN to the DTNs, and
#: compute racks on 10 Gbit/s ports.
CLOUD = dict(wan_mbit=10000, wan_rtt=0.05, lan_mbit=10000,
             host_mbit=10000, host_cores=2, lan_cores=1, dtn_cores=1)


def _last(costs, trace, **tree):
    return simulate(Tree(**dict(CLOUD, **tree)), costs, trace).last


def _largest(last_of, limit, most):
    """The largest count whose ``last_of(count)`` stays within ``limit``.

    Doubling, then halving the gap; ``(count, rows)`` with rows the
    ``(count, last boot)`` pairs tried, in order of count.
    """
    tried = {}

    def fits(count):
        tried[count] = last_of(count)
        return tried[count] <= limit

    good, bad = 1, None
    while bad is None:
        count = good * 2
        if count > most:
            break
        if fits(count):
            good = count
        else:
            bad = count
    while bad is not None and bad - good > max(1, good // 16):
        middle = (good + bad) // 2
        if fits(middle):
            good = middle
        else:
            bad = middle
    return good, sorted(tried.items())


def _before_growth(costs, trace, tree_of, growth, most):
    """How many fit before ``tree_of(count)``'s last boot grows.

    By ``growth`` over one boot alone; ``(count, single boot, rows)``.
    """
    single = _last(costs, trace, hosts=1, lan_proxies=1)
    count, rows = _largest(lambda n: _last(costs, trace, **tree_of(n)),
                           growth * single, most)
    return count, single, rows


def hosts_per_lan_proxy(costs, trace, growth=1.25, most=1024):
    """Hosts one LAN proxy serves before the last boot grows by ``growth``.

    ``(hosts, single boot, rows)``; rows are ``(hosts, last boot)``.
    """
    return _before_growth(
        costs, trace, lambda hosts: dict(hosts=hosts, lan_proxies=1),
        growth, most)


def lan_proxies_per_dtn_worker(costs, trace, growth=1.25, most=4096):
    """LAN proxies one DTN worker serves before boots grow by ``growth``.

    Each LAN proxy has a host booting, all at once, every cache cold,
    each LAN proxy across the WAN to the DTN (no site proxy: they are
    at sites of their own).  ``(LAN proxies, single boot, rows)``.
    """
    return _before_growth(
        costs, trace, lambda lans: dict(hosts=lans, lan_proxies=lans,
                                        site_proxy=False),
        growth, most)


def thousand_host_cloud(costs, trace, booting=500, lan_proxies=10, dtns=2,
                        within=2.0):
    """What 500 instances of one image across 10 LAN caches need.

    One instance on each of 500 hosts, 50 behind each LAN proxy, the LAN
    proxies spread over the DTNs and across the WAN to them.  Rows are
    ``(LAN port Mbit/s, LAN proxy cores, last boot, single boot, fits)``
    for each setup tried, smallest first; ``fits``: the last boot is
    within ``within`` times a single boot on the same setup.
    """
    rows = []
    for lan_mbit, lan_cores in ((1000, 1), (10000, 1), (25000, 2)):
        setup = dict(lan_mbit=lan_mbit, lan_cores=lan_cores, dtns=dtns,
                     site_proxy=False)
        single = _last(costs, trace, hosts=1, lan_proxies=1, **setup)
        last = _last(costs, trace, hosts=booting, lan_proxies=lan_proxies,
                     **setup)
        rows.append((lan_mbit, lan_cores, last, single,
                     last <= within * single))
    return rows
