# SPDX-License-Identifier: Apache-2.0
"""The client proxy's block disk cache, on the lab with real Ganesha."""

import asyncio
import json
import os
import subprocess

import pytest

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from tests.functional.conftest import nfs_cp
from tests.functional.conftest import random_file
from tests.functional.conftest import sha256

MIB = 1024 * 1024


def fetched(lab):
    return lab.client_proxy.stats()["cache_bytes_fetched"]


def read_back(lab, name, dest):
    if os.path.exists(dest):
        os.unlink(dest)
    out = nfs_cp(lab.client_url(name), str(dest))
    assert out.returncode == 0, out.stderr
    return sha256(dest)


def put(lab, src, name):
    out = nfs_cp(str(src), lab.client_url(name))
    assert out.returncode == 0, out.stderr


@pytest.fixture(scope="module")
def cached_lab(lab_factory):
    return lab_factory("tcp", cache={"capacity_mb": 256,
                                     "coherence_window": 0})


def test_warm_read_fetches_nothing_upstream(cached_lab, tmp_path):
    lab = cached_lab
    src = tmp_path / "src"
    expected = random_file(src, 64 * MIB + 12345)
    put(lab, src, "warm.bin")
    before = fetched(lab)
    assert read_back(lab, "warm.bin", tmp_path / "cold") == expected
    cold = fetched(lab) - before
    assert cold >= 64 * MIB
    before_stats = lab.client_proxy.stats()
    assert read_back(lab, "warm.bin", tmp_path / "warm") == expected
    after = lab.client_proxy.stats()
    assert after["cache_bytes_fetched"] == before_stats["cache_bytes_fetched"]
    assert after["cache_bytes_local"] - before_stats["cache_bytes_local"] \
        >= 64 * MIB
    # Only metadata crossed the tunnel: MOUNT, LOOKUP, GETATTR...
    assert after["upstream_bytes_in"] - before_stats["upstream_bytes_in"] \
        < 64 * 1024


def test_a_warm_cache_stays_warm_across_a_proxy_kill(cached_lab, tmp_path):
    lab = cached_lab
    src = tmp_path / "src"
    expected = random_file(src, 16 * MIB)
    put(lab, src, "restart.bin")
    read_back(lab, "restart.bin", tmp_path / "first")
    lab.restart_client_proxy(kill=True)
    assert read_back(lab, "restart.bin", tmp_path / "again") == expected
    assert lab.client_proxy.stats()["cache_bytes_fetched"] == 0


def _rewrite_on_the_dtn(lab, name, offset, data):
    """Change a file behind the client proxy's back.

    Straight to Ganesha, as the file account.
    """
    async def scenario():
        async with NfsClient("127.0.0.1", lab.ganesha.nfs_port,
                             lab.ganesha.mount_port, uid=FILE_UID,
                             gid=FILE_GID) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path(name)
            await nfs.write_file(fh, [data], offset=offset)

    asyncio.run(scenario())


def test_a_file_changed_on_the_dtn_is_never_served_stale(cached_lab,
                                                         tmp_path):
    lab = cached_lab
    src = tmp_path / "src"
    random_file(src, 8 * MIB)
    put(lab, src, "changing.bin")
    read_back(lab, "changing.bin", tmp_path / "first")
    patch = os.urandom(100 * 1024)
    _rewrite_on_the_dtn(lab, "changing.bin", 3 * MIB + 7, patch)
    with open(src, "r+b") as f:
        f.seek(3 * MIB + 7)
        f.write(patch)
    assert read_back(lab, "changing.bin", tmp_path / "second") == \
        sha256(src)
    assert lab.client_proxy.stats()["cache_invalidations"] >= 1


