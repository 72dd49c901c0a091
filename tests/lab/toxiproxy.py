# SPDX-License-Identifier: Apache-2.0
"""toxiproxy between lab hosts: WAN latency, bandwidth limits, cut links."""

import json
import os
import shutil
import urllib.request

from tests.lab import process

DEFAULT_BINARY = "/usr/local/bin/toxiproxy-server"


class Toxiproxy:
    def __init__(self, workdir):
        self.port = process.free_port()
        binary = shutil.which("toxiproxy-server") or DEFAULT_BINARY
        self.process = process.start_listening(
            "toxiproxy", [binary, "-host", "127.0.0.1", "-port",
                          str(self.port)],
            os.path.join(workdir, "toxiproxy.log"), [self.port])

    def _request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            "http://127.0.0.1:%d%s" % (self.port, path), data=data,
            method=method, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as resp:
            payload = resp.read()
        return json.loads(payload) if payload else None

    def add_link(self, name, upstream_port, upstream_host="127.0.0.1"):
        """A proxy to upstream_host:upstream_port; returns its listen port."""
        listen = process.free_port()
        self._request("POST", "/proxies", {
            "name": name, "listen": "127.0.0.1:%d" % listen,
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
