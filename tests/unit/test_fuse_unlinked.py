# SPDX-License-Identifier: Apache-2.0
"""Files unlinked while open: hidden until the last close, never left.

The kernel sends RELEASE after close() has returned, so a close can reach
the daemon while the unlink of the same file is still renaming it out of
sight; the file must still go.
"""

import asyncio
import types

import pyfuse3
import pytest

from gvfs_openstack.fuse import fusefs
from gvfs_openstack.fuse import unlinked

ROOT, DIR, FILE, HIDDEN_DIR = b"root", b"dir", b"file", b"hidden-dir"


class Export:
    """Answers the NFS calls an unlink makes; RENAMEs wait for a go."""

    def __init__(self):
        self.root = ROOT
        self.client = types.SimpleNamespace(rsize=1 << 20)
        self.calls = []
        self.rename_may_finish = asyncio.Event()
        self.rename_started = asyncio.Event()

    async def call(self, proc, *args, **kwargs):
        self.calls.append((proc,) + args)
        if proc == "lookup":
            return types.SimpleNamespace(object=FILE)
        if proc == "mkdir":
            return HIDDEN_DIR
        if proc == "rename":
            self.rename_started.set()
            await self.rename_may_finish.wait()
        return None

    def removed(self):
        return [c[1:] for c in self.calls if c[0] == "remove"]


def _mount_with_an_open_file(export):
    fuse = fusefs.GvfsFuse(
        export, unlinked_files=unlinked.UnlinkedFiles(export, "m"))
    parent = fuse.inodes.remember(DIR)
    handle = fuse._opened(fuse.inodes.remember(FILE))
    return fuse, parent, handle


def _unlink(fuse, parent):
    return fuse.unlink(parent, b"f", pyfuse3.RequestContext())


@pytest.mark.asyncio
async def test_a_close_during_the_hiding_rename_still_removes_the_file():
    export = Export()
    fuse, parent, handle = _mount_with_an_open_file(export)
    unlinking = asyncio.ensure_future(_unlink(fuse, parent))
    await export.rename_started.wait()
    await fuse.release(handle)          # The last close, meanwhile.
    assert export.removed() == []       # Not hidden yet: nothing to drop.
    export.rename_may_finish.set()
    await unlinking
    (hidden_dir, name), = export.removed()
    assert hidden_dir == HIDDEN_DIR and name.startswith("m-")


@pytest.mark.asyncio
async def test_a_file_still_open_stays_hidden_until_its_last_close():
    export = Export()
    export.rename_may_finish.set()
    fuse, parent, handle = _mount_with_an_open_file(export)
    await _unlink(fuse, parent)
    assert export.removed() == []
    await fuse.release(handle)
    (hidden_dir, name), = export.removed()
    assert hidden_dir == HIDDEN_DIR and name.startswith("m-")
