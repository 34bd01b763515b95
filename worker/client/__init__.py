"""What a chat server imports: the hand-over, its status, read-your-writes, the
commit events, the webhook's signature check, and the errors to catch. A thin
surface over the Redis protocol (worker.protocol; docs/protocol.md for other
languages); importing it loads nothing of ARQ, the fleet, the pipeline, the
store or the model providers (tests/unit/client/test_client_surface.py).

    from worker.client import HandoverUnavailable, InvalidHandover, schedule_memory_persistence

docs/handover.md is the chat server's guide.
"""

from worker.client.handover import (
    memory_events,
    memory_status,
    schedule_memory_persistence,
    session_tag,
    wait_for_memory,
)
from worker.errors import (
    HandoverBacklogFull,
    HandoverTooLarge,
    HandoverUnavailable,
    InvalidHandover,
    SessionBytesFull,
    UserSessionsFull,
)
from worker.memory_rules import Limits
from worker.protocol.events import CommitEvent
from worker.protocol.queue import Enqueued, HandoverState, redis_clock
from worker.protocol.shards import ShardedRedis
from worker.protocol.webhook_signature import SignatureInvalid
from worker.protocol.webhook_signature import verify as verify_webhook

__all__ = [
    "CommitEvent",
    "Enqueued",
    "HandoverBacklogFull",
    "HandoverState",
    "HandoverTooLarge",
    "HandoverUnavailable",
    "InvalidHandover",
    "Limits",
    "SessionBytesFull",
    "ShardedRedis",
    "SignatureInvalid",
    "UserSessionsFull",
    "memory_events",
    "memory_status",
    "redis_clock",
    "schedule_memory_persistence",
    "session_tag",
    "verify_webhook",
    "wait_for_memory",
]
