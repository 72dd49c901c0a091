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


def test_machine_meter_counts_busy_time_not_sleep():
    with cpu.Meter() as busy:
        _spin(0.3)
    with cpu.Meter() as idle:
        time.sleep(0.3)
    # Other processes may add to either; the spin is on top of them.
    assert busy.seconds >= 0.25
    # Counting idle time would give every core's 0.3 s; an otherwise
    # quiet machine spends next to nothing while this one sleeps.
    assert idle.seconds < 0.5 * os.cpu_count() * 0.3


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
