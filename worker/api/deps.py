"""What the app's lifespan builds once and every request uses (no module-level clients)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from worker.api.event_stream import EventStreams
from worker.api.exports import ExportGate
from worker.api.long_polls import LongPolls
from worker.api.settings import ApiSettings
from worker.api.wait_poller import WaitPoller
from worker.api.write_rate import UserRate
from worker.memory_rules import Limits
from worker.providers.base import Providers
from worker.store.base import MemoryStore

# What an erase of the user also clears, beyond memfleet's own (worker.api.extensions):
# the user id in, the counts to report as ``deleted`` out.
EraseHook = Callable[[str], Awaitable[Mapping[str, int]]]


@dataclass(frozen=True, slots=True)
class ApiDeps:
    settings: ApiSettings
    pool: Any
    redis: Any  # the first shard's client: the API's own keys (exports, write rate)
    handover: Any  # hand-overs, status, erase: ``redis``, or a ShardedRedis routing by user
    memory: MemoryStore
    providers: Providers
    limits: Limits
    exports: ExportGate
    writes: UserRate  # manual fact writes, per user
    erases: UserRate  # erases and consent changes, per user
    streams: EventStreams
    waits: LongPolls  # the hand-over waits open in this process (worker.api.long_polls)
    poller: WaitPoller  # their reads of Redis, shared (worker.api.wait_poller)
    # The extensions' erase hooks, run first by an erase (worker.api.extensions).
    erase_hooks: tuple[EraseHook, ...] = ()
