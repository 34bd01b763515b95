"""The hand-over, for chat servers: one fast call after answering the user.

Light on purpose: it imports no stage, provider or database code.

    await schedule_memory_persistence(redis, session_id, user_id, messages)

``redis`` is the chat server's own ``redis.asyncio.Redis`` (an ``arq.ArqRedis``
works too), or, for a fleet with several Redis primaries, a ``ShardedRedis``
(worker.protocol.shards: one client per shard and the shard map), which every
call here routes by the user (docs/protocol.md, "Shards"). The job is written
with memfleet's JSON serializer whatever the client's settings. A session longer
than ``limits.max_messages`` or than
``limits.max_handover_bytes`` (its payload, UTF-8 JSON) is handed over as its
most recent window that fits (worker.protocol.payload.recent_window, fit_handover). Bad
input raises InvalidHandover (HandoverTooLarge for a message over
``limits.max_message_bytes``); a Redis outage raises
HandoverUnavailable within ``timeout_s`` and never hangs the chat turn;
HandoverBacklogFull (a HandoverUnavailable) says the session already holds too
many older lists no worker has finished (worker.protocol.queue), SessionBytesFull (one)
too many bytes of them, UserSessionsFull that the user has
``limits.max_user_sessions`` sessions with such lists: hand it over later, when
workers have finished them. A refused hand-over stores nothing and keeps every
list already held.

The result's ``handover_id`` names the hand-over: ``wait_for_memory`` waits until
a commit has covered it (read-your-writes), ``memory_status`` says where the
session's memory stands.
``memory_events`` reads the commit events (worker.protocol.events), which name a session
by ``session_tag``.
``agent_id`` names the persona or agent instance of the session (docs/memory_model.md,
"Scopes"). It is checked like the ids and travels in the payload.
``telemetry_id_key`` is MEMFLEET_TELEMETRY_ID_KEY, for session stand-ins in
spans and events that match the workers' (worker.telemetry_ids).
``listed_at_us`` is when the chat server read ``messages``, on the Redis clock
(``redis_clock``, or TIME read in the script that returns the list): a list
read at or before an erase of the user stores nothing, even when it is handed over
after the erase. None: the hand-over's own moment, right only for a list read in
the same step. After an erase, a chat server hands over no message from before it
(docs/protocol.md, "Erase").
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from opentelemetry import propagate, trace
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError

from worker.errors import (
    HandoverBacklogFull,
    HandoverTooLarge,
    HandoverUnavailable,
    UserSessionsFull,
)
from worker.protocol import events, keys, queue, shards
from worker.protocol.keys import SessionRef
from worker.protocol.payload import (
    Handover,
    Limits,
    check_id,
    fit_handover,
    parse_messages,
    recent_window,
)
from worker.telemetry_ids import hashed_id, id_key


async def schedule_memory_persistence(
    redis: Any,
    session_id: str,
    user_id: str,
    messages: Sequence[Any],
    *,
    limits: Limits | None = None,
    queue_name: str = keys.DEFAULT_QUEUE,
    timeout_s: float = 1.0,
    tracer: trace.Tracer | None = None,
    telemetry_id_key: str | None = None,
    agent_id: str | None = None,
    listed_at_us: int | None = None,
) -> queue.Enqueued:
    limits = limits or Limits()
    handover = Handover(
        session_id=check_id(session_id, "session_id", limits),
        user_id=check_id(user_id, "user_id", limits),
        messages=parse_messages(recent_window(messages, limits), limits),
        handed_over_at=datetime.now(UTC),
        agent_id=None if agent_id is None else check_id(agent_id, "agent_id", limits),
        listed_at_us=listed_at_us,
    )
    session = SessionRef(handover.user_id, handover.session_id)
    tracer = tracer or trace.get_tracer("memfleet.client")
    with tracer.start_as_current_span(
        f"send {queue_name}", kind=trace.SpanKind.PRODUCER,
        attributes={"messaging.system": "arq", "messaging.operation.name": "send",
                    "messaging.operation.type": "send",
                    "messaging.destination.name": queue_name,
                    "memfleet.session": hashed_id(session.key, id_key(telemetry_id_key)),
                    "memfleet.messages": len(handover.messages),
                    "memfleet.handover.windowed": len(messages) > len(handover.messages)},
    ) as span:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)  # the job links its CONSUMER span to this one
        try:
            handover, payload = fit_handover(handover.model_copy(update={"trace": carrier}),
                                             limits)
        except HandoverTooLarge as exc:
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))
            raise
        span.set_attribute("memfleet.handover.bytes", len(payload))
        span.set_attribute("memfleet.messages", len(handover.messages))
        span.set_attribute("memfleet.handover.windowed", len(messages) > len(handover.messages))
        try:
            # A timeout scope, not wait_for: on 3.11 wait_for wraps the call in a task of
            # its own: 5 to 8% of the direct hand-over's CPU (docs/bench.md, issue 28).
            async with asyncio.timeout(timeout_s):
                enqueued = await _enqueue_routed(redis, session, payload, queue_name, limits)
        except (HandoverBacklogFull, UserSessionsFull, HandoverTooLarge) as exc:
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))
            raise
        except (RedisError, OSError, TimeoutError) as exc:
            span.set_status(trace.Status(trace.StatusCode.ERROR, type(exc).__name__))
            raise redis_unavailable(redis, "did not take the hand-over", exc) from exc
        span.set_attribute("messaging.message.id", enqueued.job_id or "")
        span.set_attribute("memfleet.coalesced", enqueued.job_id is None)
        span.set_attribute("memfleet.handover.kept_older", enqueued.kept_older)
        return enqueued


async def _enqueue_routed(redis: Any, session: SessionRef, payload: bytes, queue_name: str,
                          limits: Limits) -> queue.Enqueued:
    """The hand-over on the user's shard: while a shard is added and the user moves, the
    old shard's script decides (worker.protocol.shards), then the new one takes it."""
    if not isinstance(redis, shards.ShardedRedis):
        return await queue.enqueue(redis, session, payload=payload, queue_name=queue_name,
                                   limits=limits)
    route = redis.route(session.user_id)
    if route.moving:
        held = await queue.enqueue_on_old_shard(
            redis.client(route.home), session, payload=payload, mode=route.mode,
            queue_name=queue_name, limits=limits)
        if held is not None:
            return held
    return await queue.enqueue(redis.client(route.target), session, payload=payload,
                               queue_name=queue_name, limits=limits)


