"""The fleet's model budget: requests and tokens per minute and concurrent calls per
endpoint, shared by every replica in Redis.

Every model call (each HTTP attempt, chat or embeddings) first takes a slot
(``acquire``) and gives it back when the answer is in (``release``). One Lua
script (``worker/protocol/lua/budget_acquire.lua``) decides atomically, on the Redis
server's clock, so the replicas' own clocks never matter:

- **Requests per minute: a sliding-window log.** Every granted call is a member
  of a sorted set scored by its grant time; those older than the window are
  dropped, and a call is granted only while fewer than ``rpm`` remain. So no
  window of that length, wherever it starts, ever holds more than ``rpm``
  grants: exact, where a fixed-window counter lets twice the limit through
  across a window's edge. The log holds one window's calls, no more. The
  window is a minute unless MEMFLEET_LLM_BUDGET_WINDOW_S says otherwise (tests
  shorten it; the limits and their proofs do not depend on its length).
  The window counted is a little longer than a minute (``WINDOW_MARGIN_S``):
  a grant and the request's arrival at the server are apart by the network
  and the client's queues, and the server's own per-minute count must hold too.
- **Tokens per minute: the same log.** Each member carries the call's tokens,
  estimated before the call (a quarter of the characters sent, plus an
  allowance for the answer) and corrected to the server's count (``usage``)
  when it answers. A call is granted while the window's tokens, those asked
  by the waiters ahead of it and its own fit. A call larger than the whole
  budget waits for an empty window rather than forever.
- **Concurrent calls: a semaphore of leases.** A granted call holds a lease in a
  sorted set scored by its expiry; ``release`` removes it. A crashed worker
  never releases, so every acquire first drops expired leases: its slot comes
  back after the lease time, set well past the call's timeout.
- **First come, first served.** A caller that must wait joins a line (a sorted
  set by arrival) and is told how long to sleep: until the slot for its place
  in line opens (for requests, when that many logged calls leave the window)
  or a short poll (concurrency: a call ends when it ends). A newcomer stands
  behind every live waiter, so an oldest call is not starved by lucky polls and
  its wait is bounded by the line ahead of it. A waiter that stops asking (its
  worker died) drops out of the line a grace period after its sleep.
- **A 429 pauses the fleet.** When a call gets HTTP 429 with Retry-After, the
  worker sets the endpoint's pause end (Redis time + the hint, capped by
  MEMFLEET_LLM_RETRY_AFTER_CAP_S, never shortening a pause already set), and
  every replica's acquire waits until then instead of hitting the endpoint
  again.

A job waits for budget instead of failing: ``acquire`` sleeps (with a little
jitter) and asks again, for up to MEMFLEET_LLM_BUDGET_WAIT_MAX_S per call. A
call that waited longer gives up with ModelBudgetBusy: the job hands its
session to a later job without spending a try, and the circuit breaker
(worker.protection.breaker), which is for an endpoint that fails, stays closed.

Keys: ``memfleet:llm-budget:{<endpoint>}:<part>`` (worker.protocol.keys),
``<endpoint>`` a hash of the queue name and the endpoint's base URL (chat and
embeddings share a budget when they share a base URL), in one Redis Cluster
slot. With every limit at 0 no budget is built and model calls make no Redis
round trip at all.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import random
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import structlog
from redis.exceptions import RedisError

from worker.errors import ModelBudgetBusy, ProviderUnavailable
from worker.protocol import keys
from worker.protocol.scripts import LuaScript

log = structlog.get_logger("memfleet.budget")

WINDOW_S = 60.0
WINDOW_MARGIN_S = 1.0
# Characters per token, the usual rule of thumb for English text and JSON.
CHARS_PER_TOKEN = 4
# How often a caller waiting for a concurrency slot asks again: a call ends when it ends.
POLL_S = 0.25
# How long past its sleep a waiter keeps its place in line without asking again.
GRACE_S = 5.0

REASONS = {1: "rpm", 2: "tpm", 3: "concurrency", 4: "paused"}

_ACQUIRE = LuaScript("worker.protocol.lua", "budget_acquire.lua")
_RELEASE = LuaScript("worker.protocol.lua", "budget_release.lua")
_PAUSE = LuaScript("worker.protocol.lua", "budget_pause.lua")


@dataclass(frozen=True, slots=True)
class Lease:
    """A granted call: its ticket (the lease id) and the tokens it was counted for."""

    ticket: str
    tokens: int


class ModelBudget(Protocol):
    """What the retry loop needs of a budget (worker.protection.retry)."""

    async def acquire(self, tokens: int) -> Lease: ...

    async def release(self, lease: Lease, used_tokens: int | None) -> None: ...

    async def pause(self, seconds: float) -> bool: ...


@dataclass(frozen=True, slots=True)
class BudgetLimits:
    rpm: int = 0
    tpm: int = 0
    concurrency: int = 0
    wait_max_s: float = 120.0
    lease_s: float = 120.0
    # A minute (MEMFLEET_LLM_BUDGET_WINDOW_S) and the margin; tests shorten it.
    window_s: float = WINDOW_S + WINDOW_MARGIN_S
    poll_s: float = POLL_S
    grace_s: float = GRACE_S

    @property
    def unlimited(self) -> bool:
        return self.rpm <= 0 and self.tpm <= 0 and self.concurrency <= 0


@dataclass(frozen=True, slots=True)
class BudgetKeys:
    log: str
    leases: str
    line: str
    alive: str
    asks: str
    paused: str

    @classmethod
    def of(cls, queue_name: str, base_url: str) -> BudgetKeys:
        return cls(*(keys.budget_key(endpoint_id(queue_name, base_url), part)
                     for part in keys.BUDGET_PARTS))

    @property
    def slots(self) -> list[str]:
        """The keys the acquire and release scripts take, in their order."""
        return [self.log, self.leases, self.line, self.alive, self.asks]


def endpoint_id(queue_name: str, base_url: str) -> str:
    """A short stable name for one fleet's endpoint (a URL may carry a key or a host
    nobody wants in key listings, and braces would break the Cluster hash tag)."""
    digest = hashlib.sha256(f"{queue_name}\n{base_url.rstrip('/')}".encode()).hexdigest()
    return digest[:16]


def estimate_tokens(chars: int, answer_allowance: int = 0) -> int:
    """Tokens a request is counted for before the server says: a quarter of its
    characters rounded up, plus what the answer may take."""
    return math.ceil(max(0, chars) / CHARS_PER_TOKEN) + max(0, answer_allowance)


@dataclass(frozen=True, slots=True)
class Granted:
    pass


@dataclass(frozen=True, slots=True)
class Wait:
    seconds: float
    reason: str


def decode(result: Any) -> Granted | Wait:
    """The acquire script's answer: ``{1, 0, 0}`` granted, ``{0, ms, reason}`` wait."""
    granted, wait_ms, reason = (int(x) for x in result)
    if granted:
        return Granted()
    return Wait(max(0, wait_ms) / 1000.0, REASONS.get(reason, "other"))


