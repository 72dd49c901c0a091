# SPDX-License-Identifier: Apache-2.0
"""Memory, descriptors and CPU of the lab's processes over a long run.

A leak shows only over time: a proxy that keeps a buffer per dead
connection, or a socket per reconnect, passes every short test.  The soak
samples each process from ``/proc`` (no third-party module, nothing
attached to the process) while it runs, and judges growth afterwards.

Processes are named by a callable returning their current PID, because a
restarted server proxy is another process on the same port; a sample
taken while a process is down is recorded as missing, not as zero.
"""

import csv
import os
import statistics
import threading
import time

MIB = 1024 * 1024
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def read_proc(pid):
    """``(rss, open_fds, cpu_seconds, rss_anon)`` of ``pid``; None if gone.

    RSS counts the mapped file pages too (the cache's tag maps); the
    anonymous part alone is where a leak of Python objects shows.
    """
    try:
        rss = anon = None
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    rss = int(line.split()[1]) * 1024
                elif line.startswith("RssAnon:"):
                    anon = int(line.split()[1]) * 1024
        fds = len(os.listdir("/proc/%d/fd" % pid))
        with open("/proc/%d/stat" % pid) as f:
            # The command name may hold spaces: fields count from its ")".
            fields = f.read().rsplit(")", 1)[1].split()
        cpu = (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return None
    if rss is None:
        return None  # A zombie has no memory left to report.
    return rss, fds, cpu, anon


class Sample:
    __slots__ = ("t", "pid", "rss", "fds", "cpu", "anon")

    def __init__(self, t, pid, rss, fds, cpu, anon):
        self.t = t
        self.pid = pid
        self.rss = rss
        self.fds = fds
        self.cpu = cpu
        self.anon = anon


class Monitor:
    """Samples ``{name: pid_callable}`` every ``interval`` seconds.

    ``t`` of a sample is seconds since :meth:`start`; ``series[name]``
    holds the samples of that process in order (``rss`` None: it was
    down).
    """

    def __init__(self, processes, interval):
        self.processes = dict(processes)
        self.interval = interval
        self.series = {name: [] for name in self.processes}
        self.started = None
        self._stop = threading.Event()
        self._thread = None

    def start(self, started=None):
        """Sample from now on; ``started``: the monotonic time of t=0."""
        self.started = time.monotonic() if started is None else started
        self._thread = threading.Thread(target=self._run, name="soak-monitor",
                                        daemon=True)
        self._thread.start()

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.sample()

    def _run(self):
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self):
        now = time.monotonic() - self.started
        for name, pid_of in self.processes.items():
            pid = pid_of()
            got = read_proc(pid) if pid else None
            self.series[name].append(
                Sample(now, pid, *(got or (None,) * 4)))

    def between(self, name, start, end):
        """Samples of ``name`` taken in [start, end) with the process up."""
        return [s for s in self.series[name]
                if start <= s.t < end and s.rss is not None]

    def median(self, name, field, start, end):
        values = [getattr(s, field) for s in self.between(name, start, end)]
        return statistics.median(values) if values else None

    def table(self, width=None):
        """Lines of a table, one row per sampling round.

        ``width``: at most that many rows, evenly spread, first and last
        kept (a ten-minute run has hundreds of rounds).
        """
        names = list(self.series)
        rounds = len(self.series[names[0]])
        rows = range(rounds)
        if width and rounds > width:
            step = (rounds - 1) / (width - 1)
            rows = sorted({round(i * step) for i in range(width)})
        head = "%8s" % "t (s)" + "".join(
            " | %-24s" % (name + " RSS MiB / fds / pid") for name in names)
        lines = [head, "-" * len(head)]
        for i in rows:
            cells = []
            for name in names:
                s = self.series[name][i]
                cell = "down" if s.rss is None else "%7.1f %5d %8d" % (
                    s.rss / MIB, s.fds, s.pid)
                cells.append(" | %-24s" % cell)
            lines.append("%8.1f" % self.series[names[0]][i].t
                         + "".join(cells))
        return lines

    def write_csv(self, path):
        with open(path, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(["t_seconds", "process", "pid", "rss_bytes",
                          "open_fds", "cpu_seconds", "rss_anon_bytes"])
            for name, samples in self.series.items():
                for s in samples:
                    out.writerow(["%.2f" % s.t, name, s.pid,
                                  "" if s.rss is None else s.rss,
                                  "" if s.fds is None else s.fds,
                                  "" if s.cpu is None else "%.2f" % s.cpu,
                                  "" if s.anon is None else s.anon])

    def write_png(self, path, windows=()):
        """A plot of RSS and fds with the fault windows shaded.

        False (and nothing written) without matplotlib, which the soak's
        environment need not have: the table and CSV say the same.
        """
        try:
            import matplotlib
            matplotlib.use("Agg")
            from matplotlib import pyplot
        except ImportError:
            return False
        fig, (top, bottom) = pyplot.subplots(2, 1, sharex=True,
                                             figsize=(10, 6))
        for name, samples in self.series.items():
            up = [s for s in samples if s.rss is not None]
            top.plot([s.t for s in up], [s.rss / MIB for s in up],
                     ".-", label=name)
            bottom.plot([s.t for s in up], [s.fds for s in up], ".-",
                        label=name)
        for start, end in windows:
            for axes in (top, bottom):
                axes.axvspan(start, end, color="red", alpha=0.15)
        top.set_ylabel("RSS (MiB)")
        bottom.set_ylabel("open fds")
        bottom.set_xlabel("seconds (faults shaded)")
        top.legend()
        fig.tight_layout()
        fig.savefig(path)
        pyplot.close(fig)
        return True
