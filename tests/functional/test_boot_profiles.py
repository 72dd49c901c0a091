# SPDX-License-Identifier: Apache-2.0
"""Boot profiles and the image stream through real proxies and Ganesha.

Host A's client proxy reads a golden image the way a booting guest
does (scattered blocks, one at a time) and writes the profile beside
the image on the DTN; cold host B's proxy then fetches the profile's
blocks ahead of its reader, which finds them cached.  A hostile profile
is ignored with a warning and its reader still gets the image's bytes.
Across an emulated WAN, the first boot ever of an image (no profile)
has the rest of the image streamed behind its reader, whose own reads
still take a few round trips, not a queue of stream bytes.
"""

import asyncio
import hashlib
import os
import random
import time

import pytest

from gvfs_lab import slowness
from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.sidecar import format as meta_format
from gvfs_openstack.sidecar import profile
from gvfs_openstack.sidecar import scan
from tests.functional.conftest import nfs_cp

MIB = 1024 * 1024
BLOCK = 64 * 1024
CACHE = {"capacity_mb": 256, "consistency": "immutable",
         "profile_quiet_seconds": 1}


@pytest.fixture(scope="module")
def lab(lab_factory):
    return lab_factory("tcp", cache=CACHE)


def put(lab, tmp_path, name, data):
    """Onto the export through the server proxy (as the file account)."""
    src = tmp_path / ("src-" + name)
    src.write_bytes(data)
    out = nfs_cp(str(src), lab.server_proxy_url(name))
    assert out.returncode == 0, out.stderr


def boot(proxy, lab, name, blocks):
    """Read ``blocks`` one at a time through ``proxy``; their digest."""
    async def scenario():
        digest = hashlib.sha256()
        async with NfsClient("127.0.0.1", proxy.port, proxy.port,
                             uid=FILE_UID, gid=FILE_GID) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path(name)
            for block in blocks:
                done = await nfs.read(fh, block * BLOCK, BLOCK)
                digest.update(done.data)
        return digest.hexdigest()
    return asyncio.run(scenario())


def expected(data, blocks):
    digest = hashlib.sha256()
    for block in blocks:
        digest.update(data[block * BLOCK:(block + 1) * BLOCK])
    return digest.hexdigest()


def wait_for(condition, timeout=30.0):
    deadline = time.monotonic() + slowness.scaled(timeout)
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("not within %s s" % timeout)


def test_a_boot_on_one_host_prefetches_the_next_hosts_boot(lab, tmp_path):
    rng = random.Random(41)
    data = rng.randbytes(32 * MIB)
    put(lab, tmp_path, "golden.img", data)
    # Block 0 first, as qemu reads the header; none of block 1, which
    # the proxy reads ahead of a READ at offset 0.
    boot_set = [0] + rng.sample(range(2, 512), 59)
    on_dtn = os.path.join(lab.export, profile.profile_name("golden.img"))

    assert boot(lab.client_proxy, lab, "golden.img", boot_set) == \
        expected(data, boot_set)
    recorded = wait_for(lambda: os.path.exists(on_dtn) and
                        profile.parse(open(on_dtn, "rb").read()))
    # The first touch of each block in order; the file's own identity.
    assert [b for b, _ in recorded.blocks] == boot_set
    st = os.stat(os.path.join(lab.export, "golden.img"))
    assert recorded.matches(st.st_size, st.st_mtime_ns)
    assert os.stat(on_dtn).st_uid == FILE_UID
    assert not [n for n in os.listdir(lab.export) if n.endswith(".tmp")]

    host_b = lab.add_client("host-b", cache=CACHE)
    # The guest's first read (qemu's look at the header) starts it.
    boot(host_b, lab, "golden.img", [0])
    stats = wait_for(lambda: (lambda s: s if s["prefetch_bytes"] ==
                              59 * BLOCK else None)(host_b.stats()))
    assert stats["profiles_loaded"] == 1
    assert stats["prefetch_blocks"] == 59
    misses = stats["cache_misses"]
    assert boot(host_b, lab, "golden.img", boot_set) == \
        expected(data, boot_set)
    after = host_b.stats()
    assert after["cache_misses"] == misses
    assert after["cache_hits"] >= stats["cache_hits"] + 60
    # Nothing new to say: host B wrote no profile.
    time.sleep(2)
    assert host_b.stats()["profiles_recorded"] == 0


