"""The fleet's circuit breaker for the model endpoint, shared by every replica in Redis.

When a job's model call fails after its own retries (ProviderUnavailable: the
endpoint down, timing out, rate-limiting past the retries), the job trips the
breaker: for a while no job of any replica calls the model. Jobs that start
meanwhile hand their session to a job deferred until the breaker closes,
spending no try. The open time doubles with every failure in a row, up to a
cap. When it closes, one job probes the endpoint while the others wait; the
probe's success resets the breaker, its failure opens it again. The check
rides on the job's claim (worker.protocol.lock), so it costs no round trip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from worker.protocol import keys
from worker.protocol.scripts import LuaScript

FAILURES_TTL_MS = 3_600_000

_TRIP = LuaScript("worker.protocol.lua", "breaker_trip.lua")


@dataclass(frozen=True, slots=True)
class BreakerKeys:
    open: str  # its TTL is the time left open
    failures: str  # failures in a row
    probe: str  # the one job trying the endpoint

    @classmethod
    def of(cls, queue_name: str) -> BreakerKeys:
        return cls(keys.breaker_open_key(queue_name), keys.breaker_failures_key(queue_name),
                   keys.breaker_probe_key(queue_name))


async def trip(redis: Any, keys: BreakerKeys, base_s: float, max_s: float) -> int:
    """Open the breaker (unless it is open already); return how many ms it stays open."""
    result = await _TRIP(redis, [keys.open, keys.failures, keys.probe],
                         [int(base_s * 1000), int(max_s * 1000), FAILURES_TTL_MS])
    return int(result)


async def reset(redis: Any, keys: BreakerKeys) -> None:
    """The model answered again: the next failure starts from the shortest open time."""
    await redis.delete(keys.failures, keys.probe)


async def open_for_ms(redis: Any, keys: BreakerKeys) -> int:
    """How long the breaker stays open (0: closed): for work that calls the model outside
    a session's claim, which carries this check otherwise (the portrait's refresh)."""
    left = await redis.pttl(keys.open)
    return max(0, int(left))
