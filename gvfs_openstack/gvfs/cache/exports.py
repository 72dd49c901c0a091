"""Which export a file handle belongs to, and that export's policy.

NFS file handles are opaque, so the client proxy learns the export of a
handle from what passes through it: MNT replies give an export's root
handle, LOOKUP/CREATE/MKDIR replies give a child of a known directory.
A handle it never saw (for instance one a client kept across a proxy
restart) falls back to the default policy.
"""

import collections

MAX_HANDLES = 65536


class ExportPolicies:
    def __init__(self, default_after, overrides=None):
        """Policies: ``overrides`` maps export paths to seconds."""
        self.default_after = default_after
        self.overrides = {path.rstrip("/") or "/": after
                          for path, after in (overrides or {}).items()}
        self._export_of = collections.OrderedDict()

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

    def export_of(self, fh):
        """The export path of ``fh``, or None if it was never seen."""
        return self._export_of.get(bytes(fh))

    def revalidate_after(self, fh):
        """Seconds the attributes of ``fh`` are trusted."""
        export = self.export_of(fh)
        if export is None:
            return self.default_after
        # The longest configured path that holds the export (a policy may
        # name a parent of the mounted directory).
        best = None
        for path in self.overrides:
            if export == path or export.startswith(path.rstrip("/") + "/"):
                if best is None or len(path) > len(best):
                    best = path
        return self.default_after if best is None else self.overrides[best]
