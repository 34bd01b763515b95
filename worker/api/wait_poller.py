"""The hand-over waits' reads of Redis, shared by every wait of one API process.

Each wait used to poll its session on its own (worker.client's ``wait_for_memory``:
a round trip every 50 ms, doubling up to every 500 ms), so N waits cost N round
trips every half second, and N waits on one session cost the same. Here one task
per process polls for every wait:

- **one read per session**, however many wait on it (``HMGET`` of its meta and
  ``LLEN`` of its older lists, what worker.protocol.queue.handover_state reads);
- **one round trip per shard per tick**: every session due within SLACK_S is
  read in one pipeline;
- the same pace per session: at once when a wait starts, then after 50 ms,
  doubling up to every 500 ms.

A read that fails or takes over TIMEOUT_S ends the waits of the sessions it read
with HandoverUnavailable (the route's 503), as the wait's own poll did. The task
ends when no wait is left; the next wait starts another.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass, field
from typing import Any

from redis.exceptions import RedisError

from worker.errors import HandoverUnavailable
from worker.protocol import shards
from worker.protocol.keys import SessionRef
from worker.protocol.queue import HandoverState

log = logging.getLogger("memfleet.api.sessions")

FIRST_S = 0.05
MAX_S = 0.5  # a slow job need not be polled 20 times a second
SLACK_S = 0.05  # sessions due this soon are read with those due now
TIMEOUT_S = 1.0  # the Python client's own bound on a read


@dataclass(slots=True)
class _Watched:
    ref: SessionRef
    due: float
    delay: float = FIRST_S
    waits: int = 0
    states: list[HandoverState] = field(default_factory=list)
    error: HandoverUnavailable | None = None
    polled: asyncio.Event = field(default_factory=asyncio.Event)


class WaitPoller:
    """One per API process (ApiDeps): ``wait`` is ``wait_for_memory`` on shared reads."""

    def __init__(self, redis: Any) -> None:
        self._redis = redis  # a client, or a ShardedRedis
        self._watched: dict[SessionRef, _Watched] = {}
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def wait(self, user_id: str, session_id: str, handover_id: int, *,
                   timeout_s: float) -> bool:
        """True once a commit covers hand-over ``handover_id`` of the session, False
        when ``timeout_s`` passes first; HandoverUnavailable when Redis does not answer."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        ref = SessionRef(user_id, session_id)
        watched = self._watched.get(ref)
        if watched is None:
            watched = self._watched[ref] = _Watched(ref, due=loop.time())
        else:  # a new wait reads at once, as its own poll did
            watched.due, watched.delay = loop.time(), FIRST_S
        watched.waits += 1
        self._wake.set()
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())
        try:
            while True:
                polled = watched.polled
                left = deadline - loop.time()
                if left <= 0:
                    return False
                try:
                    async with asyncio.timeout(left):
                        await polled.wait()
                except TimeoutError:
                    return False
                if watched.error is not None:
                    raise watched.error
                if any(state.covers(handover_id) for state in watched.states):
                    return True
        finally:
            watched.waits -= 1
            if not watched.waits:
                del self._watched[ref]

    async def aclose(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._watched:
                now = loop.time()
                due = [w for w in self._watched.values() if w.due <= now + SLACK_S]
                if not due:
                    self._wake.clear()
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(
                                min(w.due for w in self._watched.values()) - now):
                            await self._wake.wait()
                    continue
                await self._read(due)
                after = loop.time()
                for watched in due:
                    watched.due = after + watched.delay
                    watched.delay = min(watched.delay * 2, MAX_S)
                    polled, watched.polled = watched.polled, asyncio.Event()
                    polled.set()
        finally:
            self._task = None

    async def _read(self, due: list[_Watched]) -> None:
        """Each session's state on every shard that may hold its lists, one pipeline
        per shard; a failed shard's sessions get the error."""
        groups: dict[int, tuple[Any, list[_Watched]]] = {}
        for watched in due:
            watched.states, watched.error = [], None
            for client in shards.user_clients(self._redis, watched.ref.user_id):
                groups.setdefault(id(client), (client, []))[1].append(watched)
        answers = await asyncio.gather(*(self._pipeline(client, members)
                                         for client, members in groups.values()),
                                       return_exceptions=True)
        for (_, members), answer in zip(groups.values(), answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, RedisError | OSError | TimeoutError):
                    log.error("wait: reading the sessions failed: %s", type(answer).__name__)
                error = HandoverUnavailable(f"Redis did not answer: {type(answer).__name__}")
                error.__cause__ = answer
                for watched in members:
                    watched.error = error
                continue
            for watched, state in zip(members, answer, strict=True):
                watched.states.append(state)

    async def _pipeline(self, client: Any, members: list[_Watched]) -> list[HandoverState]:
        async with asyncio.timeout(TIMEOUT_S):
            pipe = client.pipeline(transaction=False)
            for watched in members:
                pipe.hmget(watched.ref.meta_key, "q", "d")
                pipe.llen(watched.ref.backlog_key)
            replies = await pipe.execute()
        return [HandoverState(int(latest or 0), int(finished or 0), int(older))
                for (latest, finished), older in zip(replies[::2], replies[1::2], strict=True)]
