"""A watch cancelled while a check is answering stops (the worker's shutdown waits on it).

``asyncio.wait_for`` on Python 3.11 returns the inner result when the outer task
is cancelled in the tick the inner one finishes, swallowing the cancel; a
``ServerWatch.run`` built on it kept looping and the worker's shutdown hung.
"""

from __future__ import annotations

import asyncio

import pytest

from worker.fleet.server_watch import ServerWatch


@pytest.mark.parametrize("ticks", range(6))
async def test_a_cancel_landing_as_a_check_answers_stops_the_watch(ticks: int) -> None:
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[bool] = loop.create_future()

    async def check() -> bool:
        return await answer

    watch = ServerWatch(interval_s=0.01, timeout_s=5.0)
    watch.add("Redis", None, check)
    task = asyncio.create_task(watch.run())
    for _ in range(3):
        await asyncio.sleep(0)          # the watch is now waiting on the check
    answer.set_result(True)
    for _ in range(ticks):              # let the answer travel part of the way back
        await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=1.0)
    if not done:
        task.cancel()
        await asyncio.wait({task}, timeout=1.0)
    assert done, f"the watch ignored a cancel {ticks} ticks after the check answered"
    assert task.cancelled()
