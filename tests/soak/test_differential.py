# SPDX-License-Identifier: Apache-2.0
"""Every chain answers as NFS-Ganesha does: the long differential run.

The functional suite runs a few examples per chain; the rare sequences
(a truncate between two flushes, a rename over a hard link of a file with
dirty data) need many.  Bounded in count and in time, so that ``tox -e
soak`` ends:

* ``GVFS_SOAK_DIFF_EXAMPLES``: examples per chain (default 200);
* ``GVFS_SOAK_DIFF_STEPS``: operations per example (default 60);
* ``GVFS_SOAK_DIFF_SECONDS``: per chain, no new batch of examples is
  started after this many seconds (default 300);
* ``GVFS_DIFF_SEED``: replay a failing batch (the seed is printed).
"""

import os

import pytest

from gvfs_lab import differential

EXAMPLES = int(os.environ.get("GVFS_SOAK_DIFF_EXAMPLES", "200"))
STEPS = int(os.environ.get("GVFS_SOAK_DIFF_STEPS", "60"))
SECONDS = float(os.environ.get("GVFS_SOAK_DIFF_SECONDS", "300"))
#: Examples per Hypothesis run: the time bound is checked between runs.
BATCH = 20


@pytest.fixture(scope="module")
def diff_lab(lab_factory):
    return lab_factory("tcp", cache=differential.CACHING)


@pytest.mark.parametrize("kind", differential.KINDS)
def test_chain_answers_as_ganesha_does_for_long(diff_lab, kind):
    chain = differential.start_chain(diff_lab, kind)
    done, took = differential.run_differential(
        chain, diff_lab, EXAMPLES, STEPS, seconds=SECONDS, batch=BATCH)
    print("soak differential %s: %d examples of <= %d steps in %.0f s"
          % (kind, done, STEPS, took))
    assert done >= min(EXAMPLES, BATCH)
