# SPDX-License-Identifier: Apache-2.0
"""Latency histograms kept as plain counts, exported to Prometheus later.

The proxies and the mount count on their event loops without locks and
without prometheus-client (an optional extra): a scrape reads these
counts and renders them (:func:`gvfs_openstack.metrics_server.histogram`).
"""

import bisect
import dataclasses

#: Upper bounds, in seconds, of the latency histograms' buckets: a LAN
#: round trip to a WAN one behind a busy link.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclasses.dataclass(slots=True)
class Histogram:
    """Observations counted per bucket (not cumulative), and their sum.

    ``counts[i]`` holds those at most ``LATENCY_BUCKETS[i]`` and above
    the bound before; the last holds those above every bound.
    """

    counts: list = dataclasses.field(
        default_factory=lambda: [0] * (len(LATENCY_BUCKETS) + 1))
    sum: float = 0.0

    def observe(self, seconds):
        self.counts[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
        self.sum += seconds

    @property
    def count(self):
        return sum(self.counts)
