# SPDX-License-Identifier: Apache-2.0
"""The proxy's counters: typed, and reported only for the parts it has."""

import pytest

from gvfs_openstack.proxy import counters


def test_a_report_names_only_the_parts_a_proxy_has():
    proxy = counters.Counters()
    proxy.part(counters.ListenerCounters).connections += 2
    proxy.part(counters.RoleCounters).calls["NFS3.READ"] = 5
    report = proxy.as_dict()
    assert report["connections"] == 2
    assert report["calls"] == {"NFS3.READ": 5}
    assert report["drc_hits"] == 0
    assert "cache_hits" not in report
    assert "started_at" in report


def test_one_part_of_a_kind_per_proxy():
    proxy = counters.Counters()
    assert proxy.part(counters.UpstreamCounters) is \
        proxy.part(counters.UpstreamCounters)


def test_a_misspelt_counter_fails_at_once():
    with pytest.raises(AttributeError):
        counters.CacheCounters().cache_hit = 1


def test_export_counters_are_made_on_first_use():
    cache = counters.CacheCounters()
    cache.export("/srv/images")["hits"] += 1
    assert cache.cache_exports == {"/srv/images": {
        "hits": 1, "misses": 0, "bytes_local": 0, "bytes_fetched": 0,
        "bytes_zero_map": 0, "dirty_bytes": 0}}
