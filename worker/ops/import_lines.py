"""The lines of `memfleet import`: one JSON object each, checked whole before
anything of it is written.

A line that cannot be used is reported by its number and a reason that never
quotes it (a fact's text is personal data). Pure functions: the orchestration
is worker.ops.importer.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

from worker.memory_rules import (
    BASES,
    CATEGORIES,
    MAX_IMPORTANCE,
    MIN_IMPORTANCE,
    SCOPES,
    Basis,
    Limits,
    confidence_for,
    id_fault,
    text_fault,
)
from worker.store.imports import ImportRow, normalised
from worker.store.types import FactTerms

DEFAULT_CATEGORY = "general"
DEFAULT_IMPORTANCE = 5
# A legacy blob goes to extraction in pieces of at most this many characters
# (and never more than MEMFLEET_MAX_MESSAGE_CHARS): each answer is bounded
# (worker.pipeline.extract.MAX_CANDIDATES), so a piece must be small enough for
# every fact in it to fit in one.
LEGACY_CHUNK_CHARS = 4_000


class _Bad(Exception):
    """Internal: why the line cannot be used (read after "line N: ")."""


@dataclass(frozen=True, slots=True)
class BadLine:
    reason: str


@dataclass(frozen=True, slots=True)
class LegacyBlob:
    """An old free-text memory of one user, with the prefix of its facts' import keys."""

    user_id: str
    text: str
    key_prefix: str
    observed_at: datetime | None

    def import_key(self, fact_text: str) -> str:
        """The fact's identity: its blob and its text, so a second run finds it again."""
        return self.key_prefix + _digest(normalised(fact_text))


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _object(raw: bytes) -> dict[str, Any]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _Bad("is not valid UTF-8") from None
    try:
        value = json.loads(text.lstrip("\ufeff"))
    except (ValueError, RecursionError):
        raise _Bad("is not JSON") from None
    if not isinstance(value, dict):
        raise _Bad("is not a JSON object")
    return value


def _id(data: dict[str, Any], name: str, limits: Limits, *, required: bool) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            raise _Bad(f"{name} is missing")
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # numeric ids of the source are kept as their digits
    fault = id_fault(value, limits.max_id_chars)
    if fault is not None:
        raise _Bad(f"{name} {fault}")
    assert isinstance(value, str)
    return value


def _text(data: dict[str, Any], max_chars: int) -> str:
    value = data.get("text")
    if value is None:
        raise _Bad("text is missing")
    if not isinstance(value, str):
        raise _Bad("text must be a string")
    value = value.strip()
    if not value:
        raise _Bad("text is empty")
    if len(value) > max_chars:
        raise _Bad(f"text is longer than {max_chars} characters")
    fault = text_fault(value)
    if fault is not None:
        raise _Bad(f"text {fault}")
    return value


def _moment(data: dict[str, Any], name: str) -> datetime | None:
    """An ISO 8601 date or date-time; a date is its midnight, a time without an offset UTC."""
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _Bad(f"{name} must be an ISO 8601 date string")
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise _Bad(f"{name} is not an ISO 8601 date") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _choice(data: dict[str, Any], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = data.get(name, default)
    if value not in allowed:
        raise _Bad(f"{name} must be one of {', '.join(allowed)}")
    assert isinstance(value, str)
    return value


def _importance(data: dict[str, Any]) -> int:
    value = data.get("importance", DEFAULT_IMPORTANCE)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) \
            or not MIN_IMPORTANCE <= value <= MAX_IMPORTANCE:
        raise _Bad(f"importance must be an integer from {MIN_IMPORTANCE} to {MAX_IMPORTANCE}")
    return value


def _confidence(data: dict[str, Any], default: float) -> float:
    value = data.get("confidence")
    if value is None:
        return default
    if not isinstance(value, int | float) or isinstance(value, bool) \
            or not math.isfinite(value) or not 0 <= value <= 1:
        raise _Bad("confidence must be a number from 0 to 1")
    return float(value)


