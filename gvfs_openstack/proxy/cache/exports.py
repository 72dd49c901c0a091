# SPDX-License-Identifier: Apache-2.0
"""Which export a file handle belongs to, and that export's policies.

Three policies are kept per export: how long file attributes are trusted
before a READ asks the server again (consistency), how long the proxy may
answer a GETATTR itself, and whether WRITEs are written back or through.

NFS file handles are opaque, so the client proxy learns the export of a
handle from what passes through it: MNT replies give an export's root
handle, LOOKUP/CREATE/MKDIR replies give a child of a known directory.
A handle it never saw (for instance one a client kept across a proxy
restart) falls back to the default policy, and so does the handle of a
file removed through the proxy (forgotten then, so that the map does not
fill with files that are gone) until a LOOKUP finds it again.
"""

import collections

MAX_HANDLES = 65536


def _normalized(table):
    return {path.rstrip("/") or "/": value
            for path, value in (table or {}).items()}


class ExportPolicies:
    def __init__(self, default_after, overrides=None, write_back=False,
                 write_back_overrides=None, answer_after=0.0,
                 answer_overrides=None):
        """Default policies and per-export ones.

        ``overrides`` and ``answer_overrides`` map export paths to
        seconds, ``write_back_overrides`` export paths to True
        (write-back) or False (write-through).
        """
        self.default_after = default_after
        self.overrides = _normalized(overrides)
        self.answer_after = answer_after
        self.answer_overrides = _normalized(answer_overrides)
        self.write_back = write_back
        self.write_back_overrides = _normalized(write_back_overrides)
        self._export_of = collections.OrderedDict()

    def set_windows(self, default_after, overrides, answer_after,
                    answer_overrides):
        """New revalidation and GETATTR-answer windows (a reload).

        The write policies stay: turning write-back off under dirty data
        is a restart's job, after its flush.
        """
        self.default_after = default_after
        self.overrides = _normalized(overrides)
        self.answer_after = answer_after
        self.answer_overrides = _normalized(answer_overrides)

    def _remember(self, fh, export):
        self._export_of[bytes(fh)] = export
        self._export_of.move_to_end(bytes(fh))
        if len(self._export_of) > MAX_HANDLES:
            self._export_of.popitem(last=False)

    def learn_root(self, fh, export):
        self._remember(fh, export.rstrip("/") or "/")

    def learn_child(self, dir_fh, fh):
        export = self._export_of.get(bytes(dir_fh))
        if export is not None and fh:
            self._remember(fh, export)

    def forget(self, fh):
        """``fh`` is gone: its export need not be remembered."""
        self._export_of.pop(bytes(fh), None)

    def export_of(self, fh):
        """The export path of ``fh``, or None if it was never seen."""
        return self._export_of.get(bytes(fh))

    def _policy(self, fh, table, default):
        export = self.export_of(fh)
        if export is None:
            return default
        # The longest configured path that holds the export (a policy may
        # name a parent of the mounted directory).
        best = None
        for path in table:
            if export == path or export.startswith(path.rstrip("/") + "/"):
                if best is None or len(path) > len(best):
                    best = path
        return default if best is None else table[best]

    def revalidate_after(self, fh):
        """Seconds the attributes of ``fh`` are trusted."""
        return self._policy(fh, self.overrides, self.default_after)

    def answers_getattr_for(self, fh):
        """Seconds after a check the proxy answers GETATTR of ``fh``.

        0 (the default) forwards every GETATTR.
        """
        return self._policy(fh, self.answer_overrides, self.answer_after)

    def writes_back(self, fh):
        """Whether WRITEs to ``fh`` are written back (else through)."""
        return self._policy(fh, self.write_back_overrides, self.write_back)
