# SPDX-License-Identifier: Apache-2.0
"""Metadata sidecars: the builder against a model, parsing hostile input."""

import hashlib
import json
import os

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
import pytest

from gvfs_openstack.cmd import meta as meta_cmd
from gvfs_openstack.sidecar import format as meta_format
from gvfs_openstack.sidecar import scan

GRAIN = meta_format.ZERO_GRAIN

# A file as a list of grains: None is a zero grain, an int a data grain.
files = st.tuples(st.lists(st.one_of(st.none(), st.integers(1, 255)),
                           max_size=40),
                  st.integers(0, GRAIN - 1), st.booleans())


def _materialize(grains, tail, tail_zero):
    data = b"".join(bytes(GRAIN) if g is None else bytes([g]) * GRAIN
                    for g in grains)
    if tail:
        data += bytes(tail) if tail_zero else b"\x07" * tail
    return data


def _model(data):
    """Zero extents and the digest of everything else, the slow way."""
    runs, digest = [], hashlib.sha256()
    for at in range(0, len(data), GRAIN):
        grain = data[at:at + GRAIN]
        if grain.count(0) == len(grain):
            if runs and runs[-1][1] == at:
                runs[-1][1] = at + len(grain)
            else:
                runs.append([at, at + len(grain)])
        else:
            digest.update(grain)
    return [[s, e - s] for s, e in runs], digest.hexdigest()


@settings(max_examples=200, deadline=None)
@given(files, st.lists(st.integers(1, 3 * GRAIN), min_size=1, max_size=8))
def test_builder_matches_the_model_for_any_chunking(file, cuts):
    data = _materialize(*file)
    builder = scan.SidecarBuilder()
    position, i = 0, 0
    while position < len(data):
        size = cuts[i % len(cuts)]
        builder.update(memoryview(data)[position:position + size])
        position += size
        i += 1
    sidecar = builder.finish(123)
    extents, digest = _model(data)
    assert sidecar.size == len(data)
    assert sidecar.zeros.extents() == extents
    assert sidecar.digest == digest
    # What it writes, it parses back to the same thing.
    assert meta_format.parse(sidecar.to_bytes()) == sidecar


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 3 * GRAIN), st.integers(0, 5 * GRAIN + 17))
def test_add_zeros_equals_feeding_zeros(lead, zeros):
    fed, skipped = scan.SidecarBuilder(), scan.SidecarBuilder()
    for builder in (fed, skipped):
        builder.update(b"\x01" * lead)
    fed.update(bytes(zeros))
    skipped.add_zeros(zeros)
    for builder in (fed, skipped):
        builder.update(b"\x02" * 100)
    assert fed.finish(1) == skipped.finish(1)


def test_scan_file_uses_holes_and_matches_a_full_read(tmp_path):
    path = str(tmp_path / "sparse.img")
    with open(path, "wb") as f:
        f.truncate(64 * 1024 * 1024 + 100)
        f.seek(10 * 1024 * 1024)
        f.write(os.urandom(3 * GRAIN))
        f.write(bytes(GRAIN))  # Written zeros: data to SEEK_DATA.
        f.write(b"x" * 10)
        f.seek(64 * 1024 * 1024)
        f.write(b"end" * 33)
    sidecar = scan.scan_file(path)
    with open(path, "rb") as f:
        extents, digest = _model(f.read())
    assert sidecar.zeros.extents() == extents
    assert sidecar.digest == digest
    assert sidecar.mtime_ns == os.stat(path).st_mtime_ns
    target = scan.write_sidecar(path, sidecar)
    assert os.path.basename(target) == ".gvfs-meta.sparse.img"
    assert meta_cmd.verify(path) is None


