# SPDX-License-Identifier: Apache-2.0
import asyncio

import pytest

from gvfs_openstack.proxy.drc import DuplicateRequestCache
from gvfs_openstack.proxy.drc import request_key


def test_key_depends_on_xid_and_content():
    a = request_key(1, 100003, 8, b"cred", b"args")
    assert a == request_key(1, 100003, 8, b"cred", b"args")
    assert a != request_key(2, 100003, 8, b"cred", b"args")
    assert a != request_key(1, 100003, 8, b"cred", b"other")


@pytest.mark.asyncio
async def test_in_progress_and_completed_entries_are_shared():
    drc = DuplicateRequestCache()
    first, new = drc.lookup_or_reserve("k")
    again, new_again = drc.lookup_or_reserve("k")
    assert new and not new_again and again is first
    first.set_result(b"reply")
    assert await drc.lookup_or_reserve("k")[0] == b"reply"


@pytest.mark.asyncio
async def test_failed_entries_are_forgotten_so_a_retry_executes():
    drc = DuplicateRequestCache()
    future, _ = drc.lookup_or_reserve("k")
    future.cancel()
    await asyncio.sleep(0)
    assert drc.lookup_or_reserve("k")[1] is True


@pytest.mark.asyncio
async def test_cache_is_bounded():
    clock = [0.0]
    drc = DuplicateRequestCache(max_entries=3, max_age=10,
                                clock=lambda: clock[0])
    for i in range(5):
        drc.lookup_or_reserve(i)[0].set_result(b"")
    assert len(drc) <= 4
    clock[0] = 100
    drc.lookup_or_reserve("new")
    assert len(drc) == 1
