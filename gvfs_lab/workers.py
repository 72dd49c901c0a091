# SPDX-License-Identifier: Apache-2.0
"""The functional suite in parallel pytest-xdist workers.

The suite spends much of its time waiting: on emulated WAN round trips,
on services starting, on guests booting under TCG, with one core idle.
Two workers (``--dist loadfile``, by units of :func:`group_scheduler`)
overlap those waits.  What that needs
of the lab:

- A test module runs whole in one worker: its tests share its module
  fixtures (labs, clouds).  Modules that share a costly session fixture
  (the two-site DR lab) run as one group in one worker, which builds it
  once; Keystone is built by each worker.
- The longest work units start first, by the seconds each module took
  in a measured run (:func:`schedule`), so the run does not end with
  one worker busy on a long unit and the other idle.  Each run prints
  its modules' seconds (:class:`ModuleTimes`) to measure again.
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


def group_of(module, shared):
    """The work unit ``module`` runs in: a shared group's name, or its own.

    ``shared``: ``{group: modules}`` of modules that use one costly
    session fixture (the two-site DR lab): in one group they run in one
    worker, which builds that fixture once instead of once per worker.
    """
    for group, modules in shared.items():
        if module in modules:
            return group
    return module


def schedule(items, seconds, shared):
    """Order ``items`` by work unit, the longest unit first.

    Each module, or each group of ``shared`` modules, is one work unit
    (:func:`group_of`).  Units run longest
    first by ``seconds`` (``{module: seconds}`` measured in a run of
    the suite), the rule that keeps the run from ending on one long unit
    alone; a unit's length is the sum of its modules'.  A module not in
    ``seconds`` counts as :data:`UNMEASURED` and keeps its collection
    order among its equals.  A unit's tests keep their order, module by
    module.  Returns ``{item: group}``; every worker sorts the same
    collection the same way, as xdist requires.
    """
    group = {item: group_of(module_of(item), shared) for item in items}
    length, first_seen, module_seen = {}, {}, {}
    for position, item in enumerate(items):
        module = module_of(item)
        unit = group[item]
        if module not in module_seen:
            module_seen[module] = position
            length[unit] = length.get(unit, 0.0) + seconds.get(
                module, UNMEASURED)
        first_seen.setdefault(unit, position)
    items.sort(key=lambda item: (-length[group[item]],
                                 first_seen[group[item]],
                                 module_seen[module_of(item)]))
    return group


def group_scheduler(config, log, shared):
    """xdist's scheduler of whole work units (``pytest_xdist_make_scheduler``).

    ``--dist loadfile`` hands out one module at a time; this one hands
    out one unit of :func:`group_of` at a time: a module, or the group
    of ``shared`` modules that use one costly session fixture.  (xdist's
    own ``loadgroup`` writes the group into each node id, which pytest
    9 no longer lets a plugin change: seen with pytest 9.2 and
    pytest-xdist 3.8, one module's tests went to both workers.)
    """
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            path = nodeid.split("::", 1)[0]
            module = path.rpartition("/")[2].removesuffix(".py")
            return group_of(module, shared)

    return GroupScheduling(config, log)


#: Seconds a module not yet measured is taken to last.
UNMEASURED = 30.0


class ModuleTimes:
    """A pytest plugin: each module's seconds, printed when the run ends.

    Setup, call and teardown of every test add up by module and by the
    worker that ran it, as the controller hears of them, so that the
    seconds :func:`schedule` balances by can be measured again from any
    run (CI's included) and the two workers' loads compared.
    """

    def __init__(self):
        self.seconds = {}
        self.worker = {}

    def pytest_runtest_logreport(self, report):
        module = report.nodeid.split("::", 1)[0].rpartition("/")[2]
        module = module.removesuffix(".py")
        self.seconds[module] = self.seconds.get(module, 0.0) + \
            report.duration
        node = getattr(report, "node", None)
        if node is not None:
            self.worker[module] = node.gateway.id

    def pytest_terminal_summary(self, terminalreporter):
        if not self.seconds:
            return
        write = terminalreporter.write_line
        terminalreporter.section("seconds by module")
        loads = {}
        for module, seconds in sorted(self.seconds.items(),
                                      key=lambda kv: -kv[1]):
            worker = self.worker.get(module, "-")
            loads[worker] = loads.get(worker, 0.0) + seconds
            write("%8.1f  %-4s %s" % (seconds, worker, module))
        write("by worker: " + ", ".join(
            "%s %.0f s" % kv for kv in sorted(loads.items())))
