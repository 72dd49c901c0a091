# SPDX-License-Identifier: Apache-2.0
"""Many compute hosts in network namespaces, behind a LAN proxy or none.

Three hosts, each its own namespace with a client proxy, a cache and a
FUSE mount, replay one recorded boot of a golden image at once, across
an emulated WAN from a DTN whose server proxy has two workers.  Behind
a LAN proxy every host reads the image's bytes, and the boot set crosses
the WAN once (the LAN proxy joins the hosts' fetches of a block into
one), as it does behind two LAN proxies that share a site proxy; with
no LAN proxy each host's reads cross the WAN on their own,
routed through the site's gateway.  A host that boots later reads
the image from the LAN proxy, not the DTN.
"""

import os
import random

import pytest

from gvfs_lab import replay
from gvfs_lab import site as site_lab
from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_lab.topology import Lab
from tests.functional.conftest import random_file

MIB = 1024 * 1024
BLOCK = 64 * 1024
IMAGE = "golden.img"
IMAGE_MIB = 32
#: Each host's cache, as a compute node's; no image stream, so that
#: what crosses the WAN is the boot's reads alone.
CACHE = {"capacity_mb": 128, "consistency": "immutable",
         "stream_images": False}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with Lab(str(tmp_path_factory.mktemp("many-hosts")), tunnel="tcp",
             wan=(10, 200), server_workers=2) as lab:
        path = os.path.join(lab.export, IMAGE)
        random_file(path, IMAGE_MIB * MIB)
        os.chown(path, FILE_UID, FILE_GID)
        yield lab


@pytest.fixture(scope="module")
def trace():
    """A boot: 96 scattered blocks, 2 ms of the guest's work apart."""
    blocks = random.Random(44).sample(range(IMAGE_MIB * MIB // BLOCK), 96)
    return replay.Trace(BLOCK, tuple((b, i * 0.002)
                                     for i, b in enumerate(blocks)))


def _sent_by_dtn(lab):
    return lab.server_proxy.stats()["downstream_bytes_out"]


def _boot_together(lab, site, trace):
    """Every host replays ``trace``; bytes the DTN sent meanwhile."""
    expected = replay.expected_digest(os.path.join(lab.export, IMAGE), trace)
    before = _sent_by_dtn(lab)
    results = replay.replay_together(
        [host.path(IMAGE) for host in site.hosts], trace)
    assert [r.digest for r in results] == [expected] * len(site.hosts)
    assert all(r.bytes_read == trace.bytes for r in results)
    return _sent_by_dtn(lab) - before


def test_hosts_behind_a_lan_proxy_fetch_each_block_once(lab, trace):
    with site_lab.Site(lab, hosts=3, lan_proxies=1, cache=CACHE) as site:
        assert len({host.namespace.netns for host in site.hosts}) == 3
        crossed = _boot_together(lab, site, trace)
        # Headers, lookups and a few blocks read ahead: some per cent,
        # not a second copy.
        assert trace.bytes <= crossed <= 1.25 * trace.bytes, crossed
        lan_proxy, = site.lan_proxies
        served = lan_proxy.stats()["downstream_bytes_out"]
        assert served >= 3 * trace.bytes, served
        for host in site.hosts:
            stats = host.proxy.stats()
            assert stats["upstream_bytes_in"] >= trace.bytes, stats
        # A host that boots later catches up from the LAN proxy.
        late = site.add_host()
        before = _sent_by_dtn(lab)
        result = replay.replay(late.path(IMAGE), trace)
        assert result.digest == replay.expected_digest(
            os.path.join(lab.export, IMAGE), trace)
        assert _sent_by_dtn(lab) - before < 0.05 * trace.bytes


def test_two_lan_proxies_behind_a_site_proxy_cross_once(lab, trace):
    with site_lab.Site(lab, hosts=4, lan_proxies=2, cache=CACHE) as site:
        assert site.site_proxy is not None
        assert {h.namespace.segment.gateway for h in site.hosts} == {
            s.gateway for s in site.lan.segments}
        crossed = _boot_together(lab, site, trace)
        assert trace.bytes <= crossed <= 1.25 * trace.bytes, crossed
        for lan_proxy in site.lan_proxies:
            served = lan_proxy.stats()["downstream_bytes_out"]
            assert served >= 2 * trace.bytes, served


def test_hosts_without_a_lan_proxy_cross_the_wan_each(lab, trace):
    with site_lab.Site(lab, hosts=2, lan_proxies=0, cache=CACHE) as site:
        crossed = _boot_together(lab, site, trace)
        assert crossed >= 2 * trace.bytes, crossed
        workers = lab.server_proxy.stats()["workers"]
        assert all(w["connections"] > 0 for w in workers), workers
