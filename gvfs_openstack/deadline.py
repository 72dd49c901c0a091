# SPDX-License-Identifier: Apache-2.0
"""Awaiting with a deadline, without a task per await.

``asyncio.wait_for`` runs a coroutine as a task of its own (and wraps a
future in a waiter); on the paths taken once per NFS call -- the mount's
calls to the proxy, the proxy's calls upstream, the NFS client's wait
for its reply -- that was a tenth of the CPU per cached READ.
``asyncio.timeout`` (Python 3.11+) cancels the calling task at the
deadline instead.
"""

import asyncio

_timeout = getattr(asyncio, "timeout", None)


async def within(seconds, awaitable):
    """``awaitable``'s result; TimeoutError after ``seconds``."""
    if _timeout is None:
        try:
            return await asyncio.wait_for(awaitable, seconds)
        except asyncio.TimeoutError:
            raise TimeoutError() from None
    async with _timeout(seconds):
        return await awaitable
