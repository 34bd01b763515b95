"""What a check is given: the adapter's sessions (started and configured on first
use), the suite's own Redis and PostgreSQL connections, fresh ids, and the reference
client for the checks that mix the two."""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Sequence
from typing import Any

import asyncpg
from redis.asyncio import Redis

from conformance.adapter_process import (
    REQUEST_TIMEOUT_S,
    AdapterBroken,
    AdapterError,
    AdapterProcess,
    adapter_env,
)
from conformance.stack import IDLE_QUEUE, LIVE_QUEUE, ROOT, Stack
from worker.client import schedule_memory_persistence
from worker.protocol.keys import SessionRef

# The adapter sessions a check can ask for: the queue a real worker serves, one no
# worker serves (what is written there stays to be read), and a Redis that is away.
SESSIONS = {"live": LIVE_QUEUE, "idle": IDLE_QUEUE, "away": LIVE_QUEUE}


class CheckFailed(AssertionError):
    """A promise the adapter did not keep; the message says which and how."""


class Context:
    def __init__(self, stack: Stack, command: str, transport: str, *,
                 request_timeout_s: float = REQUEST_TIMEOUT_S) -> None:
        self.stack, self.command, self.transport = stack, command, transport
        self.request_timeout_s = request_timeout_s
        self.redis = Redis.from_url(stack.redis_url)
        self._db: asyncpg.Connection | None = None
        self._adapters: dict[str, AdapterProcess] = {}
        self._unconfigurable: dict[str, str] = {}  # session name -> why configure failed
        self._run = secrets.token_hex(3)
        self._count = itertools.count(1)

    # ------------------------------------------------------------ the adapter

    def configure_request(self, name: str) -> dict[str, Any]:
        queue = SESSIONS[name]
        away = name == "away"
        http = self.transport == "http"
        return {
            "op": "configure", "transport": self.transport,
            "redis_url": self.stack.closed_redis_url if away else self.stack.redis_url,
            "queue_name": queue, "telemetry_id_key": self.stack.telemetry_id_key,
            "limits": self.stack.limits_json(),
            "api_url": self.stack.api_urls.get("away" if away else queue) if http else None,
            "service_key": self.stack.service_key if http else None,
        }

    async def adapter(self, name: str = "live") -> AdapterProcess:
        """The adapter session ``name`` (SESSIONS), started and configured on first use
        and again after it broke."""
        current = self._adapters.get(name)
        if current is not None and current.alive:
            return current
        if name in self._unconfigurable:  # tried once: every later check fails at once
            raise AdapterBroken(self._unconfigurable[name])
        process = AdapterProcess(self.command, cwd=ROOT, env=adapter_env(ROOT))
        try:
            await process.start()
            await process.call(self.configure_request(name), timeout_s=self.request_timeout_s)
        except AdapterError as exc:
            await process.stop()
            self._unconfigurable[name] = f"configure ({name} session) was refused: {exc}"
            raise AdapterBroken(self._unconfigurable[name]) from exc
        except AdapterBroken as exc:
            await process.stop()
            self._unconfigurable[name] = f"configure ({name} session): {exc}"
            raise AdapterBroken(self._unconfigurable[name]) from exc
        self._adapters[name] = process
        return process

    async def call(self, request: dict[str, Any], *, session: str = "live",
                   timeout_s: float | None = None) -> dict[str, Any]:
        process = await self.adapter(session)
        return await process.call(request, timeout_s=timeout_s or self.request_timeout_s)

    async def handover(self, user_id: str, session_id: str, messages: Sequence[Any], *,
                       session: str = "live", **extra: Any) -> dict[str, Any]:
        """The adapter's hand-over; its result checked for the protocol's shape."""
        result = await self.call({"op": "handover", "user_id": user_id,
                                  "session_id": session_id, "messages": list(messages),
                                  **extra}, session=session)
        handover_id = result.get("handover_id")
        if not isinstance(handover_id, int) or isinstance(handover_id, bool) \
                or not 0 < handover_id < 2**53:
            raise CheckFailed(f"handover_id {handover_id!r} is not a positive 53-bit integer")
        job_id, kept = result.get("job_id"), result.get("kept_older")
        if not (job_id is None or isinstance(job_id, str)):
            raise CheckFailed(f"job_id {job_id!r} is neither a string nor null")
        if not (kept is None or isinstance(kept, bool)):
            raise CheckFailed(f"kept_older {kept!r} is neither a boolean nor null")
        if self.transport == "redis" and not isinstance(kept, bool):
            raise CheckFailed("kept_older is null over the Redis transport")
        return result

    async def close(self) -> None:
        for process in self._adapters.values():
            await process.close()
        await self.redis.aclose()
        if self._db is not None:
            await self._db.close()

    # ------------------------------------------------------------ the suite's own

    def user(self) -> str:
        """A user id no other check uses (several sessions of one user share budgets)."""
        return f"cf{self._run}-{next(self._count)}"

    async def reference_handover(self, user_id: str, session_id: str,
                                 messages: Sequence[Any], queue: str) -> int:
        """The same hand-over by the Python client (worker.client), the reference."""
        enqueued = await schedule_memory_persistence(
            self.redis, session_id, user_id, messages, limits=self.stack.limits,
            queue_name=queue, telemetry_id_key=self.stack.telemetry_id_key)
        return enqueued.handover_id

    async def stored(self, user_id: str, session_id: str) -> bytes | None:
        value: bytes | None = await self.redis.get(
            SessionRef(user_id, session_id).handover_key)
        return value

    async def nothing_stored(self, user_id: str, session_id: str) -> None:
        ref = SessionRef(user_id, session_id)
        found = [k for k in (ref.handover_key, ref.meta_key, ref.backlog_key,
                             ref.queued_key) if await self.redis.exists(k)]
        if found:
            raise CheckFailed(f"a refused hand-over left {found}")

    async def db(self) -> asyncpg.Connection:
        if self._db is None:
            self._db = await asyncpg.connect(self.stack.database_url)
        return self._db
