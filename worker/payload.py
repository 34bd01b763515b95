"""The hand-over payload: a session's messages as the chat server sent them.

Validation happens at the door (the hand-over call and the CLI) so that a bad
message is the caller's clear error, and again in the worker, where a payload
that does not parse is recorded and never retried.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from worker.contract import Limits as Limits  # re-exported: callers size hand-overs with it
from worker.contract import id_fault, text_fault
from worker.errors import InvalidHandover, InvalidJob

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
    # The persona or agent instance of the session (design.md's memory scopes).
    # Written only when given, last, so a payload without it reads as before.
    agent_id: str | None = None
    # When the chat server read this list, on the Redis clock in microseconds (the
    # clock hand-over numbers and erases are read from: worker.queue.redis_clock).
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
    number of the list its last slice came from (worker.stages.cursor).
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


def _check_text(value: str, what: str) -> None:
    fault = text_fault(value)
    if fault is not None:
        raise InvalidHandover(f"{what} {fault}")


def check_id(value: object, what: str, limits: Limits) -> str:
    fault = id_fault(value, limits.max_id_chars)
    if fault is not None:
        raise InvalidHandover(f"{what} {fault}")
    assert isinstance(value, str)  # id_fault refuses anything else
    return value


def recent_window(raw: object, limits: Limits) -> object:
    """The most recent ``max_messages`` of a longer list, for the hand-over: a long
    session is handed over as its latest window, where the cursor finds its place
    (a window that no longer extends an unfinished earlier list keeps that list in
    the session's backlog, worker.queue). Anything else is returned as it is."""
    if isinstance(raw, list | tuple) and len(raw) > limits.max_messages:
        return raw[len(raw) - limits.max_messages:]
    return raw


def parse_messages(raw: object, limits: Limits) -> tuple[Message, ...]:
    """Validate a list of ``{"role", "content"}`` dicts; raise InvalidHandover on the first fault.

    The error names the position and the fault, never the content.
    """
    if not isinstance(raw, list | tuple):
        raise InvalidHandover("messages must be a list of {role, content} objects")
    if len(raw) > limits.max_messages:
        raise InvalidHandover(
            f"{len(raw)} messages is more than the limit of {limits.max_messages}"
        )
    messages = []
    for index, item in enumerate(raw):
        if isinstance(item, Message):
            message = item
        else:
            try:
                message = Message.model_validate(item)
            except ValidationError as exc:
                fields = ", ".join(
                    f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in exc.errors()
                )
                raise InvalidHandover(f"message {index}: {fields}") from None
        if not message.content.strip():
            raise InvalidHandover(f"message {index}: content is empty")
        if len(message.content) > limits.max_message_chars:
            raise InvalidHandover(
                f"message {index}: content is {len(message.content)} characters,"
                f" over the limit of {limits.max_message_chars}"
            )
        _check_text(message.content, f"message {index} content")
        messages.append(message)
    return tuple(messages)


def encode_handover(handover: Handover) -> bytes:
    """Compact JSON, fields in declaration order: the hand-over script compares two
    lists by their ``"messages":[...]`` text (worker/lua/enqueue.lua)."""
    exclude = {name for name in ("agent_id", "listed_at_us") if getattr(handover, name) is None}
    return handover.model_dump_json(exclude=exclude or None).encode()


def decode_handover(raw: bytes | str | None, limits: Limits) -> Handover:
    """Read a payload back from Redis; anything unreadable is an InvalidJob."""
    if raw is None:
        raise InvalidJob("the session has no hand-over payload")
    try:
        handover = Handover.model_validate_json(raw)
    except (ValueError, ValidationError) as exc:
        raise InvalidJob(f"the hand-over payload does not parse: {type(exc).__name__}") from exc
    try:
        check_id(handover.session_id, "session_id", limits)
        check_id(handover.user_id, "user_id", limits)
        if handover.agent_id is not None:
            check_id(handover.agent_id, "agent_id", limits)
        parse_messages(list(handover.messages), limits)
    except InvalidHandover as exc:
        raise InvalidJob(str(exc)) from exc
    return handover
