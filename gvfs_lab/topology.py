# SPDX-License-Identifier: Apache-2.0
"""The loopback lab: a DTN and a client node, built from real parts.

    DTN:          NFS-Ganesha <- server gvfs-proxy <- sshd
    client node:  client gvfs-proxy (what NFS clients talk to)
    between them: a tunnel (tcp | tls | ssh), optionally through a
                  toxiproxy link that can add WAN delay or be cut

Functional tests, benchmarks and the demo all build their setups here.
Everything started is stopped by PID on ``stop()``, which also runs when
the ``with`` block fails.
"""

import configparser
import contextlib
import os
import signal
import sys

from gvfs_lab import certs
from gvfs_lab import fusemount
from gvfs_lab import ganesha
from gvfs_lab import process
from gvfs_lab import sshd
from gvfs_lab import toxiproxy
from gvfs_lab import wan as wan_link
from gvfs_openstack.proxy import control

#: The file account that owns the export's data (the GVFS paper's
#: "logical user account" on the server side).
FILE_UID = 4242
FILE_GID = 4242


class Proxy:
    """A ``gvfs-proxy`` process with a generated configuration.

    ``host`` (a :class:`lan.Host`) runs it in that host's network
    namespace, where its port is the host's own.
    """

    def __init__(self, workdir, name, sections, host=None):
        self.name = name
        self.port = sections["listen"]["port"]
        self.control_socket = os.path.join(workdir, name + ".sock")
        sections.setdefault("proxy", {})["control_socket"] = \
            self.control_socket
        # One process unless a test asks for workers: what a test
        # reads of a proxy (its log, its counters) is then one's.
        sections["proxy"].setdefault("workers", 1)
        self.config = os.path.join(workdir, name + ".conf")
        #: Port of its Prometheus endpoint, or None.
        self.metrics_port = sections.get("metrics", {}).get("port")
        parser = configparser.ConfigParser()
        for section, values in sections.items():
            parser[section] = {k: str(v) for k, v in values.items()}
        with open(self.config, "w") as f:
            parser.write(f)
        argv = [sys.executable, "-m", "gvfs_openstack.cmd.proxy",
                "--config-file", self.config, "serve"]
        log = os.path.join(workdir, name + ".log")
        if host is None:
            self.process = process.start_listening(
                name, argv, log, [self.port],
                sections["listen"].get("host", "127.0.0.1"))
        else:
            # Its port is not ours to probe: its control socket tells.
            self.process = process.ManagedProcess(name, host.enter(argv),
                                                  log)
        # The proxy opens its control socket after its NFS port.  Until
        # it answers: after a SIGKILL the old proxy's socket file is still
        # there, refusing connections.
        try:
            process.wait_until(
                self._answers,
                "its control socket at %s" % self.control_socket,
                process=self.process)
        except process.LabError:
            self.process.stop()
            raise

    def _answers(self):
        try:
            control.request(self.control_socket, "stats", timeout=5.0)
        except control.ControlError:
            return False
        return True

    def stats(self):
        return control.request(self.control_socket, "stats")

    def stop(self):
        # A write-back proxy writes its dirty data upstream first.
        return self.process.stop(timeout=120.0)


