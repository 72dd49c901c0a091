# SPDX-License-Identifier: Apache-2.0
"""Whole-file transfers over the bulk channel, through real proxies."""

import asyncio
import os
import random
import subprocess
import threading
import time

import pytest

from gvfs_lab import process
from gvfs_lab import slowness
from gvfs_lab.topology import Proxy
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.sidecar import format as meta_format
from gvfs_openstack.sidecar import scan
from tests.functional.conftest import nfs_cp
from tests.functional.conftest import sha256

MIB = 1024 * 1024
WORDS = [b"qemu", b"glance", b"nova", b"image", b"block", b"cache", b"dtn",
         b"proxy", b"\n", b"zero", b"grid", b"kernel", b"libvirt"]


def compressible(path, size, seed):
    rng = random.Random(seed)
    with open(path, "wb") as f:
        written = 0
        while written < size:
            line = b" ".join(rng.choice(WORDS) for _ in range(40)) + b"\n"
            line = line[:size - written]
            f.write(line)
            written += len(line)


def publish(lab, tmp_path, src, name, digest=None):
    """The file and a whole_file sidecar for it, onto the export."""
    out = nfs_cp(str(src), lab.server_proxy_url(name))
    assert out.returncode == 0, out.stderr
    sidecar = scan.scan_file(os.path.join(lab.export, name),
                             action="whole_file", compression="zstd")
    if digest is not None:
        sidecar = meta_format.Sidecar(
            sidecar.size, sidecar.mtime_ns, sidecar.digest_algorithm,
            digest, sidecar.zeros, sidecar.action, sidecar.compression)
    side = tmp_path / ("sidecar-" + name)
    side.write_bytes(sidecar.to_bytes())
    out = nfs_cp(str(side), lab.server_proxy_url(
        meta_format.sidecar_name(name)))
    assert out.returncode == 0, out.stderr


def read(lab, name, dest):
    out = nfs_cp(lab.client_url(name), str(dest))
    assert out.returncode == 0, out.stderr
    return sha256(dest)


def delta(before, after, key):
    return after[key] - before[key]


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp", cache={"capacity_mb": 256})


def test_a_whole_file_comes_compressed_and_verified(lab, tmp_path):
    src = tmp_path / "disk.img"
    compressible(src, 24 * MIB + 1234, seed=1)
    publish(lab, tmp_path, src, "disk.img")
    before = lab.client_proxy.stats()
    assert read(lab, "disk.img", tmp_path / "out") == sha256(src)
    after = lab.client_proxy.stats()
    assert delta(before, after, "wholefile_transfers") == 1
    assert delta(before, after, "wholefile_verified") == 1
    raw = delta(before, after, "wholefile_raw_bytes")
    wire = delta(before, after, "wholefile_wire_bytes")
    assert raw == 24 * MIB + 1234
    assert wire < raw / 2, "the chunks crossed uncompressed"
    # No block was fetched on the side: the transfer served every READ.
    assert delta(before, after, "cache_bytes_fetched") == 0
    assert lab.server_proxy.stats()["bulk_reads"] >= 6
    # Later reads are local.
    again = lab.client_proxy.stats()
    assert read(lab, "disk.img", tmp_path / "again") == sha256(src)
    last = lab.client_proxy.stats()
    assert delta(again, last, "wholefile_transfers") == 0
    assert delta(again, last, "cache_bytes_fetched") == 0


def test_a_digest_mismatch_drops_the_copy_and_reads_blocks(lab, tmp_path):
    src = tmp_path / "liar.img"
    compressible(src, 8 * MIB, seed=2)
    publish(lab, tmp_path, src, "liar.img", digest="0" * 64)
    before = lab.client_proxy.stats()
    assert read(lab, "liar.img", tmp_path / "out") == sha256(src)
    after = lab.client_proxy.stats()
    assert delta(before, after, "wholefile_digest_mismatches") == 1
    assert delta(before, after, "wholefile_verified") == 0
    # The copy is gone: every block is fetched again (during the rest of
    # the first read or by the second), and no new transfer starts.
    assert read(lab, "liar.img", tmp_path / "again") == sha256(src)
    last = lab.client_proxy.stats()
    assert delta(before, last, "cache_bytes_fetched") >= 8 * MIB
    assert delta(after, last, "wholefile_transfers") == 0


