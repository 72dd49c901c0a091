# SPDX-License-Identifier: Apache-2.0
"""How ``openstack gvfs migrate --wait`` shows a job going on.

On a terminal, rich draws a live bar per image, redrawn in place, that
fits the terminal's width (80 columns included): its name, stage,
percentage, bytes, rate and time left; failures are spelled out below
once the job ends.  Elsewhere (a log, a pipe) a plain line per image is
printed when an image changes stage or every ``plain_every`` seconds,
with the stage's bytes of the image's size, the rate since the last look
and the time left at that rate.
"""

import time

from rich import console as rich_console
from rich import progress as rich_progress

from gvfs_openstack.migration import states

_STAGE_NAMES = {states.LOCAL_COPY: "local copy", states.TRANSFER: "DTN->DTN",
                states.REMOTE_COPY: "remote copy", states.DONE: "done"}
MIB = 1024 * 1024


def _eta(seconds):
    if seconds is None:
        return "--"
    seconds = int(seconds)
    return "%d:%02d" % divmod(seconds, 60) if seconds < 3600 else \
        "%d:%02d:%02d" % (seconds // 3600, seconds % 3600 // 60, seconds % 60)


def view(stream, tty, plain_every=10.0, clock=time.monotonic,
         width=None):
    """The view of a job for ``stream``: live bars on a terminal."""
    if tty:
        return LiveBars(stream, width)
    return PlainLines(stream, plain_every, clock)


class LiveBars:
    """rich's progress bars, one per image, redrawn on each show."""

    def __init__(self, stream, width=None):
        self.console = rich_console.Console(
            file=stream, force_terminal=True, width=width)
        self.bars = rich_progress.Progress(
            rich_progress.TextColumn("{task.fields[name]:.16}"),
            rich_progress.TextColumn("{task.fields[stage]:11}"),
            rich_progress.BarColumn(bar_width=None),
            rich_progress.TaskProgressColumn(),
            rich_progress.TransferSpeedColumn(),
            rich_progress.TimeRemainingColumn(),
            console=self.console, auto_refresh=False, expand=True)
        self._tasks = {}     # position -> (task id, stage)
        self._started = False

    def _update(self, image):
        name = image["name"] or image["image_id"]
        stage = image["stage"]
        if image["state"] in (states.FAILED, states.CANCELLED):
            label = image["state"]
        else:
            label = _STAGE_NAMES.get(stage, stage)
        size = image["size"] or None
        done = size if stage == states.DONE else image["stage_bytes"] or 0
        known = self._tasks.get(image["position"])
        if known is None:
            task = self.bars.add_task(name, total=size, completed=done,
                                      name=name, stage=label)
        else:
            task, seen_stage = known
            if seen_stage != stage:   # A new stage starts from 0 bytes.
                self.bars.reset(task, total=size, completed=done,
                                name=name, stage=label)
            else:
                self.bars.update(task, completed=done, stage=label)
        self._tasks[image["position"]] = (task, stage)

    def show(self, job):
        if not self._started:
            self.bars.start()
            self._started = True
        for image in job["images"]:
            self._update(image)
        self.bars.refresh()
        if job["state"] in states.FINISHED:
            self.bars.stop()
            for image in job["images"]:
                if image["error"]:
                    self.console.print("%s: %s" % (
                        image["name"] or image["image_id"], image["error"]),
                        markup=False, highlight=False)
            self.console.print("job %s: %s" % (job["id"], job["state"]),
                               markup=False, highlight=False)


class PlainLines:
    """A line per image when something changed, for logs and pipes."""

    def __init__(self, stream, plain_every=10.0, clock=time.monotonic):
        self.stream = stream
        self.plain_every = plain_every
        self.clock = clock
        self._seen = {}      # position -> (stage, bytes, when)
        self._rates = {}     # position -> bytes/s
        self._last_plain = None

    def _line(self, image, now):
        position = image["position"]
        stage, done = image["stage"], image["stage_bytes"] or 0
        size = image["size"] or 0
        before = self._seen.get(position)
        if before and before[0] == stage and now > before[2] and \
                done >= before[1]:
            rate = (done - before[1]) / (now - before[2])
            self._rates[position] = rate
        elif not before or before[0] != stage:
            self._rates.pop(position, None)
        self._seen[position] = (stage, done, now)
        rate = self._rates.get(position)
        name = image["name"] or image["image_id"]
        if image["state"] in (states.FAILED, states.CANCELLED):
            return "%-20.20s %s: %s" % (name, image["state"],
                                        image["error"] or "")
        if stage == states.DONE:
            return "%-20.20s done" % name
        fraction = min(done / size, 1.0) if size else 0.0
        eta = (size - done) / rate if rate else None
        return "%-20.20s %-11s %5.1f%% %8.1f/%.1f MiB %7s MiB/s ETA %s" % (
            name, _STAGE_NAMES.get(stage, stage), fraction * 100,
            done / MIB, size / MIB,
            "%.1f" % (rate / MIB) if rate is not None else "--", _eta(eta))

    def show(self, job):
        """Print the job if something changed or it is time to."""
        now = self.clock()
        stages_before = {p: s[0] for p, s in self._seen.items()}
        lines = [self._line(image, now) for image in job["images"]]
        lines.append("job %s: %s" % (job["id"], job["state"]))
        changed = any(stages_before.get(i["position"]) != i["stage"]
                      for i in job["images"])
        if changed or job["state"] in states.FINISHED or \
                self._last_plain is None or \
                now - self._last_plain >= self.plain_every:
            for line in lines:
                self.stream.write(line + "\n")
            self._last_plain = now
        self.stream.flush()