def _scope(data: dict[str, Any], limits: Limits) -> tuple[str, str | None]:
    agent = _id(data, "agent_id", limits, required=False)
    scope = _choice(data, "scope", SCOPES, "relationship" if agent else "profile")
    if scope == "relationship" and agent is None:
        raise _Bad("agent_id is missing for a relationship fact")
    if scope == "profile" and agent is not None:
        raise _Bad("a profile fact takes no agent_id")
    return scope, agent


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def _fact(data: dict[str, Any], limits: Limits, now: datetime) -> ImportRow:
    user_id = _id(data, "user_id", limits, required=True)
    assert user_id is not None
    text = _text(data, limits.max_message_chars)
    source_id = _id(data, "id", limits, required=False)
    category = _choice(data, "category", CATEGORIES, DEFAULT_CATEGORY)
    importance = _importance(data)
    scope, agent = _scope(data, limits)
    observed_at = _moment(data, "observed_at") or now
    given_from = _moment(data, "valid_from")
    valid_to = _moment(data, "valid_to")
    expires_at = _moment(data, "expires_at")
    valid_from = given_from
    if valid_to is not None and valid_to < (given_from or observed_at):
        if given_from is not None:
            raise _Bad("valid_to is before valid_from")
        valid_from = valid_to  # it ended before it was recorded, so it began no later
    pinned = data.get("pinned", False)
    if not isinstance(pinned, bool):
        raise _Bad("pinned must be true or false")
    basis = _choice(data, "basis", BASES, "stated")
    confidence = _confidence(data, confidence_for("imported", cast(Basis, basis)))
    # Without an id of the source, a fact is what it says, of whom, when and in
    # which relationship: the same line in a later file is the same fact.
    key = source_id if source_id is not None else "sha256:" + _digest(json.dumps(
        [user_id, text, _iso(given_from), scope, agent], ensure_ascii=False))
    return ImportRow(
        user_id=user_id, text=text, category=category, importance=importance,
        observed_at=observed_at,
        terms=FactTerms(scope=scope, agent_id=agent, valid_from=valid_from, valid_to=valid_to,
                        expires_at=expires_at, basis=basis, confidence=confidence),
        import_key=key, pinned=pinned,
    )


def parse_fact_line(raw: bytes, limits: Limits, now: datetime) -> ImportRow | BadLine:
    """One line of `memfleet import --file`; ``now`` is the observation of a line naming none."""
    try:
        return _fact(_object(raw), limits, now)
    except _Bad as bad:
        return BadLine(str(bad))


def chunk_chars(limits: Limits) -> int:
    return min(LEGACY_CHUNK_CHARS, limits.max_message_chars)


def parse_legacy_line(raw: bytes, limits: Limits) -> LegacyBlob | BadLine:
    """One line of `memfleet import --legacy`: at most as many pieces as a hand-over
    may hold messages, each no longer than a message may be."""
    try:
        data = _object(raw)
        user_id = _id(data, "user_id", limits, required=True)
        assert user_id is not None
        text = _text(data, limits.max_messages * chunk_chars(limits))
        source_id = _id(data, "id", limits, required=False)
        observed_at = _moment(data, "observed_at")
    except _Bad as bad:
        return BadLine(str(bad))
    blob = _digest("id:" + source_id) if source_id is not None else _digest("text:" + text)
    return LegacyBlob(user_id, text, f"legacy:{blob}:", observed_at)


# Where a piece may end, best first: a paragraph, a line, a sentence, a word.
_BREAKS = ("\n\n", "\n", ". ", "; ", " ")


def chunks(text: str, size: int) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut where a thought ends
    when one ends in the second half of the piece."""
    pieces: list[str] = []
    rest = text.strip()
    while len(rest) > size:
        window = rest[:size]
        cut = size
        for mark in _BREAKS:
            at = window.rfind(mark)
            if at >= size // 2:
                cut = at + len(mark.rstrip()) if mark.strip() else at
                break
        cut = max(cut, 1)
        piece, rest = rest[:cut].strip(), rest[cut:].strip()
        if piece:
            pieces.append(piece)
    if rest:
        pieces.append(rest)
    return pieces
