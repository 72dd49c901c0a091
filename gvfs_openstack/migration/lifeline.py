# SPDX-License-Identifier: Apache-2.0
"""Processes of a job end with the job's runner.

A runner killed with SIGKILL cannot stop its stage workers or their
``globus-url-copy``; the kernel does it for them (``PR_SET_PDEATHSIG``),
so no stage goes on writing after the job store was told it stopped, and
the next runner resumes alone.
"""

import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid):
    """Have the kernel kill this process when ``parent_pid`` ends.

    Call it in the child, first thing.  If the parent is already gone,
    the child exits now.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_PDEATHSIG) failed")
    if os.getppid() != parent_pid:
        os._exit(1)


def preexec(parent_pid=None):
    """A ``preexec_fn`` for subprocesses that must die with their parent."""
    parent_pid = parent_pid or os.getpid()
    return lambda: die_with_parent(parent_pid)
