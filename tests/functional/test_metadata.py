# SPDX-License-Identifier: Apache-2.0
"""Metadata sidecars read by a real client proxy from a real Ganesha."""

import asyncio
import json
import os
import random

import pytest

from gvfs_lab.topology import FILE_GID
from gvfs_lab.topology import FILE_UID
from gvfs_openstack.client.nfs import NfsClient
from gvfs_openstack.sidecar import format as meta_format
from gvfs_openstack.sidecar import scan
from tests.functional.conftest import nfs_cp
from tests.functional.conftest import sha256

MIB = 1024 * 1024
PAGE = 4096


@pytest.fixture(scope="module")
def lab(lab_factory):
    # What a reader's own fetches cost is counted here: no image stream
    # beside them (tests/functional/test_boot_profiles.py has it).
    return lab_factory("tcp", cache={"capacity_mb": 256,
                                     "coherence_window": 0,
                                     "stream_images": False})


def memory_image(path, size, nonzero_fraction, seed):
    """Mostly zero pages, some random ones; returns the non-zero bytes."""
    rng = random.Random(seed)
    nonzero = 0
    with open(path, "wb") as f:
        for _ in range(size // PAGE):
            if rng.random() < nonzero_fraction:
                f.write(rng.randbytes(PAGE))
                nonzero += PAGE
            else:
                f.write(bytes(PAGE))
    return nonzero


def put(lab, src, name):
    """Onto the export through the server proxy (as the file account)."""
    out = nfs_cp(str(src), lab.server_proxy_url(name))
    assert out.returncode == 0, out.stderr


def overwrite(port, lab, name, data):
    """Rewrite an existing file in place through the proxy on ``port``."""
    async def scenario():
        async with NfsClient("127.0.0.1", port, port, uid=FILE_UID,
                             gid=FILE_GID) as nfs:
            await nfs.mount(lab.export)
            await nfs.write_file(await nfs.lookup_path(name), [data])

    asyncio.run(scenario())


def put_sidecar(lab, tmp_path, name, data):
    src = tmp_path / ("sidecar-" + name)
    src.write_bytes(data)
    put(lab, src, meta_format.sidecar_name(name))


def read_through_client(lab, name, dest):
    out = nfs_cp(lab.client_url(name), str(dest))
    assert out.returncode == 0, out.stderr
    return sha256(dest)


def test_zero_pages_never_cross_the_wan(lab, tmp_path):
    src = tmp_path / "memory.img"
    nonzero = memory_image(src, 64 * MIB, 0.1, seed=1)
    put(lab, src, "memory.img")
    # What an operator runs on the DTN: scan the file, keep the sidecar.
    sidecar = scan.scan_file(os.path.join(lab.export, "memory.img"))
    assert sidecar.size - sidecar.zeros.zero_bytes == nonzero
    put_sidecar(lab, tmp_path, "memory.img", sidecar.to_bytes())
    before = lab.client_proxy.stats()
    assert read_through_client(lab, "memory.img", tmp_path / "out") == \
        sha256(src)
    after = lab.client_proxy.stats()
    assert after["sidecars_loaded"] - before["sidecars_loaded"] == 1
    fetched = after["cache_bytes_fetched"] - before["cache_bytes_fetched"]
    assert fetched == nonzero, "only the non-zero pages may be fetched"
    served = after["cache_bytes_zero_map"] - before["cache_bytes_zero_map"]
    assert served == 64 * MIB - nonzero
    wire = after["upstream_bytes_in"] - before["upstream_bytes_in"]
    assert wire < nonzero * 1.1 + len(sidecar.to_bytes())
    # Served again: all local, from the zero map and (blocks holding some
    # data) the block cache, counted apart.
    again = lab.client_proxy.stats()
    read_through_client(lab, "memory.img", tmp_path / "again")
    last = lab.client_proxy.stats()
    assert last["cache_bytes_fetched"] == again["cache_bytes_fetched"]
    local = last["cache_bytes_local"] - again["cache_bytes_local"]
    zero = last["cache_bytes_zero_map"] - again["cache_bytes_zero_map"]
    assert local + zero == 64 * MIB and local >= nonzero and zero > 0


def test_a_stale_sidecar_is_ignored(lab, tmp_path):
    src = tmp_path / "stale.img"
    memory_image(src, 4 * MIB, 0.5, seed=2)
    put(lab, src, "stale.img")
    sidecar = scan.scan_file(os.path.join(lab.export, "stale.img"))
    put_sidecar(lab, tmp_path, "stale.img", sidecar.to_bytes())
    # The file is rewritten after its sidecar was made: pages the sidecar
    # calls zero now hold data.
    memory_image(src, 4 * MIB, 0.5, seed=3)
    overwrite(lab.server_proxy.port, lab, "stale.img", src.read_bytes())
    before = lab.client_proxy.stats()
    assert read_through_client(lab, "stale.img", tmp_path / "out") == \
        sha256(src)
    after = lab.client_proxy.stats()
    assert after["sidecars_stale"] - before["sidecars_stale"] == 1
    assert after["cache_bytes_zero_map"] == before["cache_bytes_zero_map"]


def _hostile(stat, case):
    doc = {"format": "gvfs-meta", "version": 1, "size": stat.st_size,
           "mtime_ns": stat.st_mtime_ns,
           "digest": {"algorithm": "sha256-nonzero", "value": "0" * 64},
           "zero_extents": [[0, PAGE]], "action": "on_demand"}
    if case == "past-eof":
        doc["zero_extents"] = [[0, stat.st_size + PAGE]]
    elif case == "overlapping":
        doc["zero_extents"] = [[0, 2 * PAGE], [PAGE, PAGE]]
    elif case == "wrong-version":
        doc["version"] = 99
    elif case == "absurd-size":
        return b" " * (meta_format.MAX_BYTES + 10)
    elif case == "truncated":
        return json.dumps(doc).encode()[:40]
    return json.dumps(doc).encode()


@pytest.mark.parametrize("case", ["past-eof", "overlapping", "wrong-version",
                                  "absurd-size", "truncated"])
def test_a_hostile_sidecar_is_ignored_with_one_warning(lab, tmp_path, case):
    name = "hostile-%s.img" % case
    src = tmp_path / name
    memory_image(src, 2 * MIB, 0.5, seed=4)
    put(lab, src, name)
    put_sidecar(lab, tmp_path, name,
                _hostile(os.stat(os.path.join(lab.export, name)), case))
    before = lab.client_proxy.stats()
    for attempt in range(2):
        dest = tmp_path / ("out%d" % attempt)
        assert read_through_client(lab, name, dest) == sha256(src)
    after = lab.client_proxy.stats()
    assert after["sidecars_invalid"] - before["sidecars_invalid"] == 1
    assert after["cache_bytes_zero_map"] == before["cache_bytes_zero_map"]


@pytest.mark.parametrize("owner, mode", [(2003, 0o644), (FILE_UID, 0o666)])
def test_a_sidecar_others_could_write_is_not_believed(lab, tmp_path, owner,
                                                      mode):
    """The attack: a well-formed sidecar that calls the whole image zero.

    Planted beside the image by an account that owns neither the image
    nor its directory, or left writable by others: believed, it would
    make the proxy serve a guest zeros for the image's data.
    """
    name = "planted-%d-%o.img" % (owner, mode)
    src = tmp_path / name
    memory_image(src, 2 * MIB, 0.5, seed=5)
    put(lab, src, name)
    stat = os.stat(os.path.join(lab.export, name))
    forged = meta_format.Sidecar(
        stat.st_size, stat.st_mtime_ns, "sha256-nonzero", "0" * 64,
        meta_format.ZeroMap.from_extents([(0, stat.st_size)]), "on_demand",
        "none")
    planted = os.path.join(lab.export, meta_format.sidecar_name(name))
    with open(planted, "wb") as f:
        f.write(forged.to_bytes())
    os.chown(planted, owner, FILE_GID)
    os.chmod(planted, mode)
    assert os.stat(os.path.join(lab.export, name)).st_mtime_ns == \
        stat.st_mtime_ns
    before = lab.client_proxy.stats()
    assert read_through_client(lab, name, tmp_path / "out") == sha256(src)
    after = lab.client_proxy.stats()
    assert after["sidecars_invalid"] - before["sidecars_invalid"] == 1
    assert after["sidecars_loaded"] == before["sidecars_loaded"]
    assert after["cache_bytes_zero_map"] == before["cache_bytes_zero_map"]


def test_a_file_changed_through_the_proxy_drops_its_zero_map(lab, tmp_path):
    src = tmp_path / "changing.img"
    memory_image(src, 2 * MIB, 0.2, seed=5)
    put(lab, src, "changing.img")
    sidecar = scan.scan_file(os.path.join(lab.export, "changing.img"))
    put_sidecar(lab, tmp_path, "changing.img", sidecar.to_bytes())
    read_through_client(lab, "changing.img", tmp_path / "first")
    with open(src, "r+b") as f:
        f.write(b"\xff" * (2 * MIB))  # Every page now holds data.
    overwrite(lab.client_proxy.port, lab, "changing.img", src.read_bytes())
    assert read_through_client(lab, "changing.img", tmp_path / "second") \
        == sha256(src)
