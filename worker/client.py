"""The hand-over, for chat servers: one fast call after answering the user.

Light on purpose: it imports no stage, provider or database code.

    await schedule_memory_persistence(redis, session_id, user_id, messages)

``redis`` is the chat server's own ``redis.asyncio.Redis`` (an ``arq.ArqRedis``
works too). The job is written with memfleet's JSON serializer whatever the
client's settings. Bad input raises InvalidHandover; a Redis outage raises
HandoverUnavailable within ``timeout_s`` and never hangs the chat turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from redis.exceptions import RedisError

from worker import queue
from worker.errors import HandoverUnavailable
from worker.payload import Handover, Limits, check_id, encode_handover, parse_messages


async def schedule_memory_persistence(
    redis: Any,
    session_id: str,
    user_id: str,
    messages: Sequence[Any],
    *,
    limits: Limits | None = None,
    queue_name: str = queue.DEFAULT_QUEUE,
    timeout_s: float = 1.0,
    trace: dict[str, str] | None = None,
) -> queue.Enqueued:
    limits = limits or Limits()
    handover = Handover(
        session_id=check_id(session_id, "session_id", limits),
        user_id=check_id(user_id, "user_id", limits),
        messages=parse_messages(messages, limits),
        handed_over_at=datetime.now(UTC),
        trace=trace or {},
    )
    try:
        return await asyncio.wait_for(
            queue.enqueue(redis, session_id, payload=encode_handover(handover),
                          queue_name=queue_name),
            timeout_s,
        )
    except (RedisError, OSError, TimeoutError) as exc:
        raise HandoverUnavailable(
            f"Redis did not take the hand-over: {type(exc).__name__}"
        ) from exc
