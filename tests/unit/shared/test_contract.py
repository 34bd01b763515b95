"""worker.memory_rules is the one definition: the schema, the settings and the API agree with it."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from worker.api.fields import MAX_CONTENT_CHARS, MAX_ID_CHARS, clean_text
from worker.api.memory_models import Fact
from worker.config import Settings
from worker.memory_rules import (
    BASES,
    CATEGORIES,
    CATEGORY_ORDER,
    DEFAULT_MAX_ID_CHARS,
    DEFAULT_MAX_MESSAGE_CHARS,
    DEFAULT_MAX_MESSAGES,
    MAX_IMPORTANCE,
    MIN_IMPORTANCE,
    SCOPES,
    SOURCE_KINDS,
    Limits,
    text_fault,
)
from worker.providers import wire
from worker.store.types import FactRecord

SCHEMA_DIR = Path(__file__).resolve().parents[3] / "schema"


def _schema_sql() -> str:
    """The schema in the order it is applied: baseline, numbered migrations, routines."""
    files = [SCHEMA_DIR / "baseline.sql", *sorted(SCHEMA_DIR.glob("[0-9]*.sql")),
             *sorted((SCHEMA_DIR / "routines").glob("*.sql"))]
    assert all(path.is_file() for path in files), f"no SQL under {SCHEMA_DIR}"
    return "\n".join(path.read_text("utf-8") for path in files)


def _check_lists(column: str) -> list[set[str]]:
    found = re.findall(rf"CHECK\s*\(\s*{column}\s+IN\s*\(([^)]*)\)", _schema_sql(), re.I)
    return [set(re.findall(r"'([^']*)'", values)) for values in found]


def test_the_schema_checks_exactly_the_python_categories() -> None:
    checks = _check_lists("category")
    assert checks, "no CHECK (category IN (...)) in schema/"
    for values in checks:
        assert values == set(CATEGORIES)


def test_the_schema_checks_exactly_the_python_source_kinds() -> None:
    checks = _check_lists("source_kind")
    assert checks, "no CHECK (source_kind IN (...)) in schema/"
    assert checks[-1] == set(SOURCE_KINDS), "the latest migration's list is the one in force"


@pytest.mark.parametrize(("column", "values"), [("scope", SCOPES), ("basis", BASES)])
def test_the_schema_checks_the_python_terms(column: str, values: tuple[str, ...]) -> None:
    checks = _check_lists(column)
    assert checks and checks[-1] == set(values)


def test_the_schema_checks_the_same_importance_range() -> None:
    found = re.findall(r"importance\s+BETWEEN\s+(\d+)\s+AND\s+(\d+)", _schema_sql(), re.I)
    assert found
    assert {(int(low), int(high)) for low, high in found} == {(MIN_IMPORTANCE, MAX_IMPORTANCE)}


def test_the_reading_order_lists_every_category_once() -> None:
    assert sorted(CATEGORY_ORDER) == sorted(CATEGORIES)
    assert len(set(CATEGORY_ORDER)) == len(CATEGORY_ORDER)


def test_the_wire_and_the_api_use_the_contract_categories() -> None:
    assert wire.CATEGORIES is CATEGORIES
    enum = Fact.model_json_schema()["properties"]["category"]["enum"]
    assert enum == list(CATEGORIES)


def test_settings_default_to_the_contract_limits() -> None:
    settings = Settings()
    assert Limits.from_settings(settings) == Limits()
    assert Limits() == Limits(DEFAULT_MAX_MESSAGE_CHARS, DEFAULT_MAX_MESSAGES,
                              DEFAULT_MAX_ID_CHARS)
    assert (MAX_CONTENT_CHARS, MAX_ID_CHARS) == (DEFAULT_MAX_MESSAGE_CHARS, DEFAULT_MAX_ID_CHARS)


def test_limits_follow_the_settings() -> None:
    settings = Settings(max_message_chars=10, max_messages=3, max_id_chars=7)
    assert Limits.from_settings(settings) == Limits(10, 3, 7)


@pytest.mark.parametrize(
    ("text", "fault"),
    [
        ("plain words", None),
        ("tab\tnewline\ncarriage\r", None),
        ("ünïcödé and emoji 🙂", None),
        ("nul\x00", "contains control characters"),
        ("bell\x07", "contains control characters"),
        ("delete\x7f", "contains control characters"),
        ("c1\x85", "contains control characters"),
        ("lone \ud800 surrogate", "is not valid UTF-8 (lone surrogate)"),
    ],
)
def test_text_fault(text: str, fault: str | None) -> None:
    assert text_fault(text) == fault


def test_the_api_refuses_what_the_hand_over_refuses() -> None:
    for bad in ("nul\x00", "lone \ud800"):
        with pytest.raises(ValueError, match=re.escape(f"text {text_fault(bad)}")):
            clean_text(bad)
    with pytest.raises(ValueError, match="blank"):
        clean_text("   ")


def test_the_api_fact_is_the_record_json_less_the_user() -> None:
    now = datetime(2026, 11, 22, 9, 30, tzinfo=UTC)
    record = FactRecord(
        id=7, user_id="u", text="Lives in Lisbon", category="fact", importance=6,
        observed_at=now, source_session_id="s", source_kind="extracted",
        superseded_at=None, superseded_by=None, created_at=now,
    )
    fields = [name for name in record.to_json() if name != "user_id"]
    assert Fact.of(record).model_dump() == {name: getattr(record, name) for name in fields}
