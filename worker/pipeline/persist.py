"""Persist stage: every write of a run in ONE PostgreSQL transaction.

The store's commit does, atomically: the cursor compare-and-set (the fence),
the user-version compare-and-set, the new facts, the supersessions, the
refreshed summary and the run's audit row. A lost compare-and-set writes
nothing: CursorFenced (another run did this slice) ends the run with an audit
row of its own; UserVersionConflict goes back to the pipeline, which
consolidates again. A user who turned memory off during the run has the slice
passed over as ``opted_out`` (MemoryOptedOut); a user erased after the run's
hand-over was made gets nothing written at all (UserErased). This module also
builds every audit row of a run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from worker.conversation import Handover
from worker.errors import CursorFenced, MemoryOptedOut, UserErased, UserVersionConflict
from worker.outcomes import Outcome
from worker.pipeline.consolidate import Decided
from worker.pipeline.context import RunContext
from worker.pipeline.cursor import NOTHING_SETTLED, Position, Settlement
from worker.pipeline.notes import NO_NOTES, NotePlan
from worker.pipeline.plan import Plan
from worker.store.types import RunCommit, RunRecord

_DB = {"db.system.name": "postgresql", "db.operation.name": "COMMIT"}
_NO_WRITES = Decided(Plan((), 0, 0, 0, 0), user_version=None, rejected=0)


@dataclass(frozen=True, slots=True)
class RunResult:
    outcome: Outcome  # committed | empty | fenced | skipped | opted_out | erased
    run_id: int | None
    remaining: int = 0  # messages after this run's slice, left for a follow-up job
    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    rejected: int = 0
    settlement: Settlement = NOTHING_SETTLED
    held: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome, "run_id": self.run_id, "remaining": self.remaining,
            "follow_up": self.settlement.follow_up,
            "added": self.added, "updated": self.updated, "deleted": self.deleted,
            "unchanged": self.unchanged, "rejected": self.rejected, "held": self.held,
        }


def audit_row(
    ctx: RunContext, position: Position, outcome: Outcome, **columns: Any
) -> RunRecord:
    """The run's audit row as it stands now: ids, outcome, tokens and stage timings."""
    # The run row's handover_seq is its fence number (not a column): memfleet_insert_run.
    handover, seq = position.handover, position.snapshot.fence_seq
    clock = ctx.clock
    return RunRecord(
        job_id=ctx.job_id, job_try=ctx.job_try, session_id=handover.session_id,
        user_id=handover.user_id, outcome=outcome, started_at=ctx.started_at,
        handover_seq=seq,
        input_tokens=clock.input_tokens, output_tokens=clock.output_tokens,
        timings_ms=dict(clock.timings_ms), **columns,
    )


async def record_empty(ctx: RunContext, position: Position) -> RunResult:
    """Nothing new since the cursor in any list: an audit row, no commit."""
    run_id = await ctx.store.record_run(audit_row(ctx, position, Outcome.EMPTY))
    return RunResult(Outcome.EMPTY, run_id, settlement=position.settlement())


async def commit(
    ctx: RunContext, handover: Handover, position: Position, decided: Decided,
    summary: str | None, *, candidates: int, attempt: int, notes: NotePlan = NO_NOTES,
) -> RunResult:
    """Commit the run; raises UserVersionConflict when the user's facts changed meanwhile."""
    plan = decided.plan
    run = position.describe(audit_row(
        ctx, position, Outcome.COMMITTED, candidates=candidates, added=plan.added,
        updated=plan.updated, deleted=plan.deleted, unchanged=plan.unchanged,
        rejected=decided.rejected, consolidation_attempts=attempt, held=plan.held,
        # Why candidates were held as undecided: ids and faults only, never text.
        error=("undecided, held for the user: " + "; ".join(decided.doubts)[:900]
               if decided.doubts else None),
    ))
    with ctx.clock.stage("persist", **_DB) as span:
        try:
            run_id = await _commit(ctx, handover, position, run, decided, summary, notes)
        except MemoryOptedOut:
            span.set_attribute("memfleet.opted_out", True)
            return await opt_out(ctx, handover, position)
        except UserErased as exc:
            return _erased(span, position, exc)
        except UserVersionConflict:
            _refused(ctx, span, "user")
            raise
        except CursorFenced:
            _refused(ctx, span, "cursor")
            fenced = replace(run, outcome=Outcome.FENCED, added=0, updated=0, deleted=0,
                             unchanged=0, timings_ms=dict(ctx.clock.timings_ms))
            return RunResult(Outcome.FENCED, await ctx.store.record_run(fenced))
        counts = (("ADD", plan.added), ("UPDATE", plan.updated), ("DELETE", plan.deleted),
                  ("NONE", plan.unchanged), ("REJECTED", decided.rejected), ("HELD", plan.held))
        for event, count in counts:
            span.set_attribute(f"memfleet.decisions.{event.lower()}", count)
        _record_metrics(ctx, handover, counts)
        _record_notes(ctx, span, notes)
    return RunResult(Outcome.COMMITTED, run_id, position.piece.remaining, plan.added, plan.updated,
                     plan.deleted, plan.unchanged, decided.rejected, position.settlement(),
                     plan.held)


