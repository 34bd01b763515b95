"""What the app's lifespan builds once and every request uses (no module-level clients)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from worker.config import Settings
from worker.payload import Limits
from worker.providers.base import Providers
from worker.store.memory_api import MemoryApiStore

if TYPE_CHECKING:
    from api_stub.routes_chat import ChatLog


@dataclass(frozen=True, slots=True)
class ApiDeps:
    settings: Settings
    pool: Any
    redis: Any
    memory: MemoryApiStore
    providers: Providers
    limits: Limits
    chat: ChatLog
