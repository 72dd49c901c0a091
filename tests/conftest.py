# SPDX-License-Identifier: Apache-2.0
"""Loaded before any test module: keep eventlet out of the test process.

Nova's test fixtures import ``nova.tests.unit``, which monkey-patches the
process with eventlet unless Nova was set to native threading first --
and the proxies under test are asyncio.
"""

try:
    import nova  # noqa: F401
except ImportError:  # Nova is not installed: no Nova tests either.
    pass
else:
    from gvfs_lab import compute

    compute.threading_mode()