async def skip(ctx: RunContext, handover: Handover, position: Position, reason: str) -> RunResult:
    """Move the cursor past a slice the model keeps answering wrongly about.

    No fact is written; the audit row (outcome ``skipped``) names the slice by
    its first and last hash and says why, so nothing is lost silently and the
    session is not stuck behind one slice forever.
    """
    if position.piece.empty:
        return RunResult(Outcome.EMPTY, None, settlement=position.settlement())
    run = position.describe(audit_row(ctx, position, Outcome.SKIPPED, error=reason))
    return await _pass_over(ctx, handover, position, run)


async def opt_out(ctx: RunContext, handover: Handover, position: Position) -> RunResult:
    """The user turned memory off: move the cursor past the slice, so turning it on
    again does not replay what was said meanwhile. Nothing is extracted; the audit
    row holds no hash of the messages, only how many there were."""
    if position.piece.empty:
        return RunResult(Outcome.EMPTY, None, settlement=position.settlement())
    run = audit_row(ctx, position, Outcome.OPTED_OUT,
                    slice_len=position.piece.end - position.piece.start)
    return await _pass_over(ctx, handover, position, run)


async def _pass_over(
    ctx: RunContext, handover: Handover, position: Position, run: RunRecord
) -> RunResult:
    """Commit the cursor past the slice with ``run`` as its audit row, and no fact."""
    with ctx.clock.stage("persist", **_DB) as span:
        try:
            run_id = await _commit(ctx, handover, position, run, _NO_WRITES, None)
        except MemoryOptedOut:  # a skip, for a user who turned memory off meanwhile
            return await opt_out(ctx, handover, position)
        except UserErased as exc:
            return _erased(span, position, exc)
        except CursorFenced:
            _refused(ctx, span, "cursor")
            fenced = replace(run, outcome=Outcome.FENCED)
            return RunResult(Outcome.FENCED, await ctx.store.record_run(fenced))
    return RunResult(run.outcome, run_id, position.piece.remaining,
                     settlement=position.settlement())


def _erased(span: trace.Span, position: Position, exc: UserErased) -> RunResult:
    """Nothing of an erased user's run is written, not even its audit row. A list
    handed over after the erase but read before it (Snapshot.fence_seq) is still in
    Redis: it is settled whole, so the session goes on with what was said after the
    erase. One the erase deleted is not settled: that would queue a job for it."""
    span.set_attribute("memfleet.conflict", "erased")
    snapshot = position.snapshot
    if exc.erased_seq >= snapshot.seq:
        return RunResult(Outcome.ERASED, None)
    return RunResult(Outcome.ERASED, None, settlement=Settlement(
        snapshot.seq, snapshot.seq if snapshot.latest else 0, follow_up=position.later > 0))


async def _commit(
    ctx: RunContext, handover: Handover, position: Position, run: RunRecord, decided: Decided,
    summary: str | None, notes: NotePlan = NO_NOTES,
) -> int:
    return await ctx.store.commit_run(RunCommit(
        cursor=position.advance(handover, summary), user_version=decided.user_version,
        writes=decided.plan.writes, observed_at=handover.handed_over_at,
        embedding_model=decided.embedding_model or ctx.providers.embedder.model,
        source_session_id=handover.session_id,
        run=run, notes=notes.writes,
        persons=decided.persons,
    ))


def _record_notes(ctx: RunContext, span: trace.Span, notes: NotePlan) -> None:
    """The notes the commit wrote, by event (docs/notes.md): counts, never text."""
    if notes is NO_NOTES:
        return
    counts = (("ADD", notes.added), ("UPDATE", notes.updated), ("NONE", notes.unchanged))
    for event, count in counts:
        span.set_attribute(f"memfleet.notes.{event.lower()}", count)
        if count and ctx.clock.metrics is not None:
            ctx.clock.metrics.notes.add(count, {"event": event})


def _refused(ctx: RunContext, span: trace.Span, fence: str) -> None:
    span.set_attribute("memfleet.conflict", "user_version" if fence == "user" else "cursor")
    if ctx.clock.metrics is not None:
        ctx.clock.metrics.refused_cas.add(1, {"fence": fence})


def _record_metrics(
    ctx: RunContext, handover: Handover, counts: tuple[tuple[str, int], ...]
) -> None:
    metrics = ctx.clock.metrics
    if metrics is None:
        return
    for event, count in counts:
        if count:
            metrics.decisions.add(count, {"event": event})
    lag = (datetime.now(UTC) - handover.handed_over_at).total_seconds()
    metrics.lag.record(max(lag, 0.0))
