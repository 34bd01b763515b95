"""One run over a session's hand-over: cursor, extract, embed, consolidate, persist, summary.

Called by the job with the session lock held. Never holds a transaction open
across a provider call: reads are single statements, and all writes of the
run go in one short transaction at the end.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import structlog
from opentelemetry import trace

from worker.config import Settings
from worker.errors import CursorFenced, InvalidJob, ProviderAnswerInvalid, UserVersionConflict
from worker.payload import Handover, message_hash
from worker.providers.base import Providers, Usage
from worker.stages import consolidate, extract
from worker.stages.cursor import CursorCase, Slice, locate, take_slice, window_hash
from worker.stages.extract import CandidateFact
from worker.store.postgres import PgMemoryStore
from worker.store.types import CursorAdvance, CursorState, RunCommit, RunRecord, Vector
from worker.telemetry import StageClock
from worker.vectors import empty
from worker.wire import SummaryRequest, WireMessage

log = structlog.get_logger("memfleet.pipeline")


class ConsolidationContention(Exception):
    """Other jobs of the same user kept committing first; retry the job later."""


@dataclass(frozen=True, slots=True)
class RunResult:
    outcome: str  # committed | empty | fenced | skipped
    run_id: int | None
    remaining: int = 0
    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    rejected: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome, "run_id": self.run_id, "remaining": self.remaining,
            "added": self.added, "updated": self.updated, "deleted": self.deleted,
            "unchanged": self.unchanged, "rejected": self.rejected,
        }


@dataclass(frozen=True, slots=True)
class RunContext:
    settings: Settings
    store: PgMemoryStore
    providers: Providers
    clock: StageClock
    job_id: str
    job_try: int
    started_at: datetime


def _chat_model(settings: Settings, pass_model: str) -> tuple[str, str]:
    """(gen_ai.provider.name, gen_ai.request.model) of a chat pass."""
    if settings.llm_provider == "openai":
        return "openai", pass_model
    return "memfleet.rules", "rules-v1"


def _summary_due(
    settings: Settings, cursor: CursorState | None, case: CursorCase, user_turns: int
) -> bool:
    if case is CursorCase.NOT_FOUND:
        return True
    before = cursor.user_turns_since_summary if cursor else 0
    return before + user_turns >= settings.summary_every_user_turns


@dataclass(frozen=True, slots=True)
class _Position:
    hashes: list[str]
    cursor: CursorState | None
    case: CursorCase
    piece: Slice

    def advance(
        self, handover: Handover, user_turns: int, summary: str | None = None
    ) -> CursorAdvance:
        end = self.piece.end
        return CursorAdvance(
            session_id=handover.session_id, user_id=handover.user_id,
            expected_version=self.cursor.version if self.cursor else 0,
            last_hash=self.hashes[end - 1], window_hash=window_hash(self.hashes, end - 1),
            position=end - 1, processed=end - self.piece.start, user_turns=user_turns,
            summary=summary,
        )

    def describe(self, run: RunRecord) -> RunRecord:
        """The audit row's slice columns."""
        return replace(run, slice_first_hash=self.hashes[self.piece.start],
                       slice_last_hash=self.hashes[self.piece.end - 1],
                       slice_len=self.piece.end - self.piece.start)


def _base_run(ctx: RunContext, handover: Handover) -> RunRecord:
    return RunRecord(
        job_id=ctx.job_id, job_try=ctx.job_try, session_id=handover.session_id,
        user_id=handover.user_id, outcome="committed", started_at=ctx.started_at,
    )


async def _position(ctx: RunContext, handover: Handover) -> _Position:
    with ctx.clock.stage("cursor") as span:
        hashes = [message_hash(m) for m in handover.messages]
        cursor = await ctx.store.load_cursor(handover.session_id)
        if cursor is not None and cursor.user_id != handover.user_id:
            raise InvalidJob("the session belongs to another user")
        located = locate(hashes, cursor)
        piece = take_slice(len(hashes), located.start, ctx.settings.max_slice_messages)
        span.set_attribute("memfleet.cursor.case", located.case.value)
        span.set_attribute("memfleet.slice.length", piece.end - piece.start)
    return _Position(hashes, cursor, located.case, piece)


