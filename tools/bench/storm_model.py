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
  delay;
* each tier's processing a CPU cost per block, in the processes the
  tier runs (a host's client proxy and its mount, a LAN proxy, a DTN
  worker), each doing its own work in order, on the cores it has: the
  processes with work share them as Linux's fair scheduler shares them
  (:class:`_Cores`) --

with costs measured in the lab (:func:`calibrate`, by least squares over
every case of the run) and validated against each case with the lab's
machine (every tier on the same cores).  Then the same model, with each
host, LAN proxy and DTN worker on cores of its own as in a cloud, sizes
one (:func:`hosts_per_lan_proxy`, :func:`lan_proxies_per_dtn_worker`,
:func:`thousand_host_cloud`).

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
    block sent on, and ``lan_fetch`` per block it fetched;
    ``wan_fetch``: what any proxy spends more per block it fetches
    across the WAN (it decompresses the block; the WAN's path), a
    host's proxy with no LAN proxy or the proxy in front of the WAN;
    ``dtn``: the DTN (server proxy, NFS server), per block sent across
    the WAN.
    """

    host: float
    lan: float
    dtn: float
    read: float = 0.0
    lan_fetch: float = 0.0
    host_per_peer: float = 0.0
    wan_fetch: float = 0.0
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
    #: Processes of a LAN proxy, its calls dealt to them in turn: one, a
    #: client proxy being one asyncio loop; more says what client-role
    #: workers sharing one cache would give.
    lan_workers: int = 1
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


class _Cores:
    """Cores that processes share as Linux shares them.

    Each process does its own work in order (one asyncio loop: a
    guest's read waits behind what its process is doing); the processes
    with work share the cores equally (processor sharing, as the
    kernel's fair scheduler gives each runnable task its share), so a
    storm's reads slow down with every process that has work, but wait
    for no other process's queue.
    """

    def __init__(self, clock, cores):
        self.clock = clock
        self.cores = cores
        #: Processes with work, each with what its current piece needs.
        self.running = []
        self._since = 0.0
        self._generation = 0

    def process(self):
        return _Process(self)

    def _rate(self):
        return min(1.0, self.cores / len(self.running))

    def _advance(self):
        now = self.clock.now
        if self.running and now > self._since:
            done = (now - self._since) * self._rate()
            for process in self.running:
                process.left -= done
        self._since = now

    def _schedule(self):
        self._generation += 1
        if self.running:
            soonest = max(0.0, min(p.left for p in self.running))
            self.clock.after(soonest / self._rate(), self._tick,
                             self._generation)

    def _start(self, process):
        self._advance()
        self.running.append(process)
        self._schedule()

    def _tick(self, generation):
        if generation != self._generation:
            return      # The shares changed since: a later tick counts.
        self._advance()
        finished = []
        for process in list(self.running):
            if process.left <= 1e-12:
                finished.append(process.queue.popleft())
                if process.queue:
                    process.left = process.queue[0][0]
                else:
                    self.running.remove(process)
        self._schedule()
        for _, action, args in finished:
            action(*args)


class _Process:
    """One process's work on :class:`_Cores`, a piece at a time."""

    def __init__(self, cores):
        self.cores = cores
        self.queue = collections.deque()
        self.left = 0.0

    def run(self, seconds, action, *args):
        """``action(*args)`` once ``seconds`` of CPU after what is queued."""
        self.queue.append((seconds, action, args))
        if len(self.queue) == 1:
            self.left = seconds
            self.cores._start(self)


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
    is called when it arrived here.  What asks for a block on its way
    waits for it (collapsed forwarding).  Blocks go a block at a time,
    not a READV at a time: a proxy answers a READV once it has all of
    it, but in a storm its prefetch has them well before, and the
    model fits the lab better so.
    """

    def __init__(self, clock, profile, window, upstream, up_delay,
                 profile_wait):
        self.clock = clock
        self.profile = profile
        self.upstream = upstream
        self.up_delay = up_delay
        self.profile_wait = profile_wait
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

    def __init__(self, clock, cores, costs, trace, window, upstream,
                 up_delay, profile_wait, across_wan):
        super().__init__(clock, [b for b, _ in trace], window,
                         upstream, up_delay, profile_wait)
        #: The client proxy stores what arrives; the mount answers reads.
        self.proxy = cores.process()
        self.mount = cores.process()
        self.cost = costs.host + (costs.wan_fetch if across_wan else 0.0)
        self.read_cost = costs.read
        self.trace = trace
        self.done_at = None
        self._read = 0
        self._last_at = 0.0

    def _arrived(self, block, prefetch):
        # The proxy stores it, the mount takes it: this host's CPU.
        self.proxy.run(self.cost, super()._arrived, block, prefetch)

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
        self.mount.run(self.read_cost, self._step)


class _Lan(_Cache):
    """A LAN proxy: one fetch per block across the WAN, sent to each."""

    def __init__(self, clock, cores, workers, costs, port, profile,
                 window, upstream, up_delay, profile_wait, across_wan):
        super().__init__(clock, profile, window, upstream, up_delay,
                         profile_wait)
        self.processes = itertools.cycle(
            [cores.process() for _ in range(workers)])
        self.cost = costs.lan
        self.fetch_cost = costs.lan_fetch + (
            costs.wan_fetch if across_wan else 0.0)
        self.port = port

    def _arrived(self, block, prefetch):
        next(self.processes).run(self.fetch_cost, super()._arrived, block,
                                 prefetch)

    def serve(self, block, back, down):
        """A host's request arrived: send the block through ``down``."""
        self.want(block, lambda: next(self.processes).run(
            self.cost, _through, [self.port] + down, back))


class _Dtn:
    """A DTN's server proxy: ``workers`` processes, calls dealt in turn."""

    def __init__(self, cores, workers, cost, wan_port):
        self.workers = itertools.cycle(
            [cores.process() for _ in range(workers)])
        self.cost = cost
        self.wan_port = wan_port
        self.served = 0

    def serve(self, block, back, down):
        """Send the block across the WAN, then through ``down``."""
        self.served += 1
        next(self.workers).run(self.cost, _through, [self.wan_port] + down,
                               back)


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
    shared = _Cores(clock, tree.shared_cores) if tree.shared_cores \
        else None

    def cpu(cores):
        return shared or _Cores(clock, cores)

    profile = [b for b, _ in trace]
    # The server proxy runs a worker per core (``[proxy] workers``).
    dtns = [_Dtn(cpu(tree.dtn_cores), tree.dtn_cores, costs.dtn,
                 _Port(clock, tree.wan_mbit, tree.wan_rtt / 2,
                       costs.wan_ratio))
            for _ in range(tree.dtns)]
    segments = max(1, tree.lan_proxies)
    # What a segment's LAN proxy sends (or, with no LAN proxy, what the
    # segment's gateway forwards from the WAN) shares its port.
    segment_ports = [_Port(clock, tree.lan_mbit, tree.lan_delay)
                     for _ in range(segments)]

    # A proxy reads the profile (and the image's other sidecars) from the
    # DTN, through every tier between, before it prefetches.
    def profile_wait(to_dtn):
        return tree.profile_round_trips * 2 * to_dtn

    # What sends a LAN proxy its blocks: a site proxy per DTN, or the
    # DTN itself; the one-way delay to it, and to the DTN.
    fronts = [(lambda block, back, dtn=dtn: dtn.serve(block, back, []),
               tree.wan_rtt / 2, tree.wan_rtt / 2) for dtn in dtns]
    behind_site = tree.site_proxy and tree.lan_proxies > 1
    if behind_site:
        sites = [_Lan(clock, cpu(tree.lan_cores), tree.lan_workers, costs,
                      _Port(clock, tree.site_mbit, tree.lan_delay),
                      profile, tree.window_blocks, upstream, delay,
                      profile_wait(to_dtn), True)
                 for upstream, delay, to_dtn in fronts]
        fronts = [(lambda block, back, site=site: site.serve(
            block, back, []), tree.lan_delay,
            tree.lan_delay + tree.wan_rtt / 2) for site in sites]
    lans = []
    for index in range(tree.lan_proxies):
        upstream, delay, to_dtn = fronts[index % len(fronts)]
        lans.append((_Lan(
            clock, cpu(tree.lan_cores), tree.lan_workers, costs,
            segment_ports[index],
            profile, tree.window_blocks, upstream, delay,
            profile_wait(to_dtn), not behind_site), to_dtn))
    hosts = []
    # On shared cores each host's processes slow the others'.
    host_costs = dataclasses.replace(costs, host=costs.host + (
        costs.host_per_peer * (tree.hosts - 1) if shared else 0.0))
    for index in range(tree.hosts):
        port = _Port(clock, tree.host_mbit, tree.lan_delay)
        segment = index % segments
        if lans:
            lan, to_dtn = lans[segment]
            upstream = (lambda block, back, lan=lan, port=port:
                        lan.serve(block, back, [port]))
            delay = tree.lan_delay
            to_dtn += delay
        else:
            dtn = dtns[index % len(dtns)]
            upstream = (lambda block, back, dtn=dtn, port=port,
                        seg=segment_ports[segment]:
                        dtn.serve(block, back, [seg, port]))
            delay = to_dtn = tree.wan_rtt / 2
        host = _Host(clock, cpu(tree.host_cores), host_costs, trace,
                     tree.window_blocks, upstream, delay,
                     profile_wait(to_dtn), not lans)
        hosts.append(host)
        clock.at(0.0, host.boot)
    clock.run()
    return Storm([host.done_at for host in hosts],
                 sum(dtn.served for dtn in dtns))


def _dtn_cpu(case):
    """The DTN's CPU in ``case``: its server proxy and its NFS server."""
    return case["cpu"]["server"] + case["cpu"].get("nfs", 0.0)


def _host_cpu_per_block(case, trace_blocks):
    """Host-tier CPU per block of ``case``: what no other tier was charged."""
    return (case["machine_cpu"] - case["cpu"]["lan"] - _dtn_cpu(case)) / (
        case["hosts"] * trace_blocks)


def _line(xs, ys):
    """``(intercept, slope)`` of the least-squares line through points.

    The slope is at least zero (a cost does not shrink with load): where
    the points fall, the best such line is flat, through their mean.
    """
    n = len(xs)
    mean_x, mean_y = sum(xs) / n, sum(ys) / n
    spread = sum((x - mean_x) ** 2 for x in xs)
    slope = sum((x - mean_x) * (y - mean_y)
                for x, y in zip(xs, ys)) / spread if spread else 0.0
    slope = max(0.0, slope)
    return mean_y - slope * mean_x, slope


def _two(us, vs, ys):
    """``(a, b)``, neither below zero, minimising ``y - a u - b v`` squared.

    Where the unconstrained best has one below zero, the best with it
    at zero is the other alone (the squares are convex).
    """
    uu = sum(u * u for u in us)
    vv = sum(v * v for v in vs)
    uv = sum(u * v for u, v in zip(us, vs))
    uy = sum(u * y for u, y in zip(us, ys))
    vy = sum(v * y for v, y in zip(vs, ys))
    det = uu * vv - uv * uv
    if det:
        a, b = (uy * vv - vy * uv) / det, (vy * uu - uy * uv) / det
        if a >= 0 and b >= 0:
            return a, b
    alone_u = max(0.0, uy / uu) if uu else 0.0
    alone_v = max(0.0, vy / vv) if vv else 0.0

    def squares(a, b):
        return sum((y - a * u - b * v) ** 2 for u, v, y in zip(us, vs, ys))

    return min((alone_u, 0.0), (0.0, alone_v),
               key=lambda ab: squares(*ab))


def _fetching_proxies(case):
    """LAN proxies that fetch the boot, a site proxy in front included."""
    k = case["lan_proxies"]
    return k + (1 if k > 1 else 0)


def calibrate(single, storms, trace_blocks):
    """:class:`Costs` measured in a storm run (its JSON rows).

    ``single``: one host alone behind one LAN proxy, whose reads found
    their blocks there (the profile's prefetch ran ahead): what a read
    costs.  ``storms``: the others, whose CPU gives, by least squares
    over them all (no case's congestion decides alone):

    * the host tier's CPU per block behind LAN proxies, and how it grows
      with the hosts sharing the cores (the machine's CPU not charged to
      the LAN or DTN tier -- the hosts' processes, the replays, the
      kernel, the WAN's emulation -- is the host tier's);
    * what a host with no LAN proxy spends more per block, fetching it
      across the WAN itself (``wan_fetch``);
    * a LAN proxy's CPU per block it sends a host, and per block it (or
      the site proxy) fetches, the one in front of the WAN fetching
      across it;
    * the DTN's (server proxy and NFS server) per block it serves, and
      how much the WAN carried of each.
    """
    blocks = trace_blocks
    read = single["read_seconds"] / blocks
    behind = [c for c in storms if c["lan_proxies"]]
    direct = [c for c in storms if not c["lan_proxies"]]
    host, per_peer = _line(
        [c["hosts"] - 1 for c in behind],
        [_host_cpu_per_block(c, blocks) - read for c in behind])
    wan_fetch = 0.0
    if direct:
        # What those hosts spent more, over all the blocks they fetched.
        wan_fetch = max(0.0, sum(
            (_host_cpu_per_block(c, blocks) - read - host -
             per_peer * (c["hosts"] - 1)) * c["hosts"]
            for c in direct) / sum(c["hosts"] for c in direct))
    lan, lan_fetch = _two(
        [c["hosts"] * blocks for c in [single] + behind],
        [_fetching_proxies(c) * blocks for c in [single] + behind],
        [c["cpu"]["lan"] - wan_fetch * blocks for c in [single] + behind])
    raw = sum(c.get("wan_raw_bytes", c["wan_bytes"]) for c in storms)
    return Costs(host=max(0.0, host), lan=lan,
                 dtn=sum(_dtn_cpu(c) for c in storms) / max(1.0, raw / BLOCK),
                 read=read, lan_fetch=lan_fetch,
                 host_per_peer=per_peer, wan_fetch=wan_fetch,
                 wan_ratio=sum(c["wan_bytes"] for c in storms) / raw
                 if raw else 1.0)


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

    The costs come from the CPU the single host and the storms spent
    (:func:`calibrate`); every case's time is then predicted, those
    included.
    """
    costs = calibrate(metrics["singles"][-1], metrics["storms"], len(trace))
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


def hosts_per_lan_proxy(costs, trace, growth=1.25, most=1024, **setup):
    """Hosts one LAN proxy serves before the last boot grows by ``growth``.

    ``(hosts, single boot, rows)``; rows are ``(hosts, last boot)``.
    ``setup``: :class:`Tree` fields other than :data:`CLOUD`'s.
    """
    return _before_growth(
        costs, trace,
        lambda hosts: dict(setup, hosts=hosts, lan_proxies=1), growth,
        most)


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
    for lan_mbit, lan_cores in ((1000, 1), (10000, 1)):
        setup = dict(lan_mbit=lan_mbit, lan_cores=lan_cores, dtns=dtns,
                     site_proxy=False)
        single = _last(costs, trace, hosts=1, lan_proxies=1, **setup)
        last = _last(costs, trace, hosts=booting, lan_proxies=lan_proxies,
                     **setup)
        rows.append((lan_mbit, lan_cores, last, single,
                     last <= within * single))
    return rows