def test_writes_through_the_proxy_update_what_it_serves(lab_factory,
                                                        tmp_path):
    # A long coherence window: the proxy relies on what it saw go through
    # it, not on asking the server again.
    lab = lab_factory("tcp", cache={"capacity_mb": 64,
                                    "coherence_window": 600})
    src = tmp_path / "src"
    random_file(src, 4 * MIB)
    put(lab, src, "through.bin")
    read_back(lab, "through.bin", tmp_path / "first")
    patch = os.urandom(70000)

    async def scenario():
        port = lab.client_proxy.port
        async with NfsClient("127.0.0.1", port, port) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path("through.bin")
            await nfs.write_file(fh, [patch], offset=MIB - 5)

    asyncio.run(scenario())
    with open(src, "r+b") as f:
        f.seek(MIB - 5)
        f.write(patch)
    assert read_back(lab, "through.bin", tmp_path / "second") == sha256(src)
    # Ganesha sends no pre-operation attributes with WRITE, so the proxy
    # cannot prove that nobody else changed the file meanwhile and
    # revalidates all of it, as RFC 1813 clients must.
    assert lab.client_proxy.stats()["cache_invalidations"] >= 1


def test_eight_concurrent_readers_of_one_file(cached_lab, tmp_path):
    lab = cached_lab
    src = tmp_path / "src"
    expected = random_file(src, 48 * MIB)
    put(lab, src, "shared.bin")
    lab.client_proxy.stats()
    procs = [subprocess.Popen(
        ["nfs-cp", lab.client_url("shared.bin"), str(tmp_path / str(i))],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(8)]
    for proc in procs:
        assert proc.wait(timeout=600) == 0, proc.stderr.read()
    for i in range(8):
        assert sha256(tmp_path / str(i)) == expected


def test_eviction_keeps_data_correct(lab_factory, tmp_path):
    lab = lab_factory("tcp", cache={"capacity_mb": 4, "associativity": 2,
                                    "bank_size_mb": 1})
    src = tmp_path / "src"
    expected = random_file(src, 24 * MIB + 999)
    put(lab, src, "big.bin")
    for name in ("one", "two"):
        assert read_back(lab, "big.bin", tmp_path / name) == expected
    stats = lab.client_proxy.stats()
    assert stats["cache_capacity"] == 4 * MIB
    # The file is six times the cache: the second pass refetched most.
    assert stats["cache_bytes_fetched"] > 40 * MIB


def test_drop_empties_the_cache(cached_lab, tmp_path):
    lab = cached_lab
    src = tmp_path / "src"
    expected = random_file(src, 4 * MIB)
    put(lab, src, "drop.bin")
    read_back(lab, "drop.bin", tmp_path / "first")
    out = gvfs_proxy(lab.client_proxy, "drop")
    assert out.returncode == 0, out.stderr
    before = fetched(lab)
    assert read_back(lab, "drop.bin", tmp_path / "second") == expected
    assert fetched(lab) - before >= 4 * MIB


def test_a_full_cache_disk_costs_hits_not_data(lab_factory, tmp_path,
                                               tiny_disk):
    tiny_disk = tiny_disk(2)
    lab = lab_factory("tcp", cache={"capacity_mb": 64,
                                    "directory": tiny_disk + "/cache"})
    src = tmp_path / "src"
    expected = random_file(src, 16 * MIB)
    put(lab, src, "full.bin")
    for name in ("one", "two"):
        assert read_back(lab, "full.bin", tmp_path / name) == expected
    stats = lab.client_proxy.stats()
    assert stats["cache_io_errors"] > 0
    assert stats["cache_bytes_local"] > 0  # What fitted was still used.
    lab.stop()


def test_a_lan_proxy_is_a_second_level_cache_for_its_leaves(lab_factory,
                                                            tmp_path):
    lab = lab_factory("tcp", cache={"capacity_mb": 64})
    leaves = [lab.add_leaf("leaf%d" % i, cache={"capacity_mb": 64})
              for i in range(2)]
    src = tmp_path / "src"
    expected = random_file(src, 24 * MIB)
    put(lab, src, "golden.img")

    def read_via(leaf, dest):
        out = nfs_cp(lab.leaf_url(leaf, "golden.img"), str(dest))
        assert out.returncode == 0, out.stderr
        return sha256(dest)

    assert read_via(leaves[0], tmp_path / "a") == expected
    lan_after_first = fetched(lab)
    assert lan_after_first >= 24 * MIB
    assert read_via(leaves[1], tmp_path / "b") == expected
    # The second leaf was served by the LAN proxy's cache: nothing more
    # crossed the tunnel to the DTN.
    assert fetched(lab) == lan_after_first
    assert leaves[1].stats()["cache_bytes_fetched"] >= 24 * MIB


def gvfs_proxy(proxy, *args):
    return subprocess.run(
        ["gvfs-proxy", "--config-file", proxy.config] + list(args),
        capture_output=True, text=True, timeout=600)


def test_warm_fetches_a_file_ahead_of_its_readers_within_a_cap(cached_lab,
                                                               tmp_path):
    lab = cached_lab
    src = tmp_path / "src"
    expected = random_file(src, 16 * MIB + 3)
    put(lab, src, "golden.qcow2")
    out = gvfs_proxy(lab.client_proxy, "warm",
                     lab.export + "/golden.qcow2", "--rate-mib", "8")
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["fetched"] == 16 * MIB + 3
    # 16 MiB at no more than 8 MiB/s: the cap held.
    assert result["seconds"] >= 1.5
    before = fetched(lab)
    assert read_back(lab, "golden.qcow2", tmp_path / "read") == expected
    assert fetched(lab) == before
    again = json.loads(gvfs_proxy(lab.client_proxy, "warm",
                                  lab.export + "/golden.qcow2").stdout)
    assert again["fetched"] == 0 and again["already_cached"] == 16 * MIB + 3


@pytest.mark.parametrize("path,message", [
    ("/etc/passwd", "not under an export"),
    ("relative/path", "absolute path"),
    ("/x/../etc", "absolute path"),
    ("/nonexistent-file", "not under an export"),
])
def test_warm_refuses_bad_paths_clearly(cached_lab, path, message):
    out = gvfs_proxy(cached_lab.client_proxy, "warm", path)
    assert out.returncode == 1
    assert message in out.stderr


def test_warm_of_a_missing_file_says_so(cached_lab):
    out = gvfs_proxy(cached_lab.client_proxy, "warm",
                     cached_lab.export + "/no-such-image")
    assert out.returncode == 1
    assert "NOENT" in out.stderr


def test_an_immutable_export_is_trusted_and_counted_apart(lab_factory,
                                                          tmp_path):
    lab = lab_factory("tcp", cache={
        "capacity_mb": 64, "coherence_window": 0,
        "export_consistency": "{export}:immutable",
        "immutable_revalidate": 600})
    src = tmp_path / "src"
    original = random_file(src, 4 * MIB)
    put(lab, src, "golden.raw")
    assert read_back(lab, "golden.raw", tmp_path / "first") == original
    checks = lab.client_proxy.stats()["cache_revalidations"]
    assert read_back(lab, "golden.raw", tmp_path / "again") == original
    # The operator declared this export immutable: the proxy did not ask
    # the DTN again (with the default window of 0 it asks on every READ).
    stats = lab.client_proxy.stats()
    assert stats["cache_revalidations"] == checks
    # Evidence still counts: nfs-cp's own GETATTR, which the proxy
    # forwards, shows the change and the old blocks are dropped.
    patch = os.urandom(4096)
    _rewrite_on_the_dtn(lab, "golden.raw", 0, patch)
    with open(src, "r+b") as f:
        f.write(patch)
    assert read_back(lab, "golden.raw", tmp_path / "second") == sha256(src)
    per_export = stats["cache_exports"][lab.export]
    assert per_export["bytes_fetched"] >= 4 * MIB
    assert per_export["bytes_local"] >= 4 * MIB
