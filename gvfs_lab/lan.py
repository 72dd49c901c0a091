# SPDX-License-Identifier: Apache-2.0
"""Compute hosts as network namespaces on shaped LAN segments.

A boot storm is many compute hosts reading one image at once; what
limits it is the network between them and the LAN cache (and the LAN
cache's own port), not any one host.  Each host here is a network
namespace with an address on a segment, a Linux bridge in the root
namespace; the segment's LAN proxy listens on the bridge's own address
in the root namespace::

    root namespace                            host namespaces
    LAN proxy  ---  bridge (segment.gateway) --- veth --- host 1
    (gateway:P)     [tbf: the LAN proxy's port]  [tbf: the host's port]
                                             --- veth --- host 2 ...

A ``tbf`` on the bridge shapes what the root namespace sends into the
segment -- the LAN proxy's port, shared by every host behind it -- and
one on each host's veth shapes that host's own port, both ways.  A host
reaches other addresses through its segment's gateway: with
:meth:`Lan.reach` the root namespace forwards its packets across the
emulated WAN (:class:`wan.SharedLink`) to the DTN, for hosts that use
no LAN proxy.  Forwarding is switched on for the bridges and the link's
side only, never for the machine.

A host's processes run under ``nsenter --net``: in the host's network
namespace but the machine's mount namespace, so a FUSE mount made in a
host is seen by every process here.  Everything is named after this
process and removed on stop.
"""

import itertools
import os
import random

from gvfs_lab import process
from gvfs_lab import wan

#: Where the segments' /24 subnets are taken from.
_SUBNETS = "10.214"
#: The first host address of a segment (``.1`` is the gateway).
_FIRST_HOST = 10
_serial = itertools.count()


def _free_segment():
    """A /24 under 10.214.0.0/16 (its first three octets) no one uses."""
    used = process.command("ip", "-o", "-4", "addr", "show")
    for _ in range(1000):
        net = "%s.%d" % (_SUBNETS, random.randrange(256))
        if " %s." % net not in used:
            return net
    raise process.LabError("no free /24 under %s.0.0/16" % _SUBNETS)


class Segment:
    """One LAN segment: a bridge, its gateway address and its hosts."""

    def __init__(self, bridge, net):
        self.bridge = bridge
        #: The bridge's address: where the segment's LAN proxy listens.
        self.gateway = net + ".1"
        #: The segment's network, in CIDR.
        self.subnet = net + ".0/24"
        self._net = net
        #: The segment's :class:`Host` namespaces, in order.
        self.hosts = []

    def next_address(self):
        return "%s.%d" % (self._net, _FIRST_HOST + len(self.hosts))


class Host:
    """A compute host's network namespace."""

    def __init__(self, name, netns, address, segment):
        self.name = name
        self.netns = netns
        #: The host's address on its segment.
        self.address = address
        self.segment = segment

    def enter(self, argv):
        """``argv`` run in this host's network namespace."""
        return ["nsenter", "--net=/run/netns/" + self.netns] + list(argv)


class Lan:
    """``segments`` LAN segments, hosts added with :meth:`add_host`.

    ``proxy_rate_mbit`` shapes each segment's bridge (its LAN proxy's
    port), ``host_rate_mbit`` each host's port.
    """

    def __init__(self, segments, proxy_rate_mbit=1000, host_rate_mbit=1000):
        if segments < 1:
            raise ValueError("a LAN needs at least one segment")
        self.proxy_rate_mbit = proxy_rate_mbit
        self.host_rate_mbit = host_rate_mbit
        self._tag = "%x%x" % (os.getpid(), next(_serial))
        #: What takes back each thing made (:func:`process.undo`).
        self._made = []
        self.segments = []
        try:
            for index in range(segments):
                self.segments.append(self._segment(index))
        except BaseException:
            self.stop()
            raise

    def _name(self, kind, index):
        name = "g%s%s%d" % (kind, self._tag, index)
        if len(name) > 15:
            raise process.LabError("interface name %s too long" % name)
        return name

    def _segment(self, index):
        bridge = self._name("b", index)
        net = _free_segment()
        process.command("ip", "link", "add", bridge, "type", "bridge")
        self._made.append(("ip", "link", "delete", bridge))
        process.command("ip", "addr", "add", net + ".1/24", "dev", bridge)
        process.command("ip", "link", "set", bridge, "up")
        process.command("tc", "qdisc", "add", "dev", bridge, "root",
                        *wan.tbf_arguments(self.proxy_rate_mbit))
        segment = Segment(bridge, net)
        # Accepted even where the machine's FORWARD policy drops (as
        # Docker sets it): bridged and forwarded packets of the segment.
        for match in ("-s", "-d"):
            rule = ["FORWARD", match, segment.subnet, "-m", "comment",
                    "--comment", "gvfs-lab-%d" % os.getpid(), "-j",
                    "ACCEPT"]
            process.command("iptables", "-w", "-I", *rule)
            self._made.append(("iptables", "-w", "-D", *rule))
        return segment

    def add_host(self, segment_index=None):
        """A new host namespace, on segment ``segment_index``.

        Default: the segment with the fewest hosts.
        """
        if segment_index is None:
            segment = min(self.segments, key=lambda s: len(s.hosts))
        else:
            segment = self.segments[segment_index]
        index = sum(len(s.hosts) for s in self.segments)
        netns = "gvfs-host-%s-%d" % (self._tag, index)
        outside, inside = self._name("p", index), self._name("h", index)
        address = segment.next_address()
        wan.namespace_on_veth(netns, outside, inside, address + "/24",
                              self._made)
        process.command("ip", "link", "set", outside, "master",
                        segment.bridge)
        process.command("tc", "qdisc", "add", "dev", outside, "root",
                        *wan.tbf_arguments(self.host_rate_mbit))
        inns = ("ip", "netns", "exec", netns)
        process.command(*inns, "ip", "route", "add", "default", "via",
                        segment.gateway)
        process.command(*inns, "tc", "qdisc", "add", "dev", inside, "root",
                        *wan.tbf_arguments(self.host_rate_mbit))
        host = Host("host-%d" % index, netns, address, segment)
        segment.hosts.append(host)
        return host

    def reach(self, shared_link):
        """Let every segment's hosts cross ``shared_link`` to the DTN."""
        for segment in self.segments:
            process.command("sysctl", "-q", "-w",
                            "net.ipv4.conf.%s.forwarding=1" % segment.bridge)
            shared_link.reach_from(segment.subnet)

    def stop(self):
        # Last made first: a veth's peer goes with it, the namespace
        # after, then a segment's rules and bridge.
        process.undo(self._made)
        self._made = []
