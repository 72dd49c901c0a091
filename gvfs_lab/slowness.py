# SPDX-License-Identifier: Apache-2.0
"""How much slower this machine runs the lab than the one it was tuned on.

Machines of one kind differ by 2-3x in CPU, and a CI run may be held
to a fraction of its cores (a cgroup's ``cpu.max``, as
``../shared/tools/slow-ci`` rehearses).  A deadline written for a fast
machine then ends a wait that would have succeeded.  Every lab wait
multiplies its deadline by :func:`factor`: a wait still ends as soon as
its condition holds, so a longer deadline costs nothing on a fast
machine and only bounds a hang on a slow one.

The factor is the product of:

* the CPU's speed: a fixed piece of pure-Python work, timed once per
  process, against :data:`REFERENCE_SECONDS` (what it took where the
  lab's deadlines were written), never below 1;
* the share of the machine's cores the process's cgroup may use
  (``cpu.max`` of cgroup v2, ``cpu.cfs_quota_us`` of v1): half the
  machine waits twice as long;
* ``GVFS_LAB_SLOWNESS``, when set, replaces both (a number >= 1).
"""

import functools
import os
import time

#: Seconds :func:`_work` takes, at best, on a fast machine of the kind
#: the lab's deadlines were written on (0.022 s measured on one).
REFERENCE_SECONDS = 0.03

#: The factor never goes past this: a wait is a bound, not a stall.
MOST = 6.0

ENV = "GVFS_LAB_SLOWNESS"


def _work():
    """Pure-Python work that runs at the interpreter's speed."""
    total = 0
    for i in range(300_000):
        total += i * i % 7
    return total


def cpu_factor(repeats=3):
    """The CPU's slowness against the reference: the fastest of a few."""
    best = None
    for _ in range(repeats):
        began = time.perf_counter()
        _work()
        spent = time.perf_counter() - began
        best = spent if best is None else min(best, spent)
    return max(1.0, best / REFERENCE_SECONDS)


def _cgroup_dirs():
    """This process's cgroup directories, innermost first (v2 and v1)."""
    try:
        with open("/proc/self/cgroup") as lines:
            entries = [line.rstrip("\n").split(":", 2) for line in lines]
    except OSError:
        return []
    dirs = []
    for _, controllers, path in entries:
        if controllers == "":
            base = "/sys/fs/cgroup"
        elif "cpu" in controllers.split(","):
            base = "/sys/fs/cgroup/" + controllers
            if not os.path.isdir(base):
                base = "/sys/fs/cgroup/cpu"
        else:
            continue
        path = path.strip("/")
        while True:
            dirs.append(os.path.join(base, path) if path else base)
            if not path:
                break
            path = os.path.dirname(path)
    return dirs


def _quota(directory):
    """Cores that ``directory``'s cgroup may use, or None for no limit."""
    try:
        with open(os.path.join(directory, "cpu.max")) as f:
            quota, period = f.read().split()
        if quota == "max":
            return None
        return int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(directory, "cpu.cfs_quota_us")) as f:
            quota = int(f.read())
        with open(os.path.join(directory, "cpu.cfs_period_us")) as f:
            period = int(f.read())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 else quota / period


def share_factor(cores=None):
    """The machine's cores over those this process's cgroups allow."""
    cores = cores or os.cpu_count() or 1
    allowed = [q for q in map(_quota, _cgroup_dirs()) if q is not None]
    if not allowed:
        return 1.0
    return max(1.0, cores / min(allowed))


@functools.lru_cache(maxsize=None)
def factor():
    """The number every lab deadline is multiplied by (1 to :data:`MOST`).

    Measured once per process; ``GVFS_LAB_SLOWNESS`` sets it instead.
    """
    given = os.environ.get(ENV)
    if given:
        try:
            return min(MOST, max(1.0, float(given)))
        except ValueError:
            raise ValueError("%s=%r is not a number" % (ENV, given)) \
                from None
    return min(MOST, cpu_factor() * share_factor())


def scaled(seconds):
    """``seconds`` of a fast machine, on this one."""
    return seconds * factor()
