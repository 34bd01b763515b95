"""What the app's lifespan builds once and every request uses (no module-level clients)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api_stub.chat_log import ChatLog
from api_stub.event_stream import EventStreams
from api_stub.exports import ExportGate
from api_stub.long_polls import LongPolls
from api_stub.wait_poller import WaitPoller
from api_stub.write_rate import UserRate
from worker.config import Settings
from worker.memory_rules import Limits
from worker.providers.base import Providers
from worker.store.base import MemoryStore


@dataclass(frozen=True, slots=True)
class ApiDeps:
    settings: Settings
    pool: Any
    redis: Any  # the first shard's client: the API's own keys (chat, exports, write rate)
    handover: Any  # hand-overs, status, erase: ``redis``, or a ShardedRedis routing by user
    memory: MemoryStore
    providers: Providers
    limits: Limits
    chat: ChatLog
    exports: ExportGate
    writes: UserRate  # manual fact writes, per user
    erases: UserRate  # erases and consent changes, per user
    streams: EventStreams
    waits: LongPolls  # the hand-over waits open in this process (api_stub.long_polls)
    poller: WaitPoller  # their reads of Redis, shared (api_stub.wait_poller)
