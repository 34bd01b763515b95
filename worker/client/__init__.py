"""What a chat server imports: the hand-over, its status, read-your-writes, the
commit events, the webhook's signature check, and the errors to catch. A thin
surface over the Redis protocol (worker.protocol; docs/protocol.md for other
languages); importing it loads nothing of ARQ, the fleet, the pipeline, the
store or the model providers (tests/unit/client/test_client_surface.py).

    from worker.client import HandoverUnavailable, InvalidHandover, schedule_memory_persistence

docs/handover.md is the chat server's guide. ``MemoryApi`` and ``AsyncMemoryApi`` are
the memory API's client over HTTP (httpx), for a chat server without Redis
credentials (docs/python_client.md; their answers' types are in
worker.client.memory_api_models); they load on first use, so that a chat server on
Redis alone does not import httpx. ``MemoryTools`` and ``AsyncMemoryTools`` run a
model's memory tool calls for one user over them (docs/tools.md).
"""

from typing import TYPE_CHECKING, Any

from worker.client.handover import (
    memory_events,
    memory_status,
    schedule_memory_persistence,
    session_tag,
    wait_for_memory,
)
from worker.errors import (
    AccessDenied,
    HandoverBacklogFull,
    HandoverTooLarge,
    HandoverUnavailable,
    InvalidHandover,
    InvalidRequest,
    LongPollRefused,
    LongPollsFull,
    MemoryApiError,
    MemoryApiUnavailable,
    MemoryOff,
    NotFound,
    RateLimited,
    SessionBytesFull,
    TooManyLongPolls,
    UserSessionsFull,
    WriteConflict,
)
from worker.memory_rules import Limits
from worker.protocol.events import CommitEvent
from worker.protocol.queue import Enqueued, HandoverState, redis_clock
from worker.protocol.shards import ShardedRedis
from worker.protocol.webhook_signature import SignatureInvalid
from worker.protocol.webhook_signature import verify as verify_webhook

if TYPE_CHECKING:
    from worker.client.memory_api import MemoryApi
    from worker.client.memory_api_async import AsyncMemoryApi
    from worker.client.memory_tools import AsyncMemoryTools, MemoryTools

_LAZY = {"MemoryApi": "worker.client.memory_api",
         "AsyncMemoryApi": "worker.client.memory_api_async",
         "MemoryTools": "worker.client.memory_tools",
         "AsyncMemoryTools": "worker.client.memory_tools"}


def __getattr__(name: str) -> Any:
    """The memory API's clients, imported when first asked for (PEP 562)."""
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'worker.client' has no attribute {name!r}")


__all__ = [
    "AccessDenied",
    "AsyncMemoryApi",
    "AsyncMemoryTools",
    "CommitEvent",
    "Enqueued",
    "HandoverBacklogFull",
    "HandoverState",
    "HandoverTooLarge",
    "HandoverUnavailable",
    "InvalidHandover",
    "InvalidRequest",
    "Limits",
    "LongPollRefused",
    "LongPollsFull",
    "MemoryApi",
    "MemoryApiError",
    "MemoryApiUnavailable",
    "MemoryOff",
    "MemoryTools",
    "NotFound",
    "RateLimited",
    "SessionBytesFull",
    "ShardedRedis",
    "SignatureInvalid",
    "TooManyLongPolls",
    "UserSessionsFull",
    "WriteConflict",
    "memory_events",
    "memory_status",
    "redis_clock",
    "schedule_memory_persistence",
    "session_tag",
    "verify_webhook",
    "wait_for_memory",
]
