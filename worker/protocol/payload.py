"""The hand-over payload: a session's messages as the chat server sent them.

Validation happens at the door (the hand-over call and the CLI) so that a bad
message is the caller's clear error, and again in the worker, where a payload
that does not parse is recorded and never retried.
"""

from __future__ import annotations

from pydantic import ValidationError

from worker.conversation import Handover as Handover
from worker.conversation import Message as Message
from worker.conversation import Snapshot as Snapshot
from worker.conversation import message_hash as message_hash
from worker.errors import HandoverTooLarge, InvalidHandover, InvalidJob
from worker.memory_rules import Limits as Limits  # re-exported: callers size hand-overs with it
from worker.memory_rules import id_fault, text_fault


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
    the session's backlog, worker.protocol.queue). Of those, only the newest whose content
    could fit ``max_handover_bytes`` are kept (characters are at most bytes, so
    fit_handover would drop the others): an older message is neither validated nor
    sent. Anything else is returned as it is."""
    if not isinstance(raw, list | tuple):
        return raw
    if len(raw) > limits.max_messages:
        raw = raw[len(raw) - limits.max_messages:]
    chars = 0
    for index in range(len(raw) - 1, -1, -1):
        item = raw[index]
        content = item.content if isinstance(item, Message) else (
            item.get("content") if isinstance(item, dict) else None)
        chars += len(content) if isinstance(content, str) else 0
        if chars > limits.max_handover_bytes:
            # No window that holds this message fits; the newest alone is kept, to be
            # refused with its own error.
            return raw[index + 1:] if index < len(raw) - 1 else raw[index:]
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
        size = len(message.content.encode("utf-8"))  # valid UTF-8: _check_text said so
        if size > limits.max_message_bytes:
            raise HandoverTooLarge(f"message {index}: content", size, limits.max_message_bytes)
        messages.append(message)
    return tuple(messages)


def encode_handover(handover: Handover) -> bytes:
    """Compact JSON, fields in declaration order: the hand-over script compares two
    lists by their ``"messages":[...]`` text (worker/protocol/lua/enqueue.lua)."""
    exclude = {name for name in ("agent_id", "listed_at_us") if getattr(handover, name) is None}
    return handover.model_dump_json(exclude=exclude or None).encode()


def fit_handover(handover: Handover, limits: Limits) -> tuple[Handover, bytes]:
    """The hand-over and its payload, cut to its most recent messages whose payload
    fits ``max_handover_bytes`` (a long session goes as its newest window, as with
    ``max_messages``: recent_window). HandoverTooLarge when not even the newest
    message fits beside the ids and the trace."""
    payload = encode_handover(handover)
    limit = limits.max_handover_bytes
    if len(payload) <= limit:
        return handover, payload
    # The envelope, then each message's JSON and its comma, newest first: the
    # payload's exact size, as pydantic writes it (checked again below).
    room = limit - len(encode_handover(handover.model_copy(update={"messages": ()}))) + 1
    keep = 0
    for message in reversed(handover.messages):
        room -= len(message.model_dump_json().encode()) + 1
        if room < 0:
            break
        keep += 1
    while keep > 0:
        window = handover.model_copy(update={"messages": handover.messages[-keep:]})
        payload = encode_handover(window)
        if len(payload) <= limit:
            return window, payload
        keep -= 1
    newest = handover.model_copy(update={"messages": handover.messages[-1:]})
    raise HandoverTooLarge("the hand-over", len(encode_handover(newest)), limit)


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
