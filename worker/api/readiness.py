"""The memory API's readiness route, ``GET /readyz``: whether Redis and PostgreSQL answer.

``/healthz`` (worker.api.app) is liveness: the process answers, whatever its
servers do, so an orchestrator never restarts an API process for an outage
a restart cannot fix. ``/readyz`` is readiness: one round trip to each server
(every Redis shard, with MEMFLEET_REDIS_SHARDS), each bounded by
``CHECK_TIMEOUT_S``; 200 ``{"status": "ok"}``, or 503 ``{"status":
"unavailable", "down": ["Redis"]}`` naming the servers that did not answer.
Names only: no address, no error text (the route takes no credential). An
answer is reused for ``REUSE_S``, so probes at any rate cost the servers at most
one round trip each per second.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from worker.api.deps import ApiDeps
from worker.protocol.shards import ShardedRedis

CHECK_TIMEOUT_S = 2.0
REUSE_S = 1.0

router = APIRouter()


class Readiness:
    """The last answer, reused for REUSE_S; one check at a time."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._at = float("-inf")
        self._down: list[str] = []

    async def down(self, deps: ApiDeps) -> list[str]:
        async with self._lock:
            if time.monotonic() - self._at >= REUSE_S:
                self._down = await servers_down(checks(deps))
                self._at = time.monotonic()
            return list(self._down)


def checks(deps: ApiDeps) -> dict[str, Callable[[], Awaitable[Any]]]:
    found: dict[str, Callable[[], Awaitable[Any]]] = {"Redis": deps.redis.ping}
    if isinstance(deps.handover, ShardedRedis):
        found = {f"Redis shard {name}": client.ping for name, client in deps.handover.items()}
    store: Any = deps.memory  # PostgresStore: its ping is one round trip, translated
    found["PostgreSQL"] = store.ping
    return found


async def servers_down(named: dict[str, Callable[[], Awaitable[Any]]]) -> list[str]:
    async def answers(check: Callable[[], Awaitable[Any]]) -> bool:
        try:
            await asyncio.wait_for(check(), CHECK_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - any failure: the server does not answer
            return False
        return True

    results = await asyncio.gather(*(answers(check) for check in named.values()))
    return [name for name, ok in zip(named, results, strict=True) if not ok]


@router.get("/readyz", tags=["ops"],
            summary="Readiness: Redis and PostgreSQL answer (no authentication)",
            responses={503: {"description": "a server does not answer: "
                                            '{"status": "unavailable", "down": ["Redis"]}'}})
async def readyz(request: Request) -> JSONResponse:
    state = request.app.state
    readiness: Readiness = state.readiness
    down = await readiness.down(state.deps)
    if down:
        return JSONResponse({"status": "unavailable", "down": down}, status_code=503)
    return JSONResponse({"status": "ok"})
