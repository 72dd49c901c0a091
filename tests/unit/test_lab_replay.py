# SPDX-License-Identifier: Apache-2.0
"""The lab's boot replay: a recorded boot's order, bytes and pacing."""

import random

import pytest

from gvfs_lab import replay
from gvfs_openstack.sidecar import profile

BLOCK = 4096


@pytest.fixture
def image(tmp_path):
    path = tmp_path / "golden.img"
    path.write_bytes(random.Random(7).randbytes(64 * BLOCK + 100))
    return str(path)


def test_a_merged_profile_becomes_a_monotonic_trace():
    recorded = profile.Profile(size=64 * BLOCK, mtime_ns=1, block_size=BLOCK,
                               boots=2, blocks=((5, 0), (9, 40), (2, 30),
                                                (7, 100)))
    trace = replay.Trace.from_profile(recorded)
    assert trace.reads == ((5, 0.0), (9, 0.04), (2, 0.04), (7, 0.1))
    assert trace.bytes == 4 * BLOCK and trace.seconds == 0.1


def test_a_replay_reads_the_blocks_of_the_trace(image):
    trace = replay.Trace(BLOCK, ((3, 0.0), (60, 0.0), (1, 0.0), (64, 0.0)))
    result = replay.replay(image, trace, readers=2)
    assert result.digest == replay.expected_digest(image, trace)
    # The last block is the file's 100 byte tail.
    assert result.bytes_read == 3 * BLOCK + 100
    other = replay.Trace(BLOCK, ((60, 0.0), (3, 0.0), (1, 0.0), (64, 0.0)))
    assert replay.replay(image, other).digest != result.digest


def test_a_replay_keeps_the_guests_pacing(image):
    """Each reader waits its own reads' recorded gaps."""
    trace = replay.Trace(BLOCK, tuple((b, 0.05 * b) for b in range(8)))
    alone = replay.replay(image, trace)
    assert 0.35 <= alone.seconds < 0.35 + 0.3, alone
    # Two readers: reads 0, 2, 4, 6 and 1, 3, 5, 7 side by side, each
    # still 0.1 s after its reader's previous one.
    two = replay.replay(image, trace, readers=2)
    assert 0.35 <= two.seconds < 0.35 + 0.3, two
    assert two.digest == alone.digest


def test_replays_together_begin_at_once(image, tmp_path):
    trace = replay.Trace(BLOCK, ((0, 0.0), (1, 0.1)))
    results = replay.replay_together([image, image], trace, delay=0.2)
    assert [r.digest for r in results] == [
        replay.expected_digest(image, trace)] * 2
    assert all(r.seconds < 0.4 for r in results), results


def test_a_missing_file_or_a_bad_reader_count_is_an_error(image, tmp_path):
    trace = replay.Trace(BLOCK, ((0, 0.0),))
    with pytest.raises(FileNotFoundError):
        replay.replay(str(tmp_path / "absent"), trace)
    with pytest.raises(ValueError):
        replay.replay(image, trace, readers=0)
    with pytest.raises(FileNotFoundError):
        replay.replay_together([image, str(tmp_path / "absent")], trace)