def test_a_tunnel_reset_mid_transfer_still_ends_verified(lab_factory,
                                                         tmp_path):
    lab = lab_factory("tcp", link=True, cache={"capacity_mb": 256})
    # Incompressible, over a slow link: the transfer takes seconds.
    lab.toxiproxy.wan("wan", 10, 40)
    src = tmp_path / "random.img"
    with open(src, "wb") as f:
        f.write(os.urandom(24 * MIB))
    publish(lab, tmp_path, src, "random.img")
    cut = threading.Event()

    def cut_midway():
        deadline = time.monotonic() + slowness.scaled(60)
        while time.monotonic() < deadline:
            if lab.client_proxy.stats()["wholefile_chunks"] >= 2:
                lab.cut_tunnel()
                cut.set()
                return
            time.sleep(0.05)

    cutter = threading.Thread(target=cut_midway)
    cutter.start()
    assert read(lab, "random.img", tmp_path / "out") == sha256(src)
    cutter.join()
    assert cut.is_set(), "the transfer ended before the tunnel was cut"
    stats = lab.client_proxy.stats()
    assert stats["upstream_connects"] > 1, "the tunnel was not reset"
    assert stats["wholefile_verified"] == 1


def test_concurrent_readers_share_one_transfer(lab, tmp_path):
    src = tmp_path / "shared.img"
    compressible(src, 16 * MIB, seed=3)
    publish(lab, tmp_path, src, "shared.img")
    before = lab.client_proxy.stats()
    procs = [subprocess.Popen(["nfs-cp", lab.client_url("shared.img"),
                               str(tmp_path / ("out%d" % i))],
                              stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for i in range(4)]
    for proc in procs:
        assert proc.wait(timeout=300) == 0, proc.stderr.read()
    for i in range(4):
        assert sha256(tmp_path / ("out%d" % i)) == sha256(src)
    after = lab.client_proxy.stats()
    assert delta(before, after, "wholefile_transfers") == 1
    assert delta(before, after, "wholefile_raw_bytes") == 16 * MIB


def test_a_next_hop_without_the_bulk_channel_means_block_reads(
        lab_factory, tmp_path):
    """An NFS server (or an older server proxy) as the next hop."""
    lab = lab_factory("tcp", cache={"capacity_mb": 64})
    src = tmp_path / "old.img"
    compressible(src, 4 * MIB, seed=4)
    publish(lab, tmp_path, src, "old.img")
    port = process.free_port()
    direct = Proxy(lab.workdir, "direct-proxy", {
        "proxy": {"role": "client"},
        "listen": {"host": "127.0.0.1", "port": port},
        "upstream": {"tunnel": "tcp", "host": "127.0.0.1",
                     "port": lab.ganesha.nfs_port},
        "cache": {"directory": str(tmp_path / "direct-cache"),
                  "capacity_mb": 64}})

    async def read_through_direct():
        # MOUNT straight from Ganesha: it serves MOUNT on its own port.
        async with NfsClient("127.0.0.1", port, lab.ganesha.mount_port,
                             timeout=60) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path("old.img")
            return b"".join([bytes(d) async for _, d in nfs.read_file(fh)])

    try:
        for _ in range(2):
            assert asyncio.run(read_through_direct()) == src.read_bytes()
        stats = direct.stats()
        # Asked once, then not again for a while; never counted a failure.
        assert stats["wholefile_unavailable"] == 1
        assert stats["wholefile_failures"] == 0
        assert stats["cache_bytes_fetched"] >= 4 * MIB
    finally:
        direct.stop()
