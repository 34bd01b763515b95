"""The background loops' one helper (worker.fleet.periodic): a pass every interval until
cancelled, a failed pass logged by its type and tried again, a clean stop."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from worker.fleet import periodic

INTERVAL_S = 0.01


class Recorder:
    """Stands in for the module's structlog logger: what was logged, with which fields."""

    def __init__(self) -> None:
        self.warnings: list[tuple[str, dict[str, Any]]] = []
        self.debug_lines: list[tuple[str, dict[str, Any]]] = []

    def warning(self, event: str, **fields: Any) -> None:
        self.warnings.append((event, fields))

    def debug(self, event: str, **fields: Any) -> None:
        self.debug_lines.append((event, fields))


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(periodic, "log", recorder)
    return recorder


async def until(condition: Any, timeout_s: float = 5.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not condition():  # noqa: ASYNC110 - polls counters the work functions bump
            await asyncio.sleep(INTERVAL_S / 2)


async def test_the_work_runs_every_interval_until_stopped() -> None:
    passes: list[float] = []

    async def work() -> None:
        passes.append(asyncio.get_running_loop().time())

    task = asyncio.create_task(periodic.every(INTERVAL_S, work, name="test pass"))
    await until(lambda: len(passes) >= 3)
    await periodic.stop(task)
    assert task.cancelled()
    count = len(passes)
    await asyncio.sleep(INTERVAL_S * 3)
    assert len(passes) == count, "no pass after the stop"
    assert all(b - a >= INTERVAL_S * 0.9 for a, b in itertools.pairwise(passes))


async def test_a_failed_pass_is_logged_by_type_and_tried_again(logged: Recorder) -> None:
    calls = 0

    async def work() -> None:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise ValueError("secret user text in the message")

    task = asyncio.create_task(periodic.every(INTERVAL_S, work, name="recovery pass"))
    await until(lambda: calls >= 4)
    await periodic.stop(task)
    assert logged.warnings[:2] == [("recovery pass failed", {"error": "ValueError"})] * 2
    assert len(logged.warnings) == 2, "the passes after the failures went through"
    assert "secret" not in repr(logged.warnings)


async def test_a_pass_failed_by_a_server_away_is_not_logged_again(logged: Recorder) -> None:
    # The process says once that the server is away (worker.fleet.server_watch).
    calls = 0

    async def work() -> None:
        nonlocal calls
        calls += 1
        if calls <= 3:
            raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379.")

    task = asyncio.create_task(periodic.every(INTERVAL_S, work, name="heartbeat"))
    await until(lambda: calls >= 4)
    await periodic.stop(task)
    assert logged.warnings == []
    assert logged.debug_lines[:3] == [("heartbeat failed", {"error": "ConnectionError"})] * 3


async def test_the_first_pass_waits_the_first_delay() -> None:
    started = asyncio.get_running_loop().time()
    first: list[float] = []

    async def work() -> None:
        first.append(asyncio.get_running_loop().time() - started)

    task = asyncio.create_task(periodic.every(60.0, work, name="test pass", first_delay_s=0.05))
    await until(lambda: bool(first))
    await periodic.stop(task)
    assert first[0] >= 0.045


async def test_a_slow_pass_never_overlaps_the_next() -> None:
    running = 0
    most = 0
    passes = 0

    async def work() -> None:
        nonlocal running, most, passes
        running += 1
        most = max(most, running)
        await asyncio.sleep(INTERVAL_S * 3)
        running -= 1
        passes += 1

    task = asyncio.create_task(periodic.every(INTERVAL_S, work, name="test pass"))
    await until(lambda: passes >= 2)
    await periodic.stop(task)
    assert most == 1


async def test_stopping_cancels_a_pass_under_way_and_waits_for_the_clean_up() -> None:
    events: list[str] = []
    entered = asyncio.Event()

    async def work() -> None:
        entered.set()
        await asyncio.sleep(60)

    async def loop_with_clean_up() -> None:  # as the heartbeat removes its entry
        try:
            await periodic.every(INTERVAL_S, work, name="test pass")
        finally:
            await asyncio.sleep(0)  # the clean-up may await
            events.append("cleaned up")

    task = asyncio.create_task(loop_with_clean_up())
    await entered.wait()
    async with asyncio.timeout(1):
        await periodic.stop(task)
    assert events == ["cleaned up"]
    await periodic.stop(None)  # a loop never started (expiry turned off)


async def test_a_cancellation_is_not_taken_for_a_failed_pass(logged: Recorder) -> None:
    async def work() -> None:
        raise asyncio.CancelledError

    task = asyncio.create_task(periodic.every(INTERVAL_S, work, name="test pass"))
    with pytest.raises(asyncio.CancelledError):
        await task
    assert logged.warnings == []


def test_the_spread_first_delay_is_half_to_the_whole_interval() -> None:
    delays = [periodic.spread(10.0) for _ in range(200)]
    assert all(5.0 <= d <= 10.0 for d in delays)
    assert max(delays) - min(delays) > 1.0, "spread, not one fixed delay"
