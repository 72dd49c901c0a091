# SPDX-License-Identifier: Apache-2.0
"""Freed record buffers kept for reuse (glibc's mallopt)."""

import asyncio
import subprocess
import sys
import textwrap

import pytest

from gvfs_openstack import heap

MIB = 1024 * 1024

#: Bursts of eight 1 MiB buffers freed together, as records in flight
#: are: the minor page faults of 50 bursts after a first one.
_BURSTS = textwrap.dedent("""
    import resource, sys
    from gvfs_openstack import heap
    if sys.argv[1] != "0":
        assert heap.retain_freed(int(sys.argv[1]))
    def burst():
        buffers = [bytearray(1 << 20) for _ in range(8)]
        del buffers
    burst()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        burst()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def _faults(retain_bytes):
    done = subprocess.run([sys.executable, "-c", _BURSTS, str(retain_bytes)],
                          capture_output=True, text=True, check=True)
    return int(done.stdout)


needs_glibc = pytest.mark.skipif(heap._mallopt() is None,
                                 reason="the C library is not glibc")


@needs_glibc
def test_kept_buffers_are_reused_without_page_faults():
    pages = 50 * 8 * MIB // 4096
    # glibc's own policy: every burst's pages go back and fault in again.
    assert _faults(0) > pages // 2
    assert _faults(64 * MIB) < pages // 100


class _Recorder:
    def __init__(self, answer=1):
        self.calls = []
        self.answer = answer

    def __call__(self, param, value):
        self.calls.append((param, value))
        return self.answer


def test_buffers_up_to_the_retained_size_come_from_the_heap():
    mallopt = _Recorder()
    assert heap.retain_freed(8 * MIB, mallopt)
    assert mallopt.calls == [(heap.M_MMAP_THRESHOLD, 8 * MIB),
                             (heap.M_TRIM_THRESHOLD, 8 * MIB)]


def test_the_mmap_threshold_stays_within_what_glibc_accepts():
    mallopt = _Recorder()
    assert heap.retain_freed(256 * MIB, mallopt)
    assert mallopt.calls == [(heap.M_MMAP_THRESHOLD,
                              heap.MAX_MMAP_THRESHOLD),
                             (heap.M_TRIM_THRESHOLD, 256 * MIB)]


def test_zero_leaves_the_c_library_alone():
    mallopt = _Recorder()
    assert not heap.retain_freed(0, mallopt)
    assert mallopt.calls == []


def test_a_refusal_is_reported_not_raised(caplog):
    assert not heap.retain_freed(64 * MIB, _Recorder(answer=0))
    assert "refused" in caplog.text


#: gvfs-proxy's main() run for ``action`` with the action itself and
#: heap.retain_freed replaced: what it was asked to keep.  In a process of
#: its own, as main() configures the global configuration and logging.
_MAIN = textwrap.dedent("""
    import sys
    from gvfs_openstack.cmd import proxy
    from gvfs_openstack import heap
    kept = []
    heap.retain_freed = kept.append
    proxy._ACTIONS[sys.argv[1]] = lambda: 0
    assert proxy.main(sys.argv[2:]) == 0
    print(kept)
""")


@pytest.mark.parametrize("action, relays", [("serve", True),
                                            ("mount", True),
                                            ("stats", False)])
def test_the_programs_that_relay_records_keep_freed_buffers(
        tmp_path, action, relays):
    config = tmp_path / "proxy.conf"
    config.write_text("[proxy]\nheap_retain_mb = 16\n")
    argv = ["--config-file", str(config), action]
    if action == "mount":
        argv.append(str(tmp_path))
    done = subprocess.run([sys.executable, "-c", _MAIN, action, *argv],
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == (["[16777216]"] if relays else ["[]"])


async def _trimmed_after(activities, interval=0.01):
    """Trims made while ``activity()`` gives ``activities`` in turn."""
    figures = iter(activities)
    trims = []
    done = asyncio.Event()

    def activity():
        try:
            return next(figures)
        except StopIteration:
            done.set()
            return object()  # Unlike any figure: no trim for the end.

    task = asyncio.ensure_future(heap.trim_when_idle(
        activity, interval, trim=trims.append))
    await done.wait()
    task.cancel()
    return len(trims)


@pytest.mark.asyncio
async def test_no_trim_before_any_traffic():
    assert await _trimmed_after([0, 0, 0, 0]) == 0


@pytest.mark.asyncio
async def test_one_trim_after_traffic_stops():
    assert await _trimmed_after([0, 10, 20, 20, 20, 20]) == 1


@pytest.mark.asyncio
async def test_each_quiet_spell_after_traffic_is_trimmed_once():
    assert await _trimmed_after([0, 10, 10, 10, 30, 30, 30]) == 2


@pytest.mark.asyncio
async def test_no_trim_while_traffic_goes_on():
    assert await _trimmed_after([0, 10, 20, 30, 40]) == 0


@needs_glibc
def test_glibc_trims():
    assert heap._malloc_trim()(0) in (0, 1)
