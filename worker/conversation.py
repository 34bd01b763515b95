"""A session's conversation as the pipeline reads it: messages, the hand-over
that carries them, and the numbered list Redis held (worker.protocol writes and
reads these; the pipeline only reads them, so they live beside neither)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Role = Literal["user", "assistant", "system", "tool"]


class Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    role: Role
    content: str


class Handover(BaseModel):
    """What Redis holds for a session: the latest full message list."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    v: Literal[1] = 1
    session_id: str
    user_id: str
    messages: tuple[Message, ...]
    handed_over_at: datetime
    trace: dict[str, str] = {}
    # The persona or agent instance of the session (docs/memory_model.md, scopes).
    # Written only when given, last, so a payload without it reads as before.
    agent_id: str | None = None
    # When the chat server read this list, on the Redis clock in microseconds (the
    # clock hand-over numbers and erases are read from: worker.protocol.queue.redis_clock).
    # A list read at or before an erase of its user stores nothing, whenever it is
    # handed over (docs/architecture.md, Erasure). Written only when given.
    listed_at_us: int | None = Field(default=None, ge=0)


def message_hash(message: Message) -> str:
    """The content hash the cursor is built from: sha256 of ``role:content``."""
    return hashlib.sha256(f"{message.role}:{message.content}".encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One message list of a session as Redis holds it, with its hand-over number.

    ``seq`` grows with every hand-over of the session; the cursor records the
    number of the list its last slice came from (worker.pipeline.cursor).
    """

    seq: int
    handover: Handover
    latest: bool  # the session's current list; older ones wait in its backlog

    @property
    def fence_seq(self) -> int:
        """The number an erase fence is compared with: the hand-over's, or when the
        chat server read the list, if earlier (a list read before an erase and handed
        over after it is the erase's too)."""
        listed = self.handover.listed_at_us
        return self.seq if listed is None else min(self.seq, listed)
