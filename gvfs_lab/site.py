# SPDX-License-Identifier: Apache-2.0
"""A site of many compute hosts behind LAN proxies, across the lab's WAN.

The GVFS hierarchy at the scale of a boot storm::

    DTN (the lab's Ganesha and server proxy)
      |  the emulated WAN (wan.SharedLink): one rate, one round trip
    the site proxy: a client proxy with a cache (with 2 LAN proxies or
      |  more), so that a block crosses the WAN once for them all
    LAN proxies: client proxies with a cache, one per LAN segment
      |  the LAN (lan.Lan): each proxy's port and each host's shaped
    compute hosts: a client proxy with its cache, and a FUSE mount

Each compute host is a network namespace (:mod:`gvfs_lab.lan`) running
the same two processes as a real compute node, configured as the
deployment guide has them; with no LAN proxies the hosts reach the DTN
across the WAN themselves.  What the hosts read is up to the caller --
a recorded boot through :mod:`gvfs_lab.replay` in the storm benchmark.

A site is built on a running :class:`topology.Lab` with ``wan`` set and
stopped on its own, so one DTN serves one site after another, each
with empty caches.
"""

import concurrent.futures
import contextlib
import itertools
import os

from gvfs_lab import fusemount
from gvfs_lab import lan
from gvfs_lab import process
from gvfs_lab import topology

#: The port of each host's client proxy, in the host's own namespace.
HOST_PORT = 2049
#: Hosts started at once: each start is a Python process's imports.
STARTING_AT_ONCE = 8
_serial = itertools.count()


class ComputeHost:
    """One compute host: its client proxy and its mount of the export."""

    def __init__(self, lab, workdir, namespace, upstream, cache,
                 mount_options):
        self.namespace = namespace
        name = namespace.name
        host, port = upstream
        sections = {
            "proxy": {"role": "client"},
            "listen": {"host": "127.0.0.1", "port": HOST_PORT},
            "upstream": {"tunnel": "tcp", "host": host, "port": port,
                         "reconnect_max_delay": 1.0},
            "cache": dict(cache, directory=os.path.join(
                workdir, name + "-cache")),
        }
        self.proxy = topology.Proxy(workdir, name, sections,
                                    host=namespace)
        try:
            self.mount = fusemount.FuseMount(
                workdir, name + "-mount", self.proxy.config, lab.export,
                os.path.join(workdir, "mnt", name), mount_options,
                host=namespace)
        except BaseException:
            self.proxy.stop()
            raise

    def path(self, name):
        """The export's file ``name`` as this host's guests read it."""
        return os.path.join(self.mount.mountpoint, name)

    def stop(self):
        self.mount.stop()
        self.proxy.stop()


class Site(process.Part):
    """``hosts`` compute hosts behind ``lan_proxies`` LAN proxies.

    ``cache`` is each host's ``[cache]`` section, ``lan_cache`` each LAN
    proxy's (default: ``cache``), ``mount_options`` each mount's
    ``[mount]`` section.  With ``lan_proxies=0`` the hosts cross the WAN
    to the DTN; otherwise host *i* is on segment *i* mod
    ``lan_proxies``, and with more than one LAN proxy they reach the
    DTN through a site proxy (with ``lan_cache``) unless ``site_proxy``
    is False.  The rates are of the LAN's ports (:class:`lan.Lan`).
    """

    def __init__(self, lab, hosts, lan_proxies, cache, lan_cache=None,
                 mount_options=None, lan_rate_mbit=1000,
                 host_rate_mbit=1000, site_proxy=None):
        if lab.shared_link is None:
            raise ValueError("a site needs a lab with a wan")
        if hosts < 1 or lan_proxies < 0:
            raise ValueError("a site needs hosts, and LAN proxies >= 0")
        self.lab = lab
        self.name = "site%d" % next(_serial)
        self.workdir = os.path.join(lab.workdir, self.name)
        self.lan_proxy_count = lan_proxies
        self._host_count = hosts
        self._cache = cache
        self._lan_cache = cache if lan_cache is None else lan_cache
        self._mount_options = mount_options or {}
        self._rates = lan_rate_mbit, host_rate_mbit
        self._want_site_proxy = lan_proxies > 1 if site_proxy is None \
            else site_proxy and lan_proxies > 0
        #: The site proxy (:class:`topology.Proxy`), or None.
        self.site_proxy = None
        self._stack = contextlib.ExitStack()
        #: The LAN proxies (:class:`topology.Proxy`), by segment.
        self.lan_proxies = []
        #: The :class:`ComputeHost` s, in order.
        self.hosts = []

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        proxy_rate, host_rate = self._rates
        self.lan = lan.Lan(max(1, self.lan_proxy_count), proxy_rate,
                           host_rate)
        self._stack.callback(self.lan.stop)
        if self.lan_proxy_count == 0:
            self.lan.reach(self.lab.shared_link)
        if self._want_site_proxy:
            self.site_proxy = self.lab.add_client(
                "%s-site" % self.name, cache=self._lan_cache)
            self._stack.callback(self.site_proxy.stop)
        for index, segment in enumerate(self.lan.segments[
                :self.lan_proxy_count]):
            name = "%s-lan-%d" % (self.name, index)
            listen = {"host": segment.gateway,
                      "allowed_peers": segment.subnet}
            if self.site_proxy is None:
                proxy = self.lab.add_client(name, cache=self._lan_cache,
                                            listen=listen)
            else:
                proxy = self.lab.add_leaf(name, cache=self._lan_cache,
                                          upstream=self.site_proxy,
                                          listen=listen)
            self._stack.callback(proxy.stop)
            self.lan_proxies.append(proxy)
        namespaces = [self.lan.add_host(i % len(self.lan.segments))
                      for i in range(self._host_count)]
        with concurrent.futures.ThreadPoolExecutor(
                STARTING_AT_ONCE) as pool:
            starting = [pool.submit(self._start_host, namespace)
                        for namespace in namespaces]
            failed = None
            for future in starting:
                try:
                    host = future.result()
                except Exception as e:
                    failed = failed or e
                    continue
                self._stack.callback(host.stop)
                self.hosts.append(host)
        if failed is not None:
            raise failed

    def add_host(self):
        """One more host, on the segment with the fewest: a late joiner."""
        host = self._start_host(self.lan.add_host())
        self._stack.callback(host.stop)
        self.hosts.append(host)
        return host

    def _upstream(self, namespace):
        if not self.lan_proxies:
            return self.lab.dtn_endpoint
        segment = self.lan.segments.index(namespace.segment)
        return namespace.segment.gateway, self.lan_proxies[segment].port

    def _start_host(self, namespace):
        return ComputeHost(self.lab, self.workdir, namespace,
                           self._upstream(namespace), self._cache,
                           self._mount_options)

    def stop(self):
        self._stack.close()
