# SPDX-License-Identifier: Apache-2.0
"""Awaiting with a deadline, on both paths (3.11+ and the 3.10 one)."""

import asyncio

import pytest

from gvfs_openstack import deadline


@pytest.fixture(params=["asyncio.timeout", "wait_for"])
def path(request, monkeypatch):
    if request.param == "wait_for":
        monkeypatch.setattr(deadline, "_timeout", None)
    elif deadline._timeout is None:
        pytest.skip("Python before 3.11 has no asyncio.timeout")


async def _answer(after, value):
    await asyncio.sleep(after)
    return value


def test_a_timely_answer_is_returned(path):
    assert asyncio.run(deadline.within(5.0, _answer(0.01, "ok"))) == "ok"


@pytest.mark.asyncio
async def test_a_late_answer_is_a_timeout_error_and_cancelled(path):
    state = {}

    async def late():
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            state["cancelled"] = True
            raise

    with pytest.raises(TimeoutError):
        await deadline.within(0.05, late())
    assert state == {"cancelled": True}


@pytest.mark.asyncio
async def test_a_future_can_be_awaited_too(path):
    future = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().call_later(0.01, future.set_result, 7)
    assert await deadline.within(5.0, future) == 7
