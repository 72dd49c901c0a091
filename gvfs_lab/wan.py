# SPDX-License-Identifier: Apache-2.0
"""An emulated WAN link whose bandwidth every connection crossing it shares.

toxiproxy's bandwidth toxic caps each connection on its own: GridFTP's
four parallel streams then get four times the link, and a benchmark cannot
tell a pipeline that fills a link from one that does not.  Here the link
is a veth pair into a network namespace of its own, shaped by a ``tbf``
qdisc, as a real WAN's bottleneck shapes whatever crosses it.  toxiproxy
runs inside the namespace for what ``tbf`` cannot do: the delay (``netem``
is not in every kernel) and faults (cut links).

A connection crosses the link as ``client -> toxiproxy (in the
namespace) -> server``, both legs over the veth pair::

    root namespace                         link namespace
    client ---------------> veth -----> toxiproxy (link.host:port)
    server <-- DNAT <------ veth <------'   |  latency, faults
    (127.0.0.1:P)   (link.gateway:P)

The bucket sits on the root side's transmit queue, so the payload of both
directions shares the one rate (a half-duplex link), which is what a
one-way bulk copy needs.  Servers listening on 127.0.0.1 are reached from
the namespace at :attr:`SharedLink.gateway` through a DNAT rule per link
(``route_localnet`` on the veth lets the kernel route to loopback).
Everything is named after this process and removed on stop.
"""

import itertools
import os
import random

from gvfs_lab import process
from gvfs_lab import toxiproxy

#: Where the links' /30 subnets are taken from.
_SUBNETS = "10.213"
_serial = itertools.count()


def _free_subnet():
    """``(net, first)``: a /30 under 10.213.0.0/16 no interface here uses."""
    used = process.command("ip", "-o", "-4", "addr", "show")
    for _ in range(1000):
        net = "%s.%d" % (_SUBNETS, random.randrange(256))
        first = random.randrange(64) * 4
        if not any(" %s.%d/" % (net, first + i) in used for i in (1, 2)):
            return net, first
    raise process.LabError("no free /30 under %s.0.0/16" % _SUBNETS)


def namespace_on_veth(netns, outside, inside, address, made):
    """A network namespace joined to this one by a veth pair.

    ``inside`` goes into the namespace with ``address`` (CIDR); both
    ends and the namespace's loopback are up.  What takes each step
    back is appended to ``made`` (see :func:`process.undo`).
    """
    process.command("ip", "netns", "add", netns)
    made.append(("ip", "netns", "delete", netns))
    process.command("ip", "link", "add", outside, "type", "veth", "peer",
                    "name", inside)
    made.append(("ip", "link", "delete", outside))
    process.command("ip", "link", "set", inside, "netns", netns)
    process.command("ip", "link", "set", outside, "up")
    inns = ("ip", "netns", "exec", netns)
    process.command(*inns, "ip", "addr", "add", address, "dev", inside)
    process.command(*inns, "ip", "link", "set", inside, "up")
    process.command(*inns, "ip", "link", "set", "lo", "up")


def tbf_arguments(rate_mbit):
    """``tc`` arguments of a token bucket at ``rate_mbit``.

    The bucket holds 2 ms of the rate, and at least two of the veth's
    largest (GSO) packets, or the qdisc would hold them forever; the queue
    holds up to 100 ms.
    """
    burst = max(int(rate_mbit * 1e6 / 8 * 0.002), 2 * 65536)
    return ["tbf", "rate", "%dmbit" % rate_mbit, "burst", str(burst),
            "latency", "100ms"]


class SharedLink:
    """One emulated WAN link; :meth:`add_link` puts a route across it.

    ``rate_mbit`` is the link's rate, shared by every connection crossing
    it; ``rtt_ms`` the round trip time each route adds.
    """

    def __init__(self, workdir, rate_mbit, rtt_ms=0):
        os.makedirs(workdir, exist_ok=True)
        self.rate_mbit = rate_mbit
        self.rtt_ms = rtt_ms
        tag = "%x%x" % (os.getpid(), next(_serial))
        self.netns = "gvfs-wan-" + tag
        self._veth = ("gw%sh" % tag)[-15:], ("gw%sn" % tag)[-15:]
        #: What takes back each thing made (:func:`process.undo`).
        self._made = []
        try:
            self._create()
            self.toxiproxy = toxiproxy.Toxiproxy(workdir, host=self.host,
                                                 netns=self.netns)
        except BaseException:
            self.stop()
            raise

    def _create(self):
        run = process.command
        outside, inside = self._veth
        net, fourth = _free_subnet()
        #: The root side's address: servers as the namespace sees them.
        self.gateway = "%s.%d" % (net, fourth + 1)
        #: The namespace's address: where the routes' clients connect.
        self.host = "%s.%d" % (net, fourth + 2)
        namespace_on_veth(self.netns, outside, inside, self.host + "/30",
                          self._made)
        run("ip", "addr", "add", self.gateway + "/30", "dev", outside)
        run("sysctl", "-q", "-w",
            "net.ipv4.conf.%s.route_localnet=1" % outside)
        run("tc", "qdisc", "add", "dev", outside, "root",
            *tbf_arguments(self.rate_mbit))

    def add_link(self, name, upstream_port, upstream_host="127.0.0.1"):
        """A route across the link to ``upstream_host:upstream_port``.

        Returns the port it listens on at :attr:`host`.  A server on
        127.0.0.1 is reached through a DNAT rule; one on :attr:`gateway`
        directly.
        """
        if upstream_host == "127.0.0.1":
            rule = ["PREROUTING", "-i", self._veth[0], "-p", "tcp",
                    "-d", self.gateway, "--dport", str(upstream_port),
                    "-m", "comment", "--comment",
                    "gvfs-lab-%d" % os.getpid(), "-j", "DNAT",
                    "--to-destination", "127.0.0.1:%d" % upstream_port]
            process.command("iptables", "-w", "-t", "nat", "-A", *rule)
            self._made.append(("iptables", "-w", "-t", "nat", "-D", *rule))
        elif upstream_host != self.gateway:
            raise ValueError("a server on %s cannot be reached from the "
                             "link" % upstream_host)
        port = self.toxiproxy.add_link(name, upstream_port, self.gateway)
        if self.rtt_ms:
            self.toxiproxy.latency(name, self.rtt_ms)
        return port

    def reach_from(self, subnet):
        """Let hosts of ``subnet`` (another namespace's) use the routes.

        Their packets come through the root namespace, which forwards
        them onto the link (forwarding on for the link's side alone, not
        the machine's); the namespace routes its answers back the same
        way.
        """
        process.command("sysctl", "-q", "-w", "net.ipv4.conf.%s.forwarding=1"
                        % self._veth[0])
        process.command("ip", "netns", "exec", self.netns, "ip", "route",
                        "add", subnet, "via", self.gateway)

    def set_enabled(self, name, enabled):
        """Disabling a route closes its connections and refuses new ones."""
        self.toxiproxy.set_enabled(name, enabled)

    def bytes_sent(self):
        """Bytes the link's bucket has let through."""
        out = process.command("tc", "-s", "qdisc", "show", "dev",
                              self._veth[0])
        words = out.split()
        return int(words[words.index("Sent") + 1])

    def stop(self):
        toxi = getattr(self, "toxiproxy", None)
        if toxi is not None:
            toxi.stop()
        # The rules first; deleting one end of a veth pair deletes the
        # other (and its qdisc); the namespace goes last.
        process.undo(self._made)
        self._made = []
