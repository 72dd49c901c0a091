# SPDX-License-Identifier: Apache-2.0
"""The emulated WAN link: do one stream and four streams share its rate?

The lab's links (:mod:`gvfs_lab.wan`) shape every connection crossing
them with one token bucket, as a real WAN's bottleneck does; toxiproxy's
bandwidth toxic, which the lab used before, caps each connection on its
own.  For each link rate (20 ms RTT) the same bytes are sent through the
link by one connection and by four in parallel, and, as the baseline of
the same run, by four connections through toxiproxy links each capped at
the rate.  On a shared link the four streams together get what one gets
(``four_vs_one_stream`` about 1); capped per connection they get up to
four times as much.
"""

import socket
import socketserver
import tempfile
import threading
import time

from gvfs_lab import process
from gvfs_lab import toxiproxy
from gvfs_lab import wan
from tools.bench import charts

MIB = 1024 * 1024


class _Sink(socketserver.ThreadingTCPServer):
    """Reads a length and that many bytes, then answers one byte.

    toxiproxy closes both ways at the first shutdown, so the length ends
    a transfer rather than a half close.
    """

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _SinkHandler)
        self.port = self.server_address[1]
        threading.Thread(target=self.serve_forever, daemon=True).start()


class _SinkHandler(socketserver.BaseRequestHandler):
    def handle(self):
        left = int.from_bytes(self.request.recv(8, socket.MSG_WAITALL),
                              "big")
        while left:
            chunk = self.request.recv(min(left, MIB))
            if not chunk:
                return
            left -= len(chunk)
        self.request.sendall(b"k")


def _send_all(host, port, total, streams):
    """Seconds to send ``total`` bytes over ``streams`` connections."""
    share = total // streams
    block = b"\0" * MIB

    def send():
        with socket.create_connection((host, port), timeout=120) as s:
            s.sendall(share.to_bytes(8, "big"))
            left = share
            while left:
                left -= s.send(block[:min(left, MIB)])
            if s.recv(1) != b"k":
                raise OSError("the sink did not take it all")

    start = time.monotonic()
    process.together([send] * streams)
    return time.monotonic() - start


def run(quick=False, plot=None, rtt_ms=20, rates=(100, 500, 1000)):
    seconds_of_link = 2 if quick else 6
    sink = _Sink()
    rows = []
    with tempfile.TemporaryDirectory(prefix="gvfs-bench-") as work:
        for rate in rates:
            total = int(rate * 1e6 / 8 * seconds_of_link)
            link = wan.SharedLink(work, rate, rtt_ms)
            try:
                port = link.add_link("bench", sink.port)
                one = _send_all(link.host, port, total, 1)
                four = _send_all(link.host, port, total, 4)
            finally:
                link.stop()
            tox = toxiproxy.Toxiproxy(work)
            try:
                capped = tox.add_link("capped", sink.port)
                tox.wan("capped", rtt_ms, rate)
                per_connection = _send_all("127.0.0.1", capped, total, 4)
            finally:
                tox.stop()
            rows.append((rate, total / one, total / four,
                         total / per_connection))
    sink.shutdown()
    print("\nwan-link: %d ms RTT, %.0f s of each link's rate sent per run"
          % (rtt_ms, seconds_of_link))
    print("%-10s %14s %14s %22s" % ("link", "1 stream", "4 streams",
                                    "4 capped per conn."))
    for rate, one, four, capped in rows:
        print("%-10s %9.1f MiB/s %9.1f MiB/s %17.1f MiB/s" % (
            "%d Mbit/s" % rate, one / MIB, four / MIB, capped / MIB))
    metrics = {"rtt_ms": rtt_ms, "links": [
        {"rate_mbit": rate, "link_mibps": rate * 1e6 / 8 / MIB,
         "one_stream_mibps": one / MIB, "four_streams_mibps": four / MIB,
         "four_capped_per_connection_mibps": capped / MIB}
        for rate, one, four, capped in rows]}
    worst = min(rows, key=lambda r: min(r[1], r[2]) / max(r[1], r[2]))
    ratios = {
        # The link's worst case: 1 when streams share it as on a WAN.
        "four_vs_one_stream": worst[2] / worst[1],
        "one_stream_vs_link_rate": min(
            r[1] / (r[0] * 1e6 / 8) for r in rows),
        "per_connection_caps_four_vs_one": max(
            r[3] / r[1] for r in rows),
    }
    for name, value in ratios.items():
        print("%-34s %6.2f" % (name, value))
    if plot:
        _plot(rows, plot)
    return {"scenario": "wan-link", "metrics": metrics, "ratios": ratios}


def _plot(rows, path):
    plt = charts.pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    width = 0.25
    xs = range(len(rows))
    for i, (label, column) in enumerate((
            ("1 stream, shared link", 1), ("4 streams, shared link", 2),
            ("4 streams, toxiproxy caps", 3))):
        ax.bar([x + (i - 1) * width for x in xs],
               [row[column] / MIB for row in rows], width, label=label)
    ax.plot([x for x in xs], [row[0] * 1e6 / 8 / MIB for row in rows],
            "k_", markersize=40, label="link rate")
    ax.set_xticks(list(xs))
    ax.set_xticklabels(["%d Mbit/s" % row[0] for row in rows])
    ax.set_ylabel("MiB/s, all streams together")
    ax.legend(fontsize=8)
    charts.save(fig, path)
