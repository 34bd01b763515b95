"""The lines of `memfleet import`: what a line may say, its import key, and legacy pieces."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from worker.memory_rules import Limits
from worker.ops.import_lines import (
    BadLine,
    LegacyBlob,
    chunks,
    parse_fact_line,
    parse_legacy_line,
)
from worker.store.imports import ImportRow, normalised

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
LIMITS = Limits(max_message_chars=200, max_messages=3, max_id_chars=16)
PRIVATE = "Lives in Porto"


def line(**fields: object) -> bytes:
    return json.dumps(fields).encode("utf-8") + b"\n"


def fact(**fields: object) -> ImportRow:
    parsed = parse_fact_line(line(**fields), LIMITS, NOW)
    assert isinstance(parsed, ImportRow), parsed
    return parsed


def test_a_minimal_line_is_a_stated_profile_fact_observed_now() -> None:
    row = fact(user_id="u1", text=f"  {PRIVATE}  ")
    assert (row.user_id, row.text, row.category, row.importance) == ("u1", PRIVATE, "general", 5)
    assert row.observed_at == NOW and row.terms.valid_from is None
    assert (row.terms.scope, row.terms.agent_id, row.terms.basis) == ("profile", None, "stated")
    assert row.terms.confidence == 0.85  # confidence_for("imported", "stated")
    assert not row.pinned and row.import_key.startswith("sha256:")


def test_every_optional_field_is_read() -> None:
    row = fact(user_id="u1", text="Calls the assistant Max", id=42, category="relationship",
               importance=8, agent_id="max", observed_at="2026-01-02T03:04:05Z",
               valid_from="2025-12-01", valid_to="2026-12-01", expires_at="2027-01-01T00:00",
               pinned=True, basis="inferred")
    assert row.import_key == "42"
    assert (row.category, row.importance, row.pinned) == ("relationship", 8, True)
    assert (row.terms.scope, row.terms.agent_id) == ("relationship", "max")
    assert row.observed_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert row.terms.valid_from == datetime(2025, 12, 1, tzinfo=UTC)
    assert row.terms.valid_to == datetime(2026, 12, 1, tzinfo=UTC)
    assert row.terms.expires_at == datetime(2027, 1, 1, tzinfo=UTC)
    assert row.terms.basis == "inferred" and row.terms.confidence == 0.55
    assert fact(user_id="u1", text="x", confidence=0.3).terms.confidence == 0.3


def test_the_key_without_an_id_is_what_the_fact_says_of_whom_and_when() -> None:
    base = fact(user_id="u1", text=PRIVATE).import_key
    assert fact(user_id="u1", text=PRIVATE, importance=9).import_key == base
    assert fact(user_id="u1", text=PRIVATE, observed_at="2020-01-01").import_key == base
    for other in (fact(user_id="u2", text=PRIVATE), fact(user_id="u1", text="Lives in Braga"),
                  fact(user_id="u1", text=PRIVATE, valid_from="2026-01-01"),
                  fact(user_id="u1", text=PRIVATE, agent_id="max")):
        assert other.import_key != base


def test_an_end_before_an_unstated_start_starts_it_there() -> None:
    row = fact(user_id="u1", text="Lived in Lyon", valid_to="2020-05-01")
    assert row.terms.valid_from == row.terms.valid_to == datetime(2020, 5, 1, tzinfo=UTC)


BAD = {
    b"not json\n": "is not JSON",
    b"[1, 2]\n": "is not a JSON object",
    b'{"user_id": "u1", "text": "caf\xe9"}\n': "is not valid UTF-8",
    line(text=PRIVATE): "user_id is missing",
    line(user_id="u1"): "text is missing",
    line(user_id="u1", text="   "): "text is empty",
    line(user_id="u1", text=7): "text must be a string",
    line(user_id="u1", text="x" * 201): "text is longer than 200 characters",
    line(user_id="u1", text="a\u0000b"): "text contains control characters",
    line(user_id="u1", text="\ud800"): "text is not valid UTF-8 (lone surrogate)",
    line(user_id="u" * 17, text=PRIVATE): "user_id is longer than 16 characters",
    line(user_id="", text=PRIVATE): "user_id must be a non-empty string",
    line(user_id="u1", text=PRIVATE, category="opinion"): "category must be one of",
    line(user_id="u1", text=PRIVATE, importance=11): "importance must be an integer",
    line(user_id="u1", text=PRIVATE, importance=True): "importance must be an integer",
    line(user_id="u1", text=PRIVATE, importance="5"): "importance must be an integer",
    line(user_id="u1", text=PRIVATE, valid_from="last year"): "valid_from is not an ISO 8601",
    line(user_id="u1", text=PRIVATE, expires_at=20261124): "expires_at must be an ISO 8601",
    line(user_id="u1", text=PRIVATE, valid_from="2026-02-01", valid_to="2026-01-01"):
        "valid_to is before valid_from",
    line(user_id="u1", text=PRIVATE, scope="relationship"): "agent_id is missing",
    line(user_id="u1", text=PRIVATE, scope="profile", agent_id="max"): "takes no agent_id",
    line(user_id="u1", text=PRIVATE, scope="world"): "scope must be one of",
    line(user_id="u1", text=PRIVATE, basis="guessed"): "basis must be one of",
    line(user_id="u1", text=PRIVATE, confidence=1.5): "confidence must be a number",
    line(user_id="u1", text=PRIVATE, pinned="yes"): "pinned must be true or false",
}


@pytest.mark.parametrize("raw", BAD, ids=lambda raw: BAD[raw][:30])
def test_a_bad_line_gets_a_reason_that_never_quotes_it(raw: bytes) -> None:
    parsed = parse_fact_line(raw, LIMITS, NOW)
    assert isinstance(parsed, BadLine)
    assert parsed.reason.startswith(BAD[raw]) or BAD[raw] in parsed.reason, parsed.reason
    assert PRIVATE not in parsed.reason and "caf" not in parsed.reason


def test_a_legacy_blob_is_keyed_by_its_id_or_else_its_text() -> None:
    with_id = parse_legacy_line(line(user_id="u1", text="I live in Porto", id="b1"), LIMITS)
    moved = parse_legacy_line(line(user_id="u1", text="I live in Braga", id="b1"), LIMITS)
    without = parse_legacy_line(line(user_id="u1", text="I live in Porto"), LIMITS)
    assert isinstance(with_id, LegacyBlob) and isinstance(moved, LegacyBlob)
    assert isinstance(without, LegacyBlob)
    assert with_id.key_prefix == moved.key_prefix != without.key_prefix
    assert with_id.import_key("Lives in Porto.").startswith(with_id.key_prefix)
    assert with_id.import_key("lives  in porto") == with_id.import_key("Lives in Porto.")
    too_long = parse_legacy_line(line(user_id="u1", text="x" * (3 * 200 + 1)), LIMITS)
    assert isinstance(too_long, BadLine) and "longer than 600" in too_long.reason


def test_pieces_end_where_a_thought_ends_and_lose_nothing() -> None:
    text = "First paragraph. It goes on.\n\nSecond one; short. " + "word " * 30
    pieces = chunks(text, 40)
    assert all(len(p) <= 40 for p in pieces)
    assert pieces[0] == "First paragraph. It goes on."
    assert " ".join(" ".join(pieces).split()) == " ".join(text.split())
    assert chunks("x" * 100, 40) == ["x" * 40, "x" * 40, "x" * 20]
    assert chunks("  short  ", 40) == ["short"]


def test_texts_are_compared_without_spacing_case_or_a_final_stop() -> None:
    assert normalised("  Lives in\n Porto. ") == normalised("lives in porto") == "lives in porto"
