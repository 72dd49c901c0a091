# SPDX-License-Identifier: Apache-2.0
"""Boot profiles through real proxies in front of a real NFS-Ganesha.

Host A's client proxy reads a golden image the way a booting guest
does (scattered blocks, one at a time) and writes the profile beside
the image on the DTN; cold host B's proxy then fetches the profile's
blocks ahead of its reader, which finds them cached.  A hostile profile
is ignored with a warning and its reader still gets the image's bytes.
"""

import asyncio
import hashlib
import os
import random
import time

import pytest

from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.sidecar import profile
from tests.functional.conftest import nfs_cp
from tests.lab.topology import FILE_GID
from tests.lab.topology import FILE_UID

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
    deadline = time.monotonic() + timeout
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
