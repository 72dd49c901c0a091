# SPDX-License-Identifier: Apache-2.0
"""The boot storm model: the bounds it must reproduce, worked by hand."""

import dataclasses

import pytest

from tools.bench import storm_model
from tools.bench.storm_model import Costs
from tools.bench.storm_model import Tree

BLOCK_MBIT = storm_model.BLOCK * 8 / 1e6
#: 100 scattered blocks, 10 ms of the guest's work apart.
TRACE = [(7 * i % 1000, 0.01 * i) for i in range(100)]
FREE = Costs(host=0.0, lan=0.0, dtn=0.0)


def _tree(**options):
    return Tree(**dict(dict(hosts=1, lan_proxies=1, wan_mbit=1e6,
                            wan_rtt=0.0, lan_mbit=1e6, host_mbit=1e6,
                            lan_delay=0.0), **options))


def test_where_reads_cost_nothing_a_boot_takes_its_recording():
    storm = storm_model.simulate(_tree(), FREE, TRACE)
    assert storm.last == pytest.approx(0.99, abs=0.001)
    assert storm.wan_blocks == 100


def test_without_a_profile_head_start_each_miss_is_a_round_trip():
    # The profile takes two round trips to load: the guest's first
    # reads go out on their own, one WAN round trip each.
    storm = storm_model.simulate(_tree(wan_rtt=0.1), FREE, TRACE)
    assert 0.99 + 0.1 <= storm.last <= 0.99 + 0.5


def test_hosts_behind_a_lan_proxy_share_one_fetch_per_block():
    storm = storm_model.simulate(_tree(hosts=16, wan_rtt=0.05), FREE,
                                 TRACE)
    assert storm.wan_blocks == 100
    direct = storm_model.simulate(_tree(hosts=16, lan_proxies=0,
                                        wan_rtt=0.05), FREE, TRACE)
    assert direct.wan_blocks == 1600


def test_a_shared_wan_bounds_hosts_that_cross_it_alone():
    # 8 hosts x 100 blocks at 100 blocks per second of link.
    tree = _tree(hosts=8, lan_proxies=0, wan_mbit=100 * BLOCK_MBIT)
    storm = storm_model.simulate(tree, FREE, TRACE)
    assert 8.0 <= storm.last <= 8.0 + 0.2


def test_shared_cores_bound_a_storm_by_the_cpu_it_needs():
    # 1 ms of host CPU per block, 16 hosts, two cores: 0.8 s at least.
    costs = Costs(host=0.001, lan=0.0, dtn=0.0)
    busy = storm_model.simulate(_tree(hosts=16, shared_cores=2,
                                      wan_rtt=0.0), costs,
                                [(b, 0.0) for b, _ in TRACE])
    assert 0.8 <= busy.last <= 0.8 * 1.1
    # On cores of their own the hosts do not wait for each other.
    own = storm_model.simulate(_tree(hosts=16, wan_rtt=0.0), costs,
                               [(b, 0.0) for b, _ in TRACE])
    assert own.last <= 0.1 * 1.1


def test_a_lan_proxys_cores_bound_what_it_serves():
    costs = Costs(host=0.0, lan=0.001, dtn=0.0)
    storm = storm_model.simulate(_tree(hosts=20, lan_cores=1), costs,
                                 [(b, 0.0) for b, _ in TRACE])
    assert 2.0 <= storm.last <= 2.0 * 1.1


def test_calibration_splits_each_tiers_cpu_into_its_costs():
    single = {"hosts": 1, "lan_proxies": 1, "read_seconds": 0.1,
              "cpu": {"lan": 0.05}}

    def loaded(hosts, host_cpu, lan_cpu):
        return {"hosts": hosts, "lan_proxies": 1, "wan_bytes": 100 * 65536,
                "machine_cpu": host_cpu + lan_cpu + 0.1,
                "cpu": {"lan": lan_cpu, "server": 0.1}}

    # Per block and host: 2 ms with 8 hosts, 3 ms with 16 on the cores.
    costs = storm_model.calibrate(single, [
        loaded(16, 16 * 100 * 0.003, 0.05 + 15 * 100 * 0.0002),
        loaded(8, 8 * 100 * 0.002, 0.03)], 100)
    assert costs == Costs(host=pytest.approx(0.002 - 0.001 - 7 * 0.000125),
                          host_per_peer=pytest.approx(0.000125),
                          read=pytest.approx(0.001),
                          lan=pytest.approx(0.0002),
                          lan_fetch=pytest.approx(0.0005 - 0.0002),
                          dtn=pytest.approx(0.1 / 100))


def test_a_site_proxy_lets_a_block_cross_the_wan_once_for_all_lans():
    tree = _tree(hosts=8, lan_proxies=4, wan_rtt=0.05)
    assert storm_model.simulate(tree, FREE, TRACE).wan_blocks == 100
    apart = dataclasses.replace(tree, site_proxy=False)
    assert storm_model.simulate(apart, FREE, TRACE).wan_blocks == 400


def test_each_read_of_a_present_block_costs_the_hosts_cpu():
    costs = Costs(host=0.0, lan=0.0, dtn=0.0, read=0.01)
    storm = storm_model.simulate(_tree(), costs, [(b, 0.0) for b, _ in TRACE])
    assert storm.last == pytest.approx(1.0, abs=0.01)
