# SPDX-License-Identifier: Apache-2.0
"""Prometheus text, read back as a Prometheus server reads it.

The tests of the proxies', conductor's and gvfs-api's metrics parse
with prometheus_client's own parser and look samples up by name and
labels.
"""

import urllib.request

from prometheus_client import parser


def samples(text):
    """``{(name, ((label, value), ...) sorted): value}`` of ``text``."""
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in parser.text_string_to_metric_families(text)
            for s in family.samples}


def scrape(port):
    """:func:`samples` of ``GET /metrics`` on loopback ``port``."""
    url = "http://127.0.0.1:%d/metrics" % port
    with urllib.request.urlopen(url, timeout=30) as answer:
        assert answer.status == 200
        return samples(answer.read().decode())
