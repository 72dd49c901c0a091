# SPDX-License-Identifier: Apache-2.0
"""toxiproxy between lab hosts: WAN latency, bandwidth limits, cut links."""

import json
import os
import shutil
import urllib.request

from gvfs_lab import process

DEFAULT_BINARY = "/usr/local/bin/toxiproxy-server"
#: The API is local to the lab: never through an HTTP proxy of the
#: environment.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Toxiproxy:
    """A toxiproxy server; its links listen on ``host``.

    ``netns`` runs it in that network namespace (see
    :mod:`gvfs_lab.wan`), where ``host`` is its address.
    """

    def __init__(self, workdir, host="127.0.0.1", netns=None):
        self.host = host
        # In a namespace of its own every port is free.
        self.port = process.free_port() if netns is None else 8474
        binary = shutil.which("toxiproxy-server") or DEFAULT_BINARY
        argv = [binary, "-host", host, "-port", str(self.port)]
        if netns is not None:
            argv = ["ip", "netns", "exec", netns] + argv
        self.process = process.ManagedProcess(
            "toxiproxy", argv, os.path.join(workdir, "toxiproxy.log"))
        try:
            process.wait_for_port(self.port, host, process=self.process)
        except process.LabError:
            self.process.stop()
            raise
        #: The next port a link listens on in the namespace.
        self._next_port = None if netns is None else 20000

    def _free_port(self):
        if self._next_port is None:
            return process.free_port(self.host)
        self._next_port += 1
        return self._next_port

    def _request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            "http://%s:%d%s" % (self.host, self.port, path), data=data,
            method=method, headers={"Content-Type": "application/json"})
        with _DIRECT.open(req, timeout=10) as resp:
            payload = resp.read()
        return json.loads(payload) if payload else None

    def add_link(self, name, upstream_port, upstream_host="127.0.0.1"):
        """A proxy to upstream_host:upstream_port; returns its listen port.

        It listens on :attr:`host`.
        """
        listen = self._free_port()
        self._request("POST", "/proxies", {
            "name": name, "listen": "%s:%d" % (self.host, listen),
            "upstream": "%s:%d" % (upstream_host, upstream_port),
            "enabled": True})
        return listen

    def set_enabled(self, name, enabled):
        """Disabling a link closes its connections and refuses new ones."""
        self._request("POST", "/proxies/%s" % name, {"enabled": enabled})

    def add_toxic(self, name, toxic_type, attributes, stream="downstream",
                  toxic_name=None):
        self._request("POST", "/proxies/%s/toxics" % name, {
            "name": toxic_name or "%s_%s" % (toxic_type, stream),
            "type": toxic_type, "stream": stream, "toxicity": 1.0,
            "attributes": attributes})

    def latency(self, name, rtt_ms):
        """Half the RTT each way."""
        for stream in ("upstream", "downstream"):
            self.add_toxic(name, "latency", {"latency": rtt_ms // 2,
                                             "jitter": 0}, stream)

    def wan(self, name, rtt_ms, rate_mbit):
        """Half the RTT each way and a bandwidth cap in both directions.

        toxiproxy caps each connection of the link on its own.
        """
        for stream in ("upstream", "downstream"):
            self.add_toxic(name, "latency", {"latency": rtt_ms // 2,
                                             "jitter": 0}, stream)
            self.add_toxic(name, "bandwidth",
                           {"rate": int(rate_mbit * 1000 / 8)}, stream)

    def stop(self):
        self.process.stop()
