"""A rate on each user's manual fact writes, shared by every API process through Redis.

Adding, editing, removing, pinning and unpinning facts by hand, accepting or
dismissing a held proposal, and choosing consent, each take one write from the
user's bucket (GCRA, ``fact_write_rate.lua``):
MEMFLEET_API_FACT_WRITES_PER_MINUTE on average, up to MEMFLEET_API_FACT_WRITE_BURST
at once. One more is a 429 whose Retry-After says when one will go. The check
runs after the token's: nobody else can spend a user's writes. Erasing everything
is not counted: a user can always be forgotten, and it leaves nothing to repeat.
Key: ``memfleet:api-fact-writes:{<user>}``, gone once the bucket is full again.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status

from api_stub.service_auth import administered_user
from worker.protocol.keys import api_fact_writes_key
from worker.protocol.scripts import LuaScript

_TAKE = LuaScript("api_stub", "fact_write_rate.lua")


class FactWriteRate:
    """One per API process (ApiDeps); ``per_minute`` 0: no limit."""

    def __init__(self, redis: Any, *, per_minute: int, burst: int) -> None:
        self._redis, self._burst = redis, burst
        self._interval_ms = 0 if per_minute == 0 else max(1, round(60_000 / per_minute))

    async def take(self, user_id: str) -> float:
        """0 when the user may write now, else the seconds until a write may go."""
        if self._interval_ms == 0:
            return 0.0
        wait_ms = await _TAKE(self._redis, [api_fact_writes_key(user_id)],
                              [self._interval_ms, self._burst])
        return int(wait_ms) / 1000


async def rate_limited_user(request: Request,
                            user_id: Annotated[str, Depends(administered_user)]) -> str:
    """The path's user, authenticated, with one manual write taken; else 401/403/429."""
    wait_s = await request.app.state.deps.writes.take(user_id)
    if wait_s > 0:
        raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS,
                            detail="too many fact writes; retry later",
                            headers={"Retry-After": str(max(1, math.ceil(wait_s)))})
    return user_id


WritingUser = Annotated[str, Depends(rate_limited_user)]
