"""The rolling summary is committed with the slice it summarises, in the persist
transaction; a summarizer that fails never costs the facts."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import asyncpg
from redis.asyncio import Redis

from tests.helpers import active_texts, job_deps, lock_key, run_job, runs, user_msg
from worker.client.handover import schedule_memory_persistence
from worker.config import Settings
from worker.errors import ConfigurationError, ProviderUnavailable
from worker.providers.base import Answer, Providers
from worker.providers.factory import build_providers
from worker.providers.wire import SummaryAnswer, SummaryRequest


class BrokenSummarizer:
    """Fails as a provider fails after its own retries, or with ``error`` when given."""

    provider_name, model = "memfleet.test", "test-double"

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error or ProviderUnavailable("the model did not answer")

    async def summarize(self, request: SummaryRequest) -> Answer[SummaryAnswer]:
        raise self.error


class GatedSummarizer:
    """Summarises like the given one, but only once the gate opens (a stalled worker)."""

    provider_name, model = "memfleet.test", "test-double"

    def __init__(self, inner: Any, gate: asyncio.Event, entered: asyncio.Event) -> None:
        self.inner, self.gate, self.entered = inner, gate, entered

    async def summarize(self, request: SummaryRequest) -> Answer[SummaryAnswer]:
        self.entered.set()
        await self.gate.wait()
        answer: Answer[SummaryAnswer] = await self.inner.summarize(request)
        return answer


async def _hand_over_and_run(
    settings: Settings, redis: Redis, providers: Providers, said: list[dict[str, str]], job: str
) -> str:
    """Hand session s1 of user u1 over and run its job in-process; return the outcome."""
    await schedule_memory_persistence(redis, "s1", "u1", said, queue_name=settings.queue_name)
    async with job_deps(settings, redis, providers) as deps:
        return str((await run_job(deps, "s1", job))["outcome"])


async def _cursor(db: asyncpg.Connection, session_id: str) -> asyncpg.Record:
    return await db.fetchrow(
        "SELECT summary, summary_updated_at, user_turns_since_summary, version"
        " FROM session_cursor WHERE session_id = $1", session_id)


async def test_summary_commits_with_its_slice(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    settings = settings.model_copy(update={"summary_every_user_turns": 2})
    said = [user_msg("I live in Oslo."), user_msg("I use Rust.")]
    assert await _hand_over_and_run(settings, redis, build_providers(settings), said,
                                    "j1") == "committed"
    cursor = await _cursor(db, "s1")
    assert cursor["summary"] and cursor["summary_updated_at"] is not None
    assert cursor["user_turns_since_summary"] == 0
    # One commit wrote both: the run's audit row carries the summary call's
    # stage timing, and no second statement was needed after it.
    [run] = await runs(db, "s1")
    assert run["outcome"] == "committed" and "summary" in run["timings_ms"]


async def test_a_failing_summarizer_keeps_the_facts_and_asks_again_next_run(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    settings = settings.model_copy(update={"summary_every_user_turns": 1})
    base = build_providers(settings)
    said = [user_msg("I live in Oslo.")]
    broken = replace(base, summarizer=BrokenSummarizer())
    assert await _hand_over_and_run(settings, redis, broken, said, "j1") == "committed"
    assert await active_texts(db, "u1") == ["Lives in Oslo"]
    cursor = await _cursor(db, "s1")
    assert cursor["summary"] is None and cursor["user_turns_since_summary"] == 1

    said += [user_msg("I use Rust.")]
    assert await _hand_over_and_run(settings, redis, base, said, "j2") == "committed"
    cursor = await _cursor(db, "s1")
    assert cursor["summary"] and cursor["user_turns_since_summary"] == 0


class RecordingSummarizer:
    """Summarises like the given one and keeps every request it was asked."""

    provider_name, model = "memfleet.test", "test-double"

    def __init__(self, inner: Any) -> None:
        self.inner, self.requests = inner, list[SummaryRequest]()

    async def summarize(self, request: SummaryRequest) -> Answer[SummaryAnswer]:
        self.requests.append(request)
        answer: Answer[SummaryAnswer] = await self.inner.summarize(request)
        return answer


async def test_a_refresh_reads_every_turn_since_the_last_one_not_only_its_slice(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # A fleet that keeps up commits a slice per turn; the refresh after the third must
    # still read the first two, or "the Danish one" loses what it answers.
    settings = settings.model_copy(update={"summary_every_user_turns": 3})
    base = build_providers(settings)
    recording = RecordingSummarizer(base.summarizer)
    providers = replace(base, summarizer=recording)
    said: list[dict[str, str]] = []
    for n, line in enumerate(["Which is better, the Danish offer or the Dutch one?",
                              "Tell me more about both.", "The Danish one, I think."]):
        said += [user_msg(line), {"role": "assistant", "content": f"Reply {n}."}]
        assert await _hand_over_and_run(settings, redis, providers, said, f"j{n}") \
            == "committed"
    [request] = recording.requests
    read = [m.content for m in request.messages]
    assert read[0] == "Which is better, the Danish offer or the Dutch one?"
    assert read.count("Tell me more about both.") == 1
    assert read[-2:] == ["The Danish one, I think.", "Reply 2."]
    cursor = await _cursor(db, "s1")
    assert cursor["summary"] and cursor["user_turns_since_summary"] == 0


async def test_a_summarizer_with_bad_settings_fails_the_job_instead_of_being_ignored(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    # A wrong model name will not heal: the run ends, on the record, and writes nothing.
    settings = settings.model_copy(update={"summary_every_user_turns": 1})
    broken = replace(build_providers(settings), summarizer=BrokenSummarizer(
        ConfigurationError("the LLM endpoint does not know this model (HTTP 404)")))
    said = [user_msg("I live in Oslo.")]
    assert await _hand_over_and_run(settings, redis, broken, said, "j1") == "failed"
    assert await active_texts(db, "u1") == []
    (run,) = await db.fetch("SELECT outcome, error FROM memory_run")
    assert run["outcome"] == "failed" and "ConfigurationError" in run["error"]


async def test_a_fenced_run_writes_no_summary(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    settings = settings.model_copy(update={"summary_every_user_turns": 1})
    base = build_providers(settings)
    said = [user_msg("I live in Oslo.")]
    await schedule_memory_persistence(redis, "s1", "u1", said, queue_name=settings.queue_name)
    gate, entered = asyncio.Event(), asyncio.Event()
    stalled = replace(base, summarizer=GatedSummarizer(base.summarizer, gate, entered))
    async with job_deps(settings, redis, stalled) as slow, job_deps(settings, redis, base) as fast:
        first = asyncio.create_task(run_job(slow, "s1", "j-stalled"))
        await entered.wait()
        await redis.delete(lock_key("u1", "s1"))  # its lock expired while it was frozen
        assert (await run_job(fast, "s1", "j-fresh"))["outcome"] == "committed"
        written = (await _cursor(db, "s1"))["summary_updated_at"]
        gate.set()
        assert (await first)["outcome"] == "fenced"
    cursor = await _cursor(db, "s1")
    assert cursor["version"] == 1 and cursor["summary_updated_at"] == written


class GateOpeningConsolidator:
    """Consolidates like the given one, after noting whether the summary was already
    being asked, and then lets the gated summarizer answer."""

    provider_name, model = "memfleet.test", "test-double"

    def __init__(self, inner: Any, gate: asyncio.Event, entered: asyncio.Event) -> None:
        self.inner, self.gate, self.entered = inner, gate, entered
        self.summary_was_asked: bool | None = None

    async def consolidate(self, request: Any) -> Any:
        self.summary_was_asked = self.entered.is_set()
        self.gate.set()
        return await self.inner.consolidate(request)


async def test_the_summary_is_asked_beside_the_decisions_not_in_line_with_them(
    settings: Settings, redis: Redis, db: asyncpg.Connection
) -> None:
    """The summary only answers once consolidation has run: a pipeline that waited
    for it before deciding would never get there (the job would time out)."""
    settings = settings.model_copy(update={"summary_every_user_turns": 1})
    base = build_providers(settings)
    gate, entered = asyncio.Event(), asyncio.Event()
    consolidator = GateOpeningConsolidator(base.consolidator, gate, entered)
    providers = replace(base, summarizer=GatedSummarizer(base.summarizer, gate, entered),
                        consolidator=consolidator)
    # Two facts: the second has the first as a neighbour, so consolidation is asked.
    said = [user_msg("I live in Oslo."), user_msg("I use Zig.")]
    await schedule_memory_persistence(redis, "s1", "u1", said, queue_name=settings.queue_name)
    async with job_deps(settings, redis, providers) as deps:
        result = await asyncio.wait_for(run_job(deps, "s1", "j1"), 20)
    assert result["outcome"] == "committed"
    assert consolidator.summary_was_asked is True
    cursor = await _cursor(db, "s1")
    assert cursor["summary"] and cursor["user_turns_since_summary"] == 0, "stored with the slice"
    assert await active_texts(db, "u1") == ["Lives in Oslo", "Uses Zig"]

