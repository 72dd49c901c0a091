# SPDX-License-Identifier: Apache-2.0
"""Every chain answers as NFS-Ganesha does: a short differential run.

A few random sequences of NFSv3 operations per chain, each applied both
to Ganesha directly and through the chain (gvfs_lab/differential.py):
enough to catch a regression in the common paths on every run, cheap
enough for the functional suite.  ``tox -e soak`` runs many more.
"""

import pytest

from gvfs_lab import differential
from gvfs_openstack.nfs import const
from gvfs_openstack.nfs.const import Nfs3Proc as P

#: Per chain: examples, and steps in each.  All four chains together
#: take about a minute on two busy cores.
EXAMPLES = 15
STEPS = 40


@pytest.fixture(scope="module")
def diff_lab(lab_factory):
    return lab_factory("tcp", cache=differential.CACHING)


_started = {}


def _chain(lab, kind):
    """Each chain's proxies are started once per module."""
    if kind not in _started:
        _started[kind] = differential.start_chain(lab, kind)
    return _started[kind]


@pytest.mark.parametrize("kind", differential.KINDS)
def test_chain_answers_as_ganesha_does(diff_lab, kind):
    chain = _chain(diff_lab, kind)
    done, _ = differential.run_differential(chain, diff_lab, EXAMPLES,
                                            STEPS)
    assert done >= EXAMPLES


# --- bugs this machine found, fixed ---------------------------------------
# Their minimal reproductions, so that they stay fixed.

_FILE = (differential.op_create, "a", "unchecked", 0o644, None)


def _write(path, data):
    return (differential.op_write, path, 0, data, const.StableHow.UNSTABLE)


def _differs(diff_lab, kind, steps):
    chain = _chain(diff_lab, kind)
    try:
        results = differential.replay(diff_lab, chain, steps)
    finally:
        chain.flush()
    return [(step[0].__name__ if callable(step[0]) else step[0][1].__name__,
             direct, proxied) for step, direct, proxied in results
            if direct != proxied]


def test_writeback_empty_write_then_data(diff_lab):
    assert _differs(diff_lab, "write-back", [
        _FILE, _write("a", b""), _write("a", b"x"),
        (differential.op_getattr, "a")]) == []


def test_writeback_link_of_a_dirty_file(diff_lab):
    assert _differs(diff_lab, "write-back", [
        _FILE, _write("a", b"y"), (differential.op_link, "a", "b"),
        (differential.op_lookup, "a"), (differential.op_access, "a")]) == []


def test_writeback_commit_of_a_directory(diff_lab):
    assert _differs(diff_lab, "write-back", [
        (differential.op_mkdir, "d", 0o755),
        (differential.op_commit, "d", 0, 0)]) == []


def test_writeback_removed_dirty_file(diff_lab):
    assert _differs(diff_lab, "write-back", [
        _FILE, _write("a", b"y"), (differential.op_remove, "a", P.REMOVE),
        (("old", differential.op_getattr), "a")]) == []


def test_lan_removed_file_read_by_old_handle(diff_lab):
    assert _differs(diff_lab, "lan", [
        _FILE, (differential.op_lookup, "a"),
        (differential.op_remove, "a", P.REMOVE),
        (("old", differential.op_read), "a", 0, 4096)]) == []


@pytest.mark.parametrize("kind", ["caching", "write-back"])
def test_a_truncating_create_of_a_cached_file(diff_lab, kind):
    """CREATE (UNCHECKED, size 0) over a file whose bytes are cached."""
    assert _differs(diff_lab, kind, [
        _FILE, _write("a", b"x"), (differential.op_commit, "a", 0, 0),
        (differential.op_read, "a", 0, 4096),
        (differential.op_create, "a", "truncate", 0o644, None),
        (("old", differential.op_read), "a", 0, 4096)]) == []


@pytest.mark.parametrize("kind", ["caching", "write-back"])
def test_a_truncating_create_after_another_file_went(diff_lab, kind):
    """CI's failing case.

    Ganesha answers this CREATE with the size and times from before it
    truncated the cached file.
    """
    assert _differs(diff_lab, kind, [
        _FILE, (differential.op_create, "b", "unchecked", 0o644, None),
        (differential.op_create, "c", "unchecked", 0o644, None),
        _write("c", b"z"), (differential.op_commit, "c", 0, 0),
        (differential.op_read, "c", 0, 4096),
        (differential.op_remove, "a", P.REMOVE),
        (differential.op_create, "c", "truncate", 0o644, None),
        (differential.op_getattr, "c"),
        (("old", differential.op_read), "c", 0, 4096)]) == []
