# SPDX-License-Identifier: Apache-2.0
"""How ``openstack gvfs migrate --wait`` shows a job going on.

Per image: its stage, the stage's bytes of the image's size, the rate
since the last look and the time left at that rate.  On a terminal the
lines are redrawn in place with a bar; elsewhere (a log, a pipe) a plain
line is printed when an image changes stage or every ``plain_every``
seconds.
"""

import time

from gvfs_openstack.migration import jobs

_STAGE_NAMES = {jobs.LOCAL_COPY: "local copy", jobs.TRANSFER: "DTN->DTN",
                jobs.REMOTE_COPY: "remote copy", jobs.DONE: "done"}
_BAR = 24
MIB = 1024 * 1024


def _eta(seconds):
    if seconds is None:
        return "--"
    seconds = int(seconds)
    return "%d:%02d" % divmod(seconds, 60) if seconds < 3600 else \
        "%d:%02d:%02d" % (seconds // 3600, seconds % 3600 // 60, seconds % 60)


class Progress:
    def __init__(self, stream, tty, plain_every=10.0, clock=time.monotonic):
        self.stream = stream
        self.tty = tty
        self.plain_every = plain_every
        self.clock = clock
        self._seen = {}      # position -> (stage, bytes, when)
        self._rates = {}     # position -> bytes/s
        self._drawn = 0
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
        if image["state"] in (jobs.FAILED, jobs.CANCELLED):
            return "%-20.20s %s: %s" % (name, image["state"],
                                        image["error"] or "")
        if stage == jobs.DONE:
            return "%-20.20s done" % name
        fraction = min(done / size, 1.0) if size else 0.0
        eta = (size - done) / rate if rate else None
        bar = ("[%-*s] " % (_BAR, "#" * int(fraction * _BAR))) \
            if self.tty else ""
        return "%-20.20s %-11s %s%5.1f%% %8.1f/%.1f MiB %7s MiB/s ETA %s" % (
            name, _STAGE_NAMES.get(stage, stage), bar, fraction * 100,
            done / MIB, size / MIB,
            "%.1f" % (rate / MIB) if rate is not None else "--", _eta(eta))

    def show(self, job):
        """Draw the job once more."""
        now = self.clock()
        stages_before = {p: s[0] for p, s in self._seen.items()}
        lines = [self._line(image, now) for image in job["images"]]
        lines.append("job %s: %s" % (job["id"], job["state"]))
        if self.tty:
            if self._drawn:
                self.stream.write("\x1b[%dA" % self._drawn)
            for line in lines:
                self.stream.write("\x1b[2K%s\n" % line)
            self._drawn = len(lines)
        else:
            changed = any(stages_before.get(i["position"]) != i["stage"]
                          for i in job["images"])
            if changed or job["state"] in jobs.FINISHED or \
                    self._last_plain is None or \
                    now - self._last_plain >= self.plain_every:
                for line in lines:
                    self.stream.write(line + "\n")
                self._last_plain = now
        self.stream.flush()