async def skip_slice(ctx: RunContext, handover: Handover, reason: str) -> RunResult:
    """Move the cursor past a slice the model keeps answering wrongly about.

    No fact is written; the audit row (outcome ``skipped``) names the slice by
    its first and last hash and says why, so nothing is lost silently and the
    session is not stuck behind one slice forever.
    """
    position = await _position(ctx, handover)
    if position.piece.empty:
        return RunResult("empty", None)
    run = position.describe(replace(_base_run(ctx, handover), outcome="skipped", error=reason,
                                    timings_ms=dict(ctx.clock.timings_ms)))
    user_turns = sum(1 for m in handover.messages[position.piece.start : position.piece.end]
                     if m.role == "user")
    with ctx.clock.stage("persist", **{"db.system.name": "postgresql",
                                       "db.operation.name": "COMMIT"}):
        try:
            run_id = await ctx.store.commit_run(RunCommit(
                cursor=position.advance(handover, user_turns), user_version=None, writes=(),
                observed_at=handover.handed_over_at,
                embedding_model=ctx.providers.embedder.model,
                source_session_id=handover.session_id, run=run,
            ))
        except CursorFenced:
            return RunResult("fenced", await ctx.store.record_run(replace(run, outcome="fenced")))
    return RunResult("skipped", run_id, position.piece.remaining)


async def run_once(ctx: RunContext, handover: Handover) -> RunResult:
    settings, store, providers, clock = ctx.settings, ctx.store, ctx.providers, ctx.clock
    messages = handover.messages
    base_run = _base_run(ctx, handover)
    position = await _position(ctx, handover)
    cursor, piece = position.cursor, position.piece
    if piece.empty:
        run_id = await store.record_run(
            replace(base_run, outcome="empty", timings_ms=dict(clock.timings_ms))
        )
        return RunResult("empty", run_id)

    new_messages = messages[piece.start : piece.end]
    user_turns = sum(1 for m in new_messages if m.role == "user")
    usage = Usage()

    with clock.stage("extract") as span:
        request = extract.build_request(
            messages, piece.start, piece.end, settings.context_messages,
            cursor.summary if cursor else None, handover.handed_over_at,
        )
        with clock.provider_call("chat", *_chat_model(settings, settings.extract_model)) as done:
            extracted = await providers.extractor.extract(request)
            done(extracted.model, extracted.usage.input_tokens, extracted.usage.output_tokens)
        usage += extracted.usage
        candidates = extract.candidates_from(extracted.value)
        span.set_attribute("memfleet.candidates", len(candidates))
        if settings.capture_content:
            for candidate in candidates:
                span.add_event("memfleet.candidate", {"memfleet.fact.text": candidate.text})

    embeddings: Vector = empty(providers.embedder.dim)
    if candidates:
        embed_provider = "openai" if settings.embed_provider == "openai" else "memfleet.hashing"
        with clock.stage("embed"), clock.provider_call(
            "embeddings", embed_provider, providers.embedder.model
        ) as done:
            embedded = await providers.embedder.embed([c.text for c in candidates])
            done(embedded.model, embedded.usage.input_tokens, embedded.usage.output_tokens)
            usage += embedded.usage
            if embedded.value.shape != (len(candidates), providers.embedder.dim):
                raise ProviderAnswerInvalid("the embeddings do not match the request")
            # One float32 matrix from here on: similarity, the neighbour query and
            # the inserts all read it without converting again.
            embeddings = embedded.value

    # Before consolidation, so a consolidation re-run (another job of the user
    # committed first) does not ask for it twice; stored by the persist
    # transaction, with the slice it summarises.
    summary = await _refresh_summary(ctx, handover, cursor, position.case, user_turns,
                                     new_messages)
    usage += summary.usage
    advance = position.advance(handover, user_turns, summary.text)
    observed = extract.observed_label(handover.handed_over_at)

    for attempt in range(1, settings.consolidation_attempts + 1):
        with clock.stage("consolidate", **{"memfleet.attempt": attempt}):
            plan, version, rejected, usage_c = await _consolidate(
                ctx, handover.user_id, candidates, embeddings, observed,
                handover.handed_over_at.date().isoformat(),
            )
        run = replace(
            position.describe(base_run), candidates=len(candidates),
            added=plan.added, updated=plan.updated, deleted=plan.deleted,
            unchanged=plan.unchanged, rejected=rejected, consolidation_attempts=attempt,
            input_tokens=(usage + usage_c).input_tokens,
            output_tokens=(usage + usage_c).output_tokens,
            timings_ms=dict(clock.timings_ms),
        )
        with clock.stage("persist", **{"db.system.name": "postgresql",
                                       "db.operation.name": "COMMIT"}) as span:
            try:
                run_id = await store.commit_run(RunCommit(
                    cursor=advance, user_version=version, writes=plan.writes,
                    observed_at=handover.handed_over_at,
                    embedding_model=providers.embedder.model,
                    source_session_id=handover.session_id, run=run,
                ))
            except UserVersionConflict:
                span.set_attribute("memfleet.conflict", "user_version")
                if clock.metrics is not None:
                    clock.metrics.refused_cas.add(1, {"fence": "user"})
                usage += usage_c
                continue
            except CursorFenced:
                span.set_attribute("memfleet.conflict", "cursor")
                if clock.metrics is not None:
                    clock.metrics.refused_cas.add(1, {"fence": "cursor"})
                fenced = replace(run, outcome="fenced", added=0, updated=0, deleted=0,
                                 unchanged=0, timings_ms=dict(clock.timings_ms))
                return RunResult("fenced", await store.record_run(fenced))
            _record_commit(clock, span, plan, rejected, handover)
        return RunResult(
            "committed", run_id, piece.remaining, plan.added, plan.updated, plan.deleted,
            plan.unchanged, rejected,
        )
    raise ConsolidationContention(
        f"{settings.consolidation_attempts} consolidations lost to other jobs of the user"
    )