async def _states(redis: Any, session: SessionRef) -> list[queue.HandoverState]:
    """The session's state on every shard that may hold its lists (two while its
    user moves to a new shard, one otherwise)."""
    return [await queue.handover_state(client, session)
            for client in shards.user_clients(redis, session.user_id)]


async def memory_status(
    redis: Any, session_id: str, user_id: str, *, timeout_s: float = 1.0
) -> queue.HandoverState:
    """Where the session's memory stands: its latest hand-over's number, the number
    of the latest one a commit finished, and older lists still waiting."""
    try:
        states = await asyncio.wait_for(_states(redis, SessionRef(user_id, session_id)),
                                        timeout_s)
    except (RedisError, OSError, TimeoutError) as exc:
        raise redis_unavailable(redis, "did not answer", exc) from exc
    # Moving: the latest hand-over's shard, and the older lists of both.
    latest = max(states, key=lambda state: state.latest)
    return queue.HandoverState(latest.latest, latest.finished,
                               sum(state.older_lists for state in states))


async def _covered(redis: Any, session: SessionRef, handover_id: int) -> bool:
    try:
        states = await asyncio.wait_for(_states(redis, session), 1.0)
    except (RedisError, OSError, TimeoutError) as exc:
        raise redis_unavailable(redis, "did not answer", exc) from exc
    # A hand-over's number is its own shard's: covered where it was taken.
    return any(state.covers(handover_id) for state in states)


async def wait_for_memory(
    redis: Any, session_id: str, user_id: str, handover_id: int, *, timeout_s: float,
    poll_s: float = 0.05,
) -> bool:
    """Wait until a commit has covered hand-over ``handover_id`` (the id
    ``schedule_memory_persistence`` returned) or a later one of the session; False
    when ``timeout_s`` passes first. For read-your-writes: the facts of that turn
    are then in what the memory API and ``known_facts_block`` read."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    delay = poll_s
    while True:
        if await _covered(redis, SessionRef(user_id, session_id), handover_id):
            return True
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0:
            return False
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, 0.5)  # a slow job need not be polled 20 times a second


async def memory_events(
    redis: Any, *, after: str = "$", count: int = 100, block_ms: int | None = None,
    queue_name: str = keys.DEFAULT_QUEUE, shard: str | None = None,
) -> list[events.CommitEvent]:
    """Commit events after stream id ``after`` (worker.protocol.events): each names a session
    by its stand-in (``session_tag``), the hand-over it finished and its counts,
    never ids or text. Pass the last event's ``id`` as ``after`` to read on.
    Each shard has its own stream: with a ``ShardedRedis``, ``shard`` names the one
    read (stream ids are per shard; a reader keeps one position per shard)."""
    if isinstance(redis, shards.ShardedRedis):
        if shard is None or shard not in redis.names:
            raise ValueError("memory_events on a ShardedRedis needs shard=, one of "
                             + ", ".join(redis.names))
        redis = redis.client(shard)
    try:
        return await events.read_events(redis, keys.events_key(queue_name), after=after,
                                        count=count, block_ms=block_ms)
    except (RedisError, OSError) as exc:
        raise redis_unavailable(redis, "did not answer", exc) from exc


def redis_unavailable(redis: Any, what: str, exc: BaseException) -> HandoverUnavailable:
    """The HandoverUnavailable of a call on ``redis`` that failed with ``exc``: which Redis
    (host:port or socket, never the URL, which may hold a password) and why. A refused or
    lost connection's own words say why ("Error 111 connecting to 127.0.0.1:6390.
    Connection refused."); other errors only by their class, as a server's reply might
    quote a key, and keys hold ids."""
    reason = type(exc).__name__
    if isinstance(exc, RedisConnectionError | OSError) and str(exc):
        reason = f"{reason} ({str(exc)[:160]})"
    return HandoverUnavailable(f"{redis_address(redis)} {what}: {reason}")


def redis_address(redis: Any) -> str:
    if isinstance(redis, shards.ShardedRedis):
        return "the user's Redis shard"
    kwargs = getattr(getattr(redis, "connection_pool", None), "connection_kwargs", {})
    if kwargs.get("path"):
        return f"Redis at {kwargs['path']}"
    if "host" in kwargs:
        return f"Redis at {kwargs['host']}:{kwargs.get('port', 6379)}"
    return "Redis"


def session_tag(session_id: str, user_id: str, telemetry_id_key: str | None) -> str:
    """The stand-in commit events name this session by; ``telemetry_id_key`` is the
    fleet's MEMFLEET_TELEMETRY_ID_KEY (without it no event can be matched)."""
    return events.session_tag(SessionRef(user_id, session_id), telemetry_id_key)