def test_verify_finds_stale_and_lying_sidecars(tmp_path):
    path = str(tmp_path / "f")
    with open(path, "wb") as f:
        f.write(os.urandom(GRAIN) + bytes(GRAIN))
    scan.write_sidecar(path, scan.scan_file(path))
    with open(path, "r+b") as f:
        f.seek(GRAIN)
        f.write(b"!")
    assert meta_cmd.verify(path).startswith("stale")
    sidecar = scan.scan_file(path)
    lying = meta_format.Sidecar(
        sidecar.size, sidecar.mtime_ns, sidecar.digest_algorithm,
        sidecar.digest, meta_format.ZeroMap.from_extents([(GRAIN, GRAIN)]))
    scan.write_sidecar(path, lying)
    assert "holds data" in meta_cmd.verify(path)


def test_zero_map_queries():
    zeros = meta_format.ZeroMap.from_extents([(4096, 8192), (20480, 4096)])
    assert zeros.covers(4096, 12288) and zeros.covers(5000, 6000)
    assert not zeros.covers(0, 4097) and not zeros.covers(12000, 13000)
    assert zeros.nonzero(0, 30000) == [(0, 4096), (12288, 20480),
                                       (24576, 30000)]
    assert zeros.nonzero(5000, 6000) == []
    assert zeros.nonzero(10000, 22000) == [(12288, 20480)]
    assert zeros.zero_bytes == 12288


def _doc(**changes):
    doc = {"format": "gvfs-meta", "version": 1, "size": 3 * GRAIN,
           "mtime_ns": 5, "digest": {"algorithm": "sha256-nonzero",
                                     "value": "ab" * 32},
           "zero_extents": [[0, GRAIN]], "action": "on_demand"}
    doc.update(changes)
    return json.dumps(doc).encode()


def test_a_valid_document_parses():
    sidecar = meta_format.parse(_doc())
    assert sidecar.zeros.covers(0, GRAIN)
    assert sidecar.matches(3 * GRAIN, 5) and not sidecar.matches(3, 5)


@pytest.mark.parametrize("doc, reason", [
    (b"not json", "not JSON"),
    (b"[1, 2]", "not a gvfs-meta"),
    (_doc(version=2), "version"),
    (_doc(size=-1), "size"),
    (_doc(size=True), "size"),
    (_doc(digest={"algorithm": "md5", "value": "00"}), "digest"),
    (_doc(digest={"algorithm": "sha256-nonzero", "value": "zz" * 32}),
     "hex"),
    (_doc(zero_extents=[[0, 4 * GRAIN]]), "past the end"),
    (_doc(zero_extents=[[GRAIN, GRAIN], [0, GRAIN]]), "overlap"),
    (_doc(zero_extents=[[0, 2 * GRAIN], [GRAIN, GRAIN]]), "overlap"),
    (_doc(zero_extents=[[0, 0]]), "empty"),
    (_doc(zero_extents=[[1, GRAIN]]), "aligned"),
    (_doc(zero_extents=[[0, "x"]]), "[offset, length]"),
    (_doc(zero_extents={"a": 1}), "list"),
    (_doc(action="rm -rf"), "action"),
    (_doc(compression="lzma"), "compression"),
    (b" " * (meta_format.MAX_BYTES + 1), "larger"),
    (b"[" * 100000, "not JSON"),
])
def test_hostile_documents_are_refused_clearly(doc, reason):
    with pytest.raises(meta_format.SidecarError, match=reason):
        meta_format.parse(doc)


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=300), st.integers(0, 200), st.binary(max_size=8))
def test_mutated_documents_only_raise_sidecar_errors(noise, at, patch):
    doc = bytearray(_doc())
    doc[at:at + len(patch)] = patch
    for data in (bytes(doc), noise):
        try:
            meta_format.parse(data)
        except meta_format.SidecarError:
            pass


def test_data_horizon_skips_zeros():
    zeros = meta_format.ZeroMap.from_extents([(4096, 8192), (20480, 4096)])
    # 4096 data bytes at 0, then zeros to 12288, data to 20480...
    assert zeros.data_horizon(0, 4096, 100000) == 4096
    assert zeros.data_horizon(0, 5000, 100000) == 12288 + 904
    assert zeros.data_horizon(4096, 100, 100000) == 12288 + 100
    assert zeros.data_horizon(0, 10 ** 6, 30000) == 30000
