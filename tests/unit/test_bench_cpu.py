# SPDX-License-Identifier: Apache-2.0
"""The benchmarks' CPU meters: what a path needs of the machine."""

import os
import time

import pytest

from tools.bench import cpu


def _spin(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_process_seconds_counts_this_process_cpu():
    before = cpu.process_seconds(os.getpid())
    _spin(0.3)
    spent = cpu.process_seconds(os.getpid()) - before
    assert 0.25 <= spent <= 0.5


def test_machine_meter_counts_a_spin():
    with cpu.Meter() as busy:
        _spin(0.3)
    # Other processes may add to it; the spin is on top of them.
    assert busy.seconds >= 0.25


def test_machine_seconds_leave_out_idle_iowait_and_steal(tmp_path):
    # The machine's own idle time depends on whatever else runs (the
    # README's test command runs other tox environments beside the unit
    # tests), so the fields are checked on a /proc/stat of known values.
    stat = tmp_path / "stat"
    ticks = os.sysconf("SC_CLK_TCK")
    #              user nice system idle     iowait irq softirq steal
    stat.write_text("cpu  %d %d %d %d %d %d %d %d 0 0\ncpu0 0 0 0 0\n" % (
        3 * ticks, ticks, 2 * ticks, 1000 * ticks, 50 * ticks, ticks,
        ticks, 70 * ticks))
    assert cpu.machine_seconds(str(stat)) == pytest.approx(8.0)


def test_meter_sums_its_blocks():
    meter = cpu.Meter()
    with meter:
        _spin(0.2)
    first = meter.seconds
    with meter:
        _spin(0.2)
    assert meter.seconds >= first + 0.15


def test_ceiling_is_every_core_over_the_cost_of_a_gib():
    assert cpu.per_gib(1.5, 512 * 1024 * 1024) == 3.0
    assert cpu.ceiling_mib_s(4.0, cores=2) == 512.0
    assert cpu.ceiling_mib_s(2.0, cores=8) == 4096.0
    assert cpu.ceiling_mib_s(1.0) == pytest.approx(os.cpu_count() * 1024)
