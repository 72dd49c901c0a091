# SPDX-License-Identifier: Apache-2.0
"""The functional suite in parallel pytest-xdist workers.

The suite spends much of its time waiting: on emulated WAN round trips,
on services starting, on guests booting under TCG, with one core idle.
Two workers (``--dist loadfile``) overlap those waits.  What that needs
of the lab:

- A test module runs whole in one worker: its tests share its module
  fixtures (labs, clouds).  Session fixtures (Keystone, the two-site DR
  lab) are built by each worker that needs one.
- The longest modules start first, so the run does not end with one
  worker busy on a long module and the other idle.
- What the machine has only one of (rpcbind, the fusectl mount) is held
  by the controller for the whole run, not by whichever worker's lab
  happens to start it first and takes it away when it ends.
- Everything else a lab makes is already its own: free ports, workdirs
  under the worker's own ``basetemp``, network namespaces and veths
  named by PID, libvirtd in its own mount namespace, iptables rules
  added with ``-w`` (the xtables lock) and tagged with the PID.
"""

import contextlib
import shutil
import tempfile

import pytest

from gvfs_lab import fusemount
from gvfs_lab import ganesha

#: Where the controller keeps the parts it holds (an ExitStack).
MACHINE_PARTS = pytest.StashKey[contextlib.ExitStack]()


def hold_machine_parts():
    """fusectl mounted and an rpcbind running, until the stack closes.

    Either is left alone when the machine already has it, and the stack
    undoes only what it did.
    """
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(fusemount.fusectl_mounted())
        workdir = tempfile.mkdtemp(prefix="gvfs-lab-machine-")
        stack.callback(shutil.rmtree, workdir, True)
        stack.callback(ganesha.Rpcbind(workdir).stop)
    except BaseException:
        stack.close()
        raise
    return stack


def module_of(item):
    """The name of the test module ``item`` was collected from."""
    return item.module.__name__.rpartition(".")[2]


def longest_first(items, longest_modules):
    """Order ``items`` with ``longest_modules`` first, in the order given.

    Other modules follow in collection order; a module's tests keep
    theirs.  Every worker sorts the same collection the same way, as
    xdist requires, and with ``--no-loadscope-reorder`` it hands out
    the modules in this order.
    """
    rank = {module: i for i, module in enumerate(longest_modules)}
    first_seen = {}
    for position, item in enumerate(items):
        first_seen.setdefault(module_of(item), position)
    items.sort(key=lambda item: (rank.get(module_of(item), len(rank)),
                                 first_seen[module_of(item)]))
