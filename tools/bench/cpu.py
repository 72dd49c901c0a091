# SPDX-License-Identifier: Apache-2.0
"""CPU time of the whole machine and of single processes.

On a machine with few cores a data path that needs every core is bound by
the CPU all its processes and the kernel spend per byte, not by its
design: with ``cores`` busy, no path moves more than ``cores / (CPU
seconds per GiB)`` GiB/s.  Measuring that figure beside each rate tells a
path that waits (latency, one call in flight) from one that cannot go
faster on this machine, and tells what a machine with more cores would
allow.
"""

import os

_TICKS = os.sysconf("SC_CLK_TCK")
GIB = 1024 ** 3


def process_seconds(pid):
    """User + system CPU seconds of ``pid`` so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def machine_seconds(stat_path="/proc/stat"):
    """CPU seconds every core of the machine spent busy so far.

    User, nice, system, interrupts and softirqs (a loopback socket's
    receive work is often done there); not idle, I/O wait or the time a
    hypervisor took (steal).
    """
    with open(stat_path) as f:
        fields = f.readline().split()
    user, nice, system, _idle, _iowait, irq, softirq = (
        int(v) for v in fields[1:8])
    return (user + nice + system + irq + softirq) / _TICKS


class Meter:
    """Machine CPU seconds spent inside its ``with`` blocks, summed."""

    def __init__(self):
        self._start = None
        self.seconds = 0.0

    def __enter__(self):
        self._start = machine_seconds()
        return self

    def __exit__(self, *exc):
        self.seconds += machine_seconds() - self._start


def per_gib(seconds, nbytes):
    return seconds * GIB / nbytes


def ceiling_mib_s(cpu_s_per_gib, cores=None):
    """The highest rate, in MiB/s, at which every core busy allows."""
    return (cores or os.cpu_count()) * 1024.0 / cpu_s_per_gib
