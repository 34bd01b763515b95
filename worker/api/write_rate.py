"""Rates on what one user may change, shared by every API process through Redis.

Manual fact writes: adding, editing, removing, pinning and unpinning facts by
hand, accepting or dismissing a held proposal, and choosing consent, each take
one write from the user's bucket (GCRA, ``fact_write_rate.lua``):
MEMFLEET_API_FACT_WRITES_PER_MINUTE on average, up to MEMFLEET_API_FACT_WRITE_BURST
at once. Key: ``memfleet:api-fact-writes:{<user>}``, gone once the bucket is full
again, and at an erase.

Erases and consent changes: ``DELETE /users/{u}`` and ``PUT /users/{u}/consent``
each take one from a bucket of their own (the same script):
MEMFLEET_API_ERASES_PER_HOUR on average, up to MEMFLEET_API_ERASE_BURST at once.
An erase is not free for Redis and PostgreSQL, and it resets the fact-write
bucket, so without this a token could erase (or forget through consent) in a
loop. The bucket must outlive the erase it counts, so its key names the user
only by a keyed hash (HMAC-SHA-256 under MEMFLEET_ERASE_FENCE_KEY, which every
API process shares, in a domain of its own), as the erase fence does:
``memfleet:api-erases:<keyed user>``, gone once the bucket is full again.

One more than a bucket allows is a 429 whose Retry-After says when one will go.
The check runs after the token's: nobody else can spend a user's rates.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, HTTPException, Request, status

from worker.api.service_auth import administered_user
from worker.protocol.keys import API_ERASES_PREFIX, api_erases_key, api_fact_writes_key
from worker.protocol.scripts import LuaScript

_TAKE = LuaScript("worker.api", "fact_write_rate.lua")


class UserRate:
    """One bucket per user, one such object per API process (ApiDeps);
    ``interval_ms`` 0: no limit."""

    def __init__(self, redis: Any, *, key_of: Callable[[str], str], interval_ms: int,
                 burst: int) -> None:
        self._redis, self._key_of, self._burst = redis, key_of, burst
        self._interval_ms = interval_ms

    async def take(self, user_id: str) -> float:
        """0 when the user may go now, else the seconds until one may."""
        if self._interval_ms == 0:
            return 0.0
        wait_ms = await _TAKE(self._redis, [self._key_of(user_id)],
                              [self._interval_ms, self._burst])
        return int(wait_ms) / 1000


def _interval_ms(per_period: int, period_ms: int) -> int:
    return 0 if per_period == 0 else max(1, round(period_ms / per_period))


def fact_write_rate(redis: Any, *, per_minute: int, burst: int) -> UserRate:
    return UserRate(redis, key_of=api_fact_writes_key, burst=burst,
                    interval_ms=_interval_ms(per_minute, 60_000))


def erase_rate(redis: Any, *, per_hour: int, burst: int, fence_secret: bytes) -> UserRate:
    """The erase and consent bucket; ``fence_secret``: MEMFLEET_ERASE_FENCE_KEY's bytes."""
    domain = API_ERASES_PREFIX.encode()

    def key_of(user_id: str) -> str:
        keyed = hmac.new(fence_secret, domain + user_id.encode(), hashlib.sha256)
        return api_erases_key(keyed.hexdigest()[:32])

    return UserRate(redis, key_of=key_of, burst=burst,
                    interval_ms=_interval_ms(per_hour, 3_600_000))


def _too_many(wait_s: float, what: str) -> HTTPException:
    return HTTPException(status.HTTP_429_TOO_MANY_REQUESTS,
                         detail=f"too many {what}; retry later",
                         headers={"Retry-After": str(max(1, math.ceil(wait_s)))})


async def rate_limited_user(request: Request,
                            user_id: Annotated[str, Depends(administered_user)]) -> str:
    """The path's user, authenticated, with one manual write taken; else 401/403/429."""
    wait_s = await request.app.state.deps.writes.take(user_id)
    if wait_s > 0:
        raise _too_many(wait_s, "fact writes")
    return user_id


async def erasing_user(request: Request,
                       user_id: Annotated[str, Depends(administered_user)]) -> str:
    """The path's user, authenticated, with one erase taken; else 401/403/429."""
    wait_s = await request.app.state.deps.erases.take(user_id)
    if wait_s > 0:
        raise _too_many(wait_s, "erases and consent changes")
    return user_id


async def consenting_user(request: Request,
                          user_id: Annotated[str, Depends(rate_limited_user)]) -> str:
    """The path's user, with one manual write and one erase taken; else 401/403/429."""
    return await erasing_user(request, user_id)


WritingUser = Annotated[str, Depends(rate_limited_user)]
ErasingUser = Annotated[str, Depends(erasing_user)]
ConsentingUser = Annotated[str, Depends(consenting_user)]
