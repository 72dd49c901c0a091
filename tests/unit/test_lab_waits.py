# SPDX-License-Identifier: Apache-2.0
"""The lab's waits: deadlines that scale with the machine, and checks
that cannot be evaluated yet counted as "not yet"."""

import itertools

import pytest

from gvfs_lab import process
from gvfs_lab import slowness


@pytest.fixture
def factor(monkeypatch):
    """Set the machine's slowness for one test."""
    def set_to(value):
        monkeypatch.setenv(slowness.ENV, str(value))
        slowness.factor.cache_clear()
    yield set_to
    slowness.factor.cache_clear()


def test_a_check_that_cannot_be_evaluated_yet_is_asked_again(factor):
    """A series not yet exported, a file not yet written: not yet.

    Not a failure: the check is asked again.
    """
    factor(1)
    answers = iter([KeyError("series"), FileNotFoundError("stats.json"),
                    ValueError("half a document"), False, True])

    def ready():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    process.wait_until(ready, "ready", timeout=5, interval=0.01)
    assert next(answers, "drained") == "drained"


def test_the_deadline_names_the_last_error(factor):
    factor(1)
    with pytest.raises(process.LabError) as e:
        process.wait_until(lambda: {}["gvfs_proxy_series"], "exported",
                           timeout=0.1, interval=0.01)
    assert "not exported after 0s" in str(e.value)
    assert "KeyError: 'gvfs_proxy_series'" in str(e.value)
    assert isinstance(e.value.__cause__, KeyError)


def test_other_errors_are_failures_at_once(factor):
    factor(1)
    calls = itertools.count()

    def broken():
        next(calls)
        raise ZeroDivisionError("a bug in the check")

    with pytest.raises(ZeroDivisionError):
        process.wait_until(broken, "never", timeout=30, interval=0.01)
    assert next(calls) == 1


def test_a_slower_machine_waits_longer(factor, monkeypatch):
    """The deadline is the timeout times the machine's factor."""
    clock = itertools.count(step=1.0)
    monkeypatch.setattr(process.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(process.time, "sleep", lambda seconds: None)
    for value, polls in ((1, 10), (3, 30)):
        factor(value)
        asked = itertools.count()
        with pytest.raises(process.LabError):
            process.wait_until(lambda: next(asked) < 0, "x", timeout=10)
        assert next(asked) == polls
        clock = itertools.count(step=1.0)
    factor(100)
    assert slowness.factor() == slowness.MOST


def test_a_cgroups_cpu_quota_is_read_as_cgroup_v2_and_v1_write_it(
        tmp_path):
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("100000 100000\n")
    assert slowness._quota(str(v2)) == 1.0
    (v2 / "cpu.max").write_text("max 100000\n")
    assert slowness._quota(str(v2)) is None
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "cpu.cfs_quota_us").write_text("50000\n")
    (v1 / "cpu.cfs_period_us").write_text("100000\n")
    assert slowness._quota(str(v1)) == 0.5
    (v1 / "cpu.cfs_quota_us").write_text("-1\n")
    assert slowness._quota(str(v1)) is None


def test_half_the_machine_doubles_the_deadlines(monkeypatch):
    monkeypatch.setattr(slowness, "_cgroup_dirs", lambda: ["a", "b"])
    quotas = {"a": None, "b": 1.0}
    monkeypatch.setattr(slowness, "_quota", quotas.get)
    assert slowness.share_factor(cores=2) == 2.0
    quotas["b"] = None
    assert slowness.share_factor(cores=2) == 1.0


def test_a_malformed_setting_is_a_clear_error(factor):
    factor("fast")
    with pytest.raises(ValueError) as e:
        slowness.factor()
    assert slowness.ENV in str(e.value)
