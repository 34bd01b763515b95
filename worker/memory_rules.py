"""The rules every side of memfleet shares: categories, limits, text validation.

The worker, the memory API and the chat stand-in import these and copy none of
them, so a fact or a message one side accepts the other side accepts too. The
schema's CHECK constraints list the same categories and source kinds (a unit
test compares them). Standard library only: any side can import it cheaply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Protocol, get_args

# ---------------------------------------------------------------- facts

Category = Literal["preference", "fact", "event", "relationship", "decision", "general"]
CATEGORIES: tuple[Category, ...] = get_args(Category)

# How facts are grouped for a reader (the prompt block, the API's list): who the
# user is first, passing events and the rest last.
CATEGORY_ORDER: tuple[Category, ...] = (
    "fact", "preference", "relationship", "decision", "event", "general",
)

SourceKind = Literal["extracted", "manual", "backfill", "imported"]
SOURCE_KINDS: tuple[SourceKind, ...] = get_args(SourceKind)

# profile: about the user, for any assistant; relationship: part of the user's
# relationship with one agent (persona, assistant instance), carried with its id.
Scope = Literal["profile", "relationship"]
SCOPES: tuple[Scope, ...] = get_args(Scope)
# What a read asks for (eros-engine's memory_scope): nothing, one layer, or both;
# "all" is every layer of every agent, for the user's own view of their memory
# and for operators, never for one assistant's prompt.
MemoryScope = Literal["none", "profile", "relationship", "both", "all"]
MEMORY_SCOPES: tuple[MemoryScope, ...] = get_args(MemoryScope)

# stated: the user said it; inferred: it follows from what they said.
Basis = Literal["stated", "inferred"]
BASES: tuple[Basis, ...] = get_args(Basis)
SupersededReason = Literal["updated", "deleted", "expired", "removed"]


def confidence_for(source: SourceKind, basis: Basis) -> float:
    """How far a fact is trusted, from where it came from: written by the user by
    hand, then stated in conversation, then imported or recovered from an old
    blob, then inferred. Orders recall and breaks ties; an inferred fact never
    replaces a more trusted one without the user (worker.pipeline.consolidate)."""
    if source == "manual":
        return 1.0
    stated = {"extracted": 0.9, "imported": 0.85, "backfill": 0.8}[source]
    return stated if basis == "stated" else round(stated - 0.3, 2)

MIN_IMPORTANCE = 1
MAX_IMPORTANCE = 10

# ---------------------------------------------------------------- hand-over limits

# The defaults of MEMFLEET_MAX_MESSAGE_CHARS, MEMFLEET_MAX_MESSAGES and
# MEMFLEET_MAX_ID_CHARS; the API's documented request sizes use them too.
DEFAULT_MAX_MESSAGE_CHARS = 32_000
DEFAULT_MAX_MESSAGES = 20_000
DEFAULT_MAX_ID_CHARS = 256
# Byte budgets (UTF-8), since characters do not bound memory: a message of
# 32,000 astral characters is 128,000 bytes. A message: 64 KiB holds any
# message of the character limit in Latin, Greek or Cyrillic script, about
# 21,800 CJK characters or 16,384 emoji. A hand-over: the payload as Redis
# stores it (the JSON worker.protocol.payload.encode_handover writes); a longer list is
# handed over as its most recent window that fits. A session: its latest list
# and its backlog of older lists together, as Redis holds them.
DEFAULT_MAX_MESSAGE_BYTES = 65_536
DEFAULT_MAX_HANDOVER_BYTES = 1_048_576
DEFAULT_MAX_SESSION_BYTES = 4_194_304
# Sessions of one user holding a message list in Redis at once (a list or an
# older list no commit has finished); a finished, idle session does not count.
DEFAULT_MAX_USER_SESSIONS = 16
# What a hand-over's JSON needs beyond its messages (ids, time, trace): the
# hand-over budget must leave this much room beside one message of the limit.
HANDOVER_ENVELOPE_BYTES = 8_192


class LimitSettings(Protocol):
    """Anything that carries the limits (worker.config.Settings does)."""

    @property
    def max_message_chars(self) -> int: ...

    @property
    def max_messages(self) -> int: ...

    @property
    def max_id_chars(self) -> int: ...

    @property
    def max_message_bytes(self) -> int: ...

    @property
    def max_handover_bytes(self) -> int: ...

    @property
    def max_session_bytes(self) -> int: ...

    @property
    def max_user_sessions(self) -> int: ...


def byte_limits_fault(message_bytes: int, handover_bytes: int, session_bytes: int) -> str | None:
    """Why the three byte budgets cannot work together, or None: one message of
    the limit must fit a hand-over, and a hand-over of the limit a session."""
    if handover_bytes < message_bytes + HANDOVER_ENVELOPE_BYTES:
        return (f"MEMFLEET_MAX_HANDOVER_BYTES must be at least MEMFLEET_MAX_MESSAGE_BYTES"
                f" + {HANDOVER_ENVELOPE_BYTES}")
    if session_bytes < handover_bytes:
        return "MEMFLEET_MAX_SESSION_BYTES must be at least MEMFLEET_MAX_HANDOVER_BYTES"
    return None


@dataclass(frozen=True, slots=True)
class Limits:
    """What a hand-over may hold: checked at the door and again by the worker; the
    session and user budgets are kept by Redis itself (worker/protocol/lua/enqueue.lua)."""

    max_message_chars: int = DEFAULT_MAX_MESSAGE_CHARS
    max_messages: int = DEFAULT_MAX_MESSAGES
    max_id_chars: int = DEFAULT_MAX_ID_CHARS
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_handover_bytes: int = DEFAULT_MAX_HANDOVER_BYTES
    max_session_bytes: int = DEFAULT_MAX_SESSION_BYTES
    max_user_sessions: int = DEFAULT_MAX_USER_SESSIONS

    @classmethod
    def from_settings(cls, settings: LimitSettings) -> Limits:
        return cls(settings.max_message_chars, settings.max_messages, settings.max_id_chars,
                   settings.max_message_bytes, settings.max_handover_bytes,
                   settings.max_session_bytes, settings.max_user_sessions)


# ---------------------------------------------------------------- text

# C0 and C1 control characters other than tab, newline and carriage return.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def text_fault(value: str) -> str | None:
    """Why ``value`` cannot be stored or handed over, or None when it can.

    PostgreSQL refuses lone surrogates and NUL; the other control characters
    are refused too, so nothing invisible reaches a prompt. The reason reads
    after the name of the field ("content contains control characters") and
    never quotes the text.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid UTF-8 (lone surrogate)"
    if _CONTROL.search(value):
        return "contains control characters"
    return None


# Ids allow no control character at all, tab and newline included.
_ID_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def id_fault(value: object, max_chars: int) -> str | None:
    """Why ``value`` cannot be a user or session id, or None when it can: the one
    rule for the hand-over and the memory API alike. Never quotes the id."""
    if not isinstance(value, str) or not value.strip():
        return "must be a non-empty string"
    if len(value) > max_chars:
        return f"is longer than {max_chars} characters"
    fault = text_fault(value)
    if fault is not None:
        return fault
    if _ID_CONTROL.search(value):
        return "contains control characters"
    return None
