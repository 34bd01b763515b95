"""What the app's lifespan builds once and every request uses (no module-level clients)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from api_stub.chat_log import ChatLog
from worker.config import Settings
from worker.contract import Limits
from worker.providers.base import Providers
from worker.store.base import MemoryStore


@dataclass(frozen=True, slots=True)
class ApiDeps:
    settings: Settings
    pool: Any
    redis: Any
    memory: MemoryStore
    providers: Providers
    limits: Limits
    chat: ChatLog