def _record_commit(
    clock: StageClock, span: trace.Span, plan: consolidate.Plan, rejected: int,
    handover: Handover,
) -> None:
    counts = (("ADD", plan.added), ("UPDATE", plan.updated), ("DELETE", plan.deleted),
              ("NONE", plan.unchanged), ("REJECTED", rejected))
    for event, count in counts:
        span.set_attribute(f"memfleet.decisions.{event.lower()}", count)
    metrics = clock.metrics
    if metrics is None:
        return
    for event, count in counts:
        if count:
            metrics.decisions.add(count, {"event": event})
    lag = (datetime.now(UTC) - handover.handed_over_at).total_seconds()
    metrics.lag.record(max(lag, 0.0))


async def _consolidate(
    ctx: RunContext,
    user_id: str,
    candidates: Sequence[CandidateFact],
    embeddings: Vector,
    observed: str,
    observed_date: str,
) -> tuple[consolidate.Plan, int | None, int, Usage]:
    if not candidates:
        return consolidate.Plan((), 0, 0, 0, 0), None, 0, Usage()
    k = ctx.settings.neighbors_k
    with ctx.clock.span(
        "SELECT memory_fact", trace.SpanKind.CLIENT,
        {"db.system.name": "postgresql", "db.operation.name": "SELECT",
         "db.collection.name": "memory_fact", "memfleet.neighbors.k": k},
    ):
        version, neighbors = await ctx.store.neighbors(user_id, embeddings, k)
    prepared = consolidate.build_request(
        candidates, embeddings, neighbors, observed, observed_date, k
    )
    with ctx.clock.provider_call(
        "chat", *_chat_model(ctx.settings, ctx.settings.consolidate_model)
    ) as done:
        answer = await ctx.providers.consolidator.consolidate(prepared.request)
        done(answer.model, answer.usage.input_tokens, answer.usage.output_tokens)
    validated = consolidate.validate(prepared, answer.value)
    if validated.rejected:
        log.warning("consolidation decisions rejected", rejected=validated.rejected,
                    reasons=list(validated.reasons))
    plan = consolidate.plan_writes(candidates, embeddings, prepared, validated)
    return plan, version, validated.rejected, answer.usage


@dataclass(frozen=True, slots=True)
class _Summary:
    text: str | None  # None: not due, or the summarizer failed (the old one stays)
    usage: Usage


async def _refresh_summary(
    ctx: RunContext,
    handover: Handover,
    cursor: CursorState | None,
    case: CursorCase,
    user_turns: int,
    new_messages: Sequence[Any],
) -> _Summary:
    if not _summary_due(ctx.settings, cursor, case, user_turns):
        return _Summary(None, Usage())
    with ctx.clock.stage("summary"):
        request = SummaryRequest(
            observed_at=extract.observed_label(handover.handed_over_at),
            previous_summary=cursor.summary if cursor else None,
            messages=tuple(WireMessage(role=m.role, content=m.content) for m in new_messages),
        )
        try:
            model = ctx.settings.summary_model or ctx.settings.extract_model
            with ctx.clock.provider_call("chat", *_chat_model(ctx.settings, model)) as done:
                answer = await ctx.providers.summarizer.summarize(request)
                done(answer.model, answer.usage.input_tokens, answer.usage.output_tokens)
        except Exception as exc:  # noqa: BLE001 - the facts matter; a stale summary is tolerable
            # Its user turns keep counting, so the next run of the session asks again.
            log.warning("summary refresh failed", error=type(exc).__name__)
            return _Summary(None, Usage())
    return _Summary(answer.value.summary, answer.usage)