def sleep_for(wait: Wait, rand: float, poll_s: float) -> float:
    """The sleep before asking again: the wait plus a jitter of up to a poll, so the
    callers told the same instant come back in a spread rather than all at once."""
    return wait.seconds + poll_s * rand


# Told, once per granted call, how long it waited and the first reason it had to
# (None: granted at once); and of every pause a 429 set. For metrics.
WaitHook = Callable[[float, str | None], None]
PauseHook = Callable[[], None]
Sleep = Callable[[float], Awaitable[None]]


class RedisBudget:
    """One endpoint's budget in Redis; every replica's instance shares its keys."""

    def __init__(
        self,
        redis: Any,
        keys: BudgetKeys,
        limits: BudgetLimits,
        *,
        on_wait: WaitHook | None = None,
        on_pause: PauseHook | None = None,
        sleep: Sleep = asyncio.sleep,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self._redis, self.keys, self.limits = redis, keys, limits
        self._on_wait, self._on_pause = on_wait, on_pause
        self._sleep, self._rand = sleep, rand
        self._args = [limits.rpm, limits.tpm, limits.concurrency, _ms(limits.window_s),
                      _ms(limits.lease_s), _ms(limits.poll_s), _ms(limits.grace_s)]
        # Only a tokens or concurrency limit gives release anything to do.
        self._release_needed = limits.tpm > 0 or limits.concurrency > 0

    async def acquire(self, tokens: int) -> Lease:
        """Wait for a slot, up to ``wait_max_s``; ModelBudgetBusy after that."""
        ticket = secrets.token_hex(8)
        tokens = max(0, int(tokens))
        started = time.monotonic()
        first: str | None = None
        try:
            while True:
                try:
                    result = await _ACQUIRE(self._redis, [*self.keys.slots, self.keys.paused],
                                            [ticket, tokens, *self._args])
                except RedisError as exc:
                    raise ProviderUnavailable(
                        f"the model budget could not be read: {type(exc).__name__}") from exc
                answer = decode(result)
                waited = time.monotonic() - started
                if isinstance(answer, Granted):
                    if self._on_wait is not None:
                        self._on_wait(waited, first)
                    return Lease(ticket, tokens)
                first = first or answer.reason
                if waited + answer.seconds > self.limits.wait_max_s:
                    raise ModelBudgetBusy(
                        f"no model budget after {waited:.0f} s (waiting for {answer.reason})")
                await self._sleep(sleep_for(answer, self._rand(), self.limits.poll_s))
        except BaseException:
            # Out of the line at once, or it holds its place until its grace ends.
            await self._give_back(ticket, tokens, None)
            raise

    async def release(self, lease: Lease, used_tokens: int | None) -> None:
        """The call is over; ``used_tokens`` is the server's count when it gave one."""
        if self._release_needed:
            await self._give_back(lease.ticket, lease.tokens, used_tokens)

    async def pause(self, seconds: float) -> bool:
        """Pause every replica's calls for ``seconds`` (never shortening a longer pause)."""
        if seconds <= 0:
            return False
        try:
            await _PAUSE(self._redis, [self.keys.paused], [_ms(seconds)])
        except RedisError as exc:
            log.warning("model budget pause not set", error=type(exc).__name__)
            return False
        if self._on_pause is not None:
            self._on_pause()
        return True

    async def _give_back(self, ticket: str, tokens: int, used: int | None) -> None:
        try:
            await _RELEASE(self._redis, self.keys.slots,
                           [ticket, tokens, -1 if used is None else max(0, int(used))])
        except RedisError as exc:
            # The lease expires by itself; the tokens stay at the estimate.
            log.warning("model budget slot not given back", error=type(exc).__name__)


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))
