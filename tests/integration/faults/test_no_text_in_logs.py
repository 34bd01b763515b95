"""No user text in logs, spans or audit rows on any failure path; the session goes on.

A marker string sits in the user's message (and so in every model request and
in the stub's answers that quote it). Each failure path a job can take runs
through a real worker (ARQ, Redis, PostgreSQL), and everything it leaves is
searched for the marker: every stdlib log record with its traceback (ARQ's
own failure line included), every structlog event, every exported span (its
attributes, events and status), and the audit rows.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import asyncpg
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from redis.asyncio import Redis
from structlog.testing import capture_logs

from api_stub.llm_stub import StubServer
from tests.helpers import active_texts, drain, runs, user_msg
from tests.openai_stub import openai_settings
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.pipeline import extract
from worker.telemetry import setup_telemetry

MARKER = "Qzmarker7731"
# On the record, ARQ's failure line and the span's exception would quote this.
LONG_FACT = f"I live in Oslo. My {MARKER}{'x' * 1_200} is wonderful."


class Captured:
    """What one drain left behind, as one text to search."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __str__(self) -> str:
        return "\n".join(self.texts)


async def drain_captured(settings: Settings, caplog: pytest.LogCaptureFixture,
                         captured: Captured) -> dict[str, int]:
    exporter = InMemorySpanExporter()
    telemetry = setup_telemetry(settings, span_exporter=exporter)
    caplog.clear()
    with capture_logs() as events:
        counts = await drain(settings, telemetry=telemetry)
    formatter = logging.Formatter("%(name)s %(levelname)s %(message)s")
    captured.texts += [formatter.format(record) for record in caplog.records]
    captured.texts += [json.dumps(event, default=str) for event in events]
    captured.texts += [span.to_json() for span in exporter.get_finished_spans()]
    assert caplog.records or events, "the capture saw the worker's logs"
    return counts


async def hand_over(settings: Settings, redis: Redis, session: str, user: str,
                    lines: list[str]) -> None:
    await schedule_memory_persistence(redis, session, user, [user_msg(t) for t in lines],
                                      queue_name=settings.queue_name)


async def audit(db: asyncpg.Connection, session: str, user: str) -> list[dict[str, Any]]:
    return [dict(r) for r in await runs(db, session, user)]


def assert_clean(captured: Captured, rows: list[dict[str, Any]]) -> None:
    everything = str(captured) + json.dumps(rows, default=str)
    assert MARKER not in everything, everything[max(0, everything.find(MARKER) - 300):][:600]


@pytest.fixture(autouse=True)
def _logs_at_info(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)  # the level a worker runs at by default


async def test_a_fact_above_the_limit_leaves_no_text_and_the_session_goes_on(
    settings: Settings, redis: Redis, db: asyncpg.Connection, caplog: pytest.LogCaptureFixture
) -> None:
    captured = Captured()
    await hand_over(settings, redis, "s-long", "u-long", [LONG_FACT])
    await drain_captured(settings, caplog, captured)
    await hand_over(settings, redis, "s-long", "u-long", [LONG_FACT, "I use Zig."])
    await drain_captured(settings, caplog, captured)
    rows = await audit(db, "s-long", "u-long")
    assert [r["outcome"] for r in rows] == ["committed", "committed"], rows
    assert sorted(await active_texts(db, "u-long")) == ["Lives in Oslo", "Uses Zig"]
    assert_clean(captured, rows)


async def test_an_unexpected_error_in_a_stage_leaves_no_text(
    settings: Settings, redis: Redis, db: asyncpg.Connection,
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch,
) -> None:
    def quoting_bug(answer: Any, **_: Any) -> Any:
        raise ValueError(f"cannot read {answer!r}")  # a bug whose message quotes the facts

    monkeypatch.setattr(extract, "candidates_from", quoting_bug)
    captured = Captured()
    await hand_over(settings, redis, "s-bug", "u-bug", [f"I use {MARKER}."])
    counts = await drain_captured(settings, caplog, captured)
    assert counts["failed"] == 1
    rows = await audit(db, "s-bug", "u-bug")
    assert [(r["outcome"], r["error"]) for r in rows] == [("error", "ValueError")]
    assert any("UnexpectedJobError" in t and "ValueError at " in t for t in captured.texts), \
        "ARQ logged the stand-in, naming the type and place"
    assert_clean(captured, rows)


@pytest.mark.parametrize(("fault", "outcome"), [
    ({"mode": "quoting_break", "count": 2}, "skipped"),  # the schema broken with user text
    ({"mode": "oversized", "count": 2}, "skipped"),  # above what the worker reads
    ({"mode": "400", "echo": True}, "failed"),  # a refusal whose message quotes the body
])
async def test_a_model_failure_leaves_no_text(
    settings: Settings, redis: Redis, db: asyncpg.Connection, stub: StubServer,
    caplog: pytest.LogCaptureFixture, fault: dict[str, Any], outcome: str,
) -> None:
    settings = openai_settings(settings, stub, max_tries=1)
    stub.add_fault(**fault, task="fact_extraction")
    captured = Captured()
    session = f"s-{fault['mode']}"
    await hand_over(settings, redis, session, "u-model", [f"{MARKER} here. I use Zig."])
    await drain_captured(settings, caplog, captured)
    rows = await audit(db, session, "u-model")
    assert [r["outcome"] for r in rows] == [outcome], rows
    chat = [r for r in stub.recorded() if r["path"].endswith("/chat/completions")]
    assert any(MARKER in json.dumps(r["body"]) for r in chat), "the marker reached the model"
    assert_clean(captured, rows)