@pytest.mark.parametrize("body, counter", [
    (b'{"format": "gvfs-profile", "version": 1, "size": 1, "mtime_ns": 1,'
     b' "block_size": 65536, "boots": 1, "blocks": [[0, 0]]}',
     "profiles_stale"),
    (b'{"format": "gvfs-profile", "version": 1, "size": 4194304, '
     b'"mtime_ns": 1, "block_size": 65536, "boots": 1, '
     b'"blocks": [[999999, 0]]}', "profiles_invalid"),
    (b"\0" * (profile.MAX_BYTES + 1), "profiles_invalid"),
])
def test_a_stale_or_hostile_profile_is_ignored(lab, tmp_path, body,
                                               counter):
    name = "planted-%s-%d.img" % (counter, len(body))
    data = random.Random(len(body)).randbytes(4 * MIB)
    put(lab, tmp_path, name, data)
    put(lab, tmp_path, profile.profile_name(name), body)
    host = lab.add_client("host-%s-%d" % (counter, len(body)),
                          cache=dict(CACHE, boot_profiles=True))
    blocks = [5, 3, 60, 1]
    assert boot(host, lab, name, blocks) == expected(data, blocks)
    stats = wait_for(lambda: (lambda s: s if s[counter] else None)(
        host.stats()))
    assert stats["prefetch_blocks"] == 0
    assert stats["profiles_loaded"] == 0


def timed_reads(proxy, lab, name, blocks):
    """Seconds each of ``blocks`` took to read, one at a time."""
    async def scenario():
        taken = []
        async with NfsClient("127.0.0.1", proxy.port, proxy.port,
                             uid=FILE_UID, gid=FILE_GID) as nfs:
            await nfs.mount(lab.export)
            fh = await nfs.lookup_path(name)
            for block in blocks:
                started = time.monotonic()
                await nfs.read(fh, block * BLOCK, BLOCK)
                taken.append(time.monotonic() - started)
        return taken
    return asyncio.run(scenario())


def test_a_first_boot_ever_streams_the_image_behind_its_reader(
        lab_factory, tmp_path):
    cache = dict(CACHE, capacity_mb=512)
    wan = lab_factory("tcp", wan=(50, 200), cache=cache)
    rng = random.Random(44)
    # Text-like data (compressible, as file systems are), a 16 MiB hole,
    # then random data: some seconds of the link, longer than the reads.
    four_letters = bytes(0x41 + b % 4 for b in range(256))
    data = rng.randbytes(16 * MIB).translate(four_letters) + \
        bytes(16 * MIB) + rng.randbytes(96 * MIB)
    put(wan, tmp_path, "first.img", data)
    sidecar = scan.scan_file(os.path.join(wan.export, "first.img"))
    put(wan, tmp_path, meta_format.sidecar_name("first.img"),
        sidecar.to_bytes())
    # The link's round trip, measured: one uncached block of a file the
    # stream does not touch (no sidecar), through a proxy of its own.
    put(wan, tmp_path, "probe.img", bytes(range(256)) * 4096)
    rtt = min(timed_reads(wan.add_client("probe", cache=cache), wan,
                          "probe.img", [1, 3, 5]))
    host = wan.add_client("first-host", cache=cache)
    # The first READ (qemu's look at the header) starts the stream.
    started = time.monotonic()
    timed_reads(host, wan, "first.img", [0])
    boot_set = rng.sample(range(2, 256), 12) + rng.sample(range(512, 768), 12)
    taken = timed_reads(host, wan, "first.img", boot_set)
    during = host.stats()
    assert during["streams"] == 1
    stats = wait_for(lambda: (lambda s: s if s["streams_done"] else None)(
        host.stats()))
    streamed_for = time.monotonic() - started
    # Some reads met the stream on its way: it had not ended by then.
    assert not during["streams_done"]
    slowest = max(taken)
    print("round trip %.3f s; the stream took %.3f s; the reader's reads "
          "during it took %.3f s at most, %.3f s in all"
          % (rtt, streamed_for, slowest, sum(taken)))
    # A read queued behind the stream would wait for the rest of it
    # (seconds); one that goes first waits for a round trip, or for
    # the window already in flight when it asks for a block the stream
    # has asked for.  A loaded runner stretches single reads, so the
    # bounds are the mean against the round trip and the slowest
    # against the stream, not the slowest against the round trip.
    assert sum(taken) / len(taken) < 2 * rtt
    assert slowest < streamed_for / 4
    # Every non-zero block came once, read by the guest or streamed
    # (a few twice: the cache's sets are 4-way, a full set drops one).
    fetched = stats["cache_bytes_fetched"] + stats["stream_raw_bytes"]
    assert 112 * MIB <= fetched <= 112 * MIB * 1.01
    # The text compressed (to about a quarter), the random data not.
    assert stats["stream_raw_bytes"] - stats["stream_wire_bytes"] > 8 * MIB
    # A later boot on the host reads nothing across the link.
    misses = stats["cache_misses"]
    assert boot(host, wan, "first.img", boot_set) == expected(data, boot_set)
    assert host.stats()["cache_misses"] == misses
