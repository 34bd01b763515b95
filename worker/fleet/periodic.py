"""The fleet's background loops, one way: a pass every few seconds until cancelled.

Used by the worker's heartbeat (worker.fleet.probe), its recovery and expiry
passes (worker.fleet.app) and the exporter's fleet probe
(worker.fleet.metrics_exporter). A pass that fails is logged by its error's
type only (a driver's message can quote what it was sent) and tried again at
the next interval: Redis or PostgreSQL being away must never end a loop. A pass
that failed because a server is away is not logged (at DEBUG only): the
process says once that the server is away and once that it is back
(worker.fleet.server_watch), not once per pass.
Cancelling the loop's task stops it, between passes or in one.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable
from typing import Any, NoReturn

import structlog

from worker.fleet.server_watch import is_server_away

log = structlog.get_logger("memfleet.periodic")


async def every(
    interval_s: float, work: Callable[[], Awaitable[object]], *, name: str,
    first_delay_s: float = 0.0,
) -> NoReturn:
    """Run ``work`` until cancelled, waiting ``interval_s`` after each pass ends (a slow
    pass never overlaps the next), and ``first_delay_s`` before the first one.
    A failure is logged as "<name> failed" with the error's type (at DEBUG when a
    server is away)."""
    if first_delay_s > 0:
        await asyncio.sleep(first_delay_s)
    while True:
        try:
            await work()
        except Exception as exc:  # noqa: BLE001 - a failed pass (a server away) is tried again
            report = log.debug if is_server_away(exc) else log.warning
            report(f"{name} failed", error=type(exc).__name__)
        await asyncio.sleep(interval_s)


def spread(interval_s: float) -> float:
    """A first delay of a random half to whole interval: the passes of a fleet started
    at once spread out, and a short-lived worker (a burst) leaves them to the others."""
    return interval_s * random.uniform(0.5, 1.0)  # spreading, not secrecy


async def stop(task: asyncio.Task[Any] | None) -> None:
    """Cancel a loop's task and wait until it has stopped, its clean-up included (a
    heartbeat removes its entry). Callers stop loops on their way out, in a shutdown
    hook or a ``finally``, so the cancellation is absorbed and their clean-up goes on."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