class Lab(process.Part):
    """One DTN and one client node joined by a tunnel.

    ``tunnel`` is ``tcp``, ``tls`` or ``ssh``; with ``link=True`` the
    tunnel runs through toxiproxy (link name ``"wan"``), whose toxics cap
    each connection on its own.  With ``wan=(rtt_ms, rate_mbit)`` it
    crosses an emulated WAN link whose rate all its connections share
    (:class:`wan.SharedLink`, route ``"wan"``, as :attr:`shared_link`);
    :attr:`toxiproxy` is then the link's, for faults.
    """

    #: Ganesha squashes every caller to the file account, as a DTN's
    #: export does (deployment guide); False passes identities through.
    squash_all = True

    def __init__(self, workdir, tunnel="tcp", link=False,
                 upstream_connections=2, cache=None, wan=None,
                 write_behind_mb=0, metrics=False, server_workers=1):
        if tunnel not in ("tcp", "tls", "ssh"):
            raise ValueError("unknown tunnel %r" % tunnel)
        self.workdir = workdir
        self.tunnel = tunnel
        self.link = link or wan is not None
        self.wan = wan
        self.shared_link = None
        self.upstream_connections = upstream_connections
        #: The client proxies' ``[proxy] write_behind_mb``.
        self.write_behind_mb = write_behind_mb
        #: Whether both proxies serve Prometheus metrics.
        self.metrics = metrics
        #: The server proxy's ``[proxy] workers``.
        self.server_workers = server_workers
        self.export = os.path.join(workdir, "export")
        #: Options of the client proxy's [cache] section; None: no cache.
        #: String values may name the export as ``{export}``.
        self.cache = None if cache is None else dict(
            {"directory": os.path.join(workdir, "cache")},
            **{key: value.format(export=self.export)
               if isinstance(value, str) else value
               for key, value in cache.items()})
        self._stack = contextlib.ExitStack()
        self.toxiproxy = None
        self.sshd = None

    def _keep(self, part):
        self._stack.callback(part.stop)
        return part

    def start(self):
        os.makedirs(self.workdir, exist_ok=True)
        self._keep(ganesha.Rpcbind(self.workdir))
        self.ganesha = self._keep(ganesha.Ganesha(
            os.path.join(self.workdir, "ganesha"), self.export,
            owner=(FILE_UID, FILE_GID), squash_all=self.squash_all))
        if self.wan is not None:
            rtt_ms, rate_mbit = self.wan
            self.shared_link = self._keep(wan_link.SharedLink(
                self.workdir, rate_mbit, rtt_ms))
            self.toxiproxy = self.shared_link.toxiproxy
        elif self.link:
            self.toxiproxy = self._keep(toxiproxy.Toxiproxy(self.workdir))
        if self.tunnel == "ssh":
            self.sshd = self._keep(sshd.Sshd(os.path.join(self.workdir,
                                                          "sshd")))
        self.pki = certs.make_pki(os.path.join(self.workdir, "pki")) \
            if self.tunnel == "tls" else None
        self._server_config = self._server_sections()
        if self.metrics:
            self._server_config["metrics"] = {"port": process.free_port()}
        self.server_proxy = self._keep(Proxy(self.workdir, "server-proxy",
                                             self._server_config))
        if self.sshd is not None:
            # As the deployment guide has it: the key forwards to the
            # server proxy and does nothing else.
            self.sshd.restrict_key(self.server_proxy.port)
        self._wan_target = self.sshd.port if self.tunnel == "ssh" else \
            self.server_proxy.port
        #: Where the client proxies reach the DTN.
        self._wan_host = "127.0.0.1"
        if self.shared_link is not None:
            self._wan_target = self.shared_link.add_link("wan",
                                                         self._wan_target)
            self._wan_host = self.shared_link.host
            if self.sshd is not None:
                self.sshd.known_as(self._wan_host, self._wan_target)
        elif self.link:
            self._wan_target = self.toxiproxy.add_link("wan",
                                                       self._wan_target)
        self._client_config = self._client_sections(self.cache)
        if self.metrics:
            self._client_config["metrics"] = {"port": process.free_port()}
        self.client_proxy = self._keep(Proxy(self.workdir, "client-proxy",
                                             self._client_config))

    @property
    def dtn_endpoint(self):
        """``(host, port)`` where client proxies reach the DTN."""
        return self._wan_host, self._wan_target

    def _server_sections(self):
        peers = ["127.0.0.1/32"]
        if self.shared_link is not None:
            # Across the link, the tunnel comes from its namespace.
            peers.append(self.shared_link.host + "/32")
        listen = {"host": "127.0.0.1", "port": process.free_port(),
                  "allowed_peers": ",".join(peers)}
        if self.tunnel == "tls":
            listen.update(tls_cert=self.pki["server"][0],
                          tls_key=self.pki["server"][1],
                          tls_ca=self.pki["ca"])
        return {
            "proxy": {"role": "server", "workers": self.server_workers},
            "listen": listen,
            "server": {"nfs_port": self.ganesha.nfs_port,
                       "mount_port": self.ganesha.mount_port,
                       "exports": self.export, "squash_uid": FILE_UID,
                       "squash_gid": FILE_GID},
        }

    def _client_sections(self, cache):
        target = self._wan_target
        upstream = {"tunnel": self.tunnel, "host": "127.0.0.1",
                    "port": self.server_proxy.port,
                    "connections": self.upstream_connections,
                    "reconnect_max_delay": 1.0}
        if self.tunnel == "tcp":
            upstream.update(host=self._wan_host, port=target)
        elif self.tunnel == "tls":
            upstream.update(host=self._wan_host, port=target,
                            tls_cert=self.pki["client"][0],
                            tls_key=self.pki["client"][1],
                            tls_ca=self.pki["ca"])
            if self.shared_link is not None:
                # The certificate names the DTN, not the link's address.
                upstream["tls_server_name"] = "localhost"
        else:
            upstream.update(ssh_host=self._wan_host, ssh_port=target,
                            ssh_user=self.sshd.user, ssh_key=self.sshd.key,
                            ssh_known_hosts=self.sshd.known_hosts)
        sections = {
            "proxy": {"role": "client",
                      "write_behind_mb": self.write_behind_mb},
            "listen": {"host": "127.0.0.1", "port": process.free_port()},
            "upstream": upstream,
        }
        if cache is not None:
            sections["cache"] = cache
        return sections

    def add_client(self, name, cache=None, listen=None, **proxy_options):
        """Another client proxy over the tunnel (and link) to the DTN.

        Another compute node's proxy; ``cache`` is its ``[cache]`` section
        (None: none, every read crosses the link, as plain NFS would);
        ``listen`` is added to its ``[listen]`` section and
        ``proxy_options`` to its ``[proxy]`` section.
        """
        sections = self._client_sections(self._own_cache(name, cache))
        sections["listen"].update(listen or {})
        sections["proxy"].update(proxy_options)
        return self._keep(Proxy(self.workdir, name, sections))

    def _own_cache(self, name, cache):
        """``cache`` options with a cache directory for proxy ``name``."""
        if cache is None:
            return None
        return dict({"directory": os.path.join(self.workdir,
                                               name + "-cache")}, **cache)

    def add_leaf(self, name, cache=None, upstream=None, listen=None):
        """Another client proxy whose next hop is the client proxy.

        With a cache on both, the client proxy is a LAN proxy: a second
        level cache shared by the leaves (the GVFS paper's WAN-S3 setup).
        ``upstream``: another of the lab's proxies as the next hop;
        ``listen`` is added to its ``[listen]`` section.
        """
        sections = {
            "proxy": {"role": "client"},
            "listen": dict({"host": "127.0.0.1",
                            "port": process.free_port()}, **(listen or {})),
            "upstream": {"tunnel": "tcp", "host": "127.0.0.1",
                         "port": (upstream or self.client_proxy).port,
                         "reconnect_max_delay": 1.0},
        }
        if cache is not None:
            sections["cache"] = self._own_cache(name, cache)
        return self._keep(Proxy(self.workdir, name, sections))

    def mount(self, mountpoint, proxy=None, name="fuse-mount", export=None,
              **options):
        """``gvfs-proxy mount`` of the export at ``mountpoint``.

        Through ``proxy`` (default: the client proxy), of ``export``
        (default: the lab's); ``options`` are ``[mount]`` options.
        Unmounted when the lab stops.
        """
        proxy = proxy or self.client_proxy
        return self._keep(fusemount.FuseMount(
            self.workdir, name, proxy.config, export or self.export,
            mountpoint, options))

    def gvfs_store_options(self, subdir, mount_base, **extra):
        """Options of a ``gvfs`` glance store that mounts this export.

        The store mounts it itself (FUSE, through the client proxy) and
        keeps its images in ``subdir``, made now for the file account.
        """
        path = os.path.join(self.export, subdir)
        os.makedirs(path, exist_ok=True)
        os.chown(path, FILE_UID, FILE_GID)
        return dict({
            "gvfs_store_mount_type": "fuse",
            "gvfs_store_proxy": "127.0.0.1:%d" % self.client_proxy.port,
            "gvfs_store_export": self.export,
            "gvfs_store_datadir": subdir,
            "gvfs_store_mount_point_base": mount_base,
            # Longer than the lab mounts' 1 s entry and attribute caches.
            "gvfs_store_delete_grace": 1.5}, **extra)

    def leaf_url(self, leaf, path):
        return ganesha.nfs_url(self.export, path, leaf.port, leaf.port)

    def restart_client_proxy(self, kill=False, cache=None):
        """Stop the client proxy and start it again.

        The new one has the same configuration, port and cache directory,
        with ``cache`` options changed if given; ``kill`` stops the old
        one with SIGKILL instead of SIGTERM.
        """
        if kill:
            self.client_proxy.process.signal(signal.SIGKILL)
        self.client_proxy.stop()
        if cache:
            self.cache.update(cache)
        self.client_proxy = Proxy(self.workdir, "client-proxy",
                                  self._client_config)
        self._stack.callback(self.client_proxy.stop)
        return self.client_proxy

    def restart_server_proxy(self, kill=False):
        """Stop the server proxy and start it again.

        The new one has the same configuration and port, so the client
        proxy finds it by reconnecting, as after a DTN service restart;
        ``kill`` stops the old one with SIGKILL instead of SIGTERM.
        """
        if kill:
            self.server_proxy.process.signal(signal.SIGKILL)
        self.server_proxy.stop()
        # A killed proxy leaves its control socket: waiting for the new
        # one's must not be satisfied by the old file.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.server_proxy.control_socket)
        self.server_proxy = Proxy(self.workdir, "server-proxy",
                                  self._server_config)
        self._stack.callback(self.server_proxy.stop)
        return self.server_proxy

    def cut_tunnel(self):
        """Break every tunnel connection (the client proxy reconnects)."""
        if self.link:
            self.toxiproxy.set_enabled("wan", False)
            self.toxiproxy.set_enabled("wan", True)
        elif self.tunnel == "ssh":
            for pid in self.sshd.session_pids():
                os.kill(pid, 9)
        else:
            raise process.LabError("cutting a tunnel needs link=True or ssh")

    # --- URLs for libnfs clients --------------------------------------------

    def direct_url(self, path):
        """Straight to Ganesha (the baseline)."""
        return self.ganesha.url(path)

    def server_proxy_url(self, path):
        return ganesha.nfs_url(self.export, path, self.server_proxy.port,
                               self.server_proxy.port)

    def client_url(self, path, proxy=None):
        """Through the client proxy, the tunnel and the server proxy.

        ``proxy``: another client proxy of the lab (:meth:`add_client`).
        """
        port = (proxy or self.client_proxy).port
        return ganesha.nfs_url(self.export, path, port, port)

    def stop(self):
        self._stack.close()
