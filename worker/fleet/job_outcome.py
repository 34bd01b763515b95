"""The job's outcome (worker.fleet.job): how a run's ending, or its error, becomes the
job's ending, what is recorded of it, and what it asks of Redis.

- ``JobEnd``: how one job ended, as the job returns it (ARQ keeps ``as_dict``);
- ``run_pipeline``: the pipeline's run, and each error it raises turned into an
  outcome (worker.protection.retry_policy decides retry, skip, wait out or fail):
  deferred while the model budget is spent or the lock was lost, the breaker tripped
  when the model endpoint failed, the session kept pending before a retry;
- ``record`` and ``nothing_new``: the audit row (``memory_run``) of an ending the
  pipeline did not record itself; best effort when PostgreSQL is what failed;
- ``defer``: the session put off to a later job (busy, the breaker open, an outage);
- ``commit_note``: the commit event's fields for the lock's release.

The outcomes themselves are listed in worker.fleet.job's docstring.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import structlog
from arq import Retry
from opentelemetry import trace

from worker.errors import (
    InvalidJob,
    LockLost,
    MemfleetError,
    ModelBudgetBusy,
    ProviderUnavailable,
    StoreError,
)
from worker.outcomes import Outcome
from worker.pipeline.cursor import NOTHING_SETTLED, Settlement
from worker.pipeline.run import RunContext, RunResult, run_once, skip_slice
from worker.protection import breaker
from worker.protection.breaker import BreakerKeys
from worker.protection.retry_policy import Next, after_error, backoff_s
from worker.protocol import queue
from worker.protocol.events import CommitNote
from worker.protocol.keys import SessionRef
from worker.protocol.payload import Snapshot
from worker.store.types import RunRecord

if TYPE_CHECKING:  # worker.fleet.job calls this module: no import cycle at run time
    from worker.fleet.job import Deps

log = structlog.get_logger("memfleet.job")


@dataclass(frozen=True, slots=True)
class JobEnd:
    """How one job ended; ``as_dict`` is the result ARQ keeps (plain JSON)."""

    outcome: Outcome
    error: str | None = None  # why the run did not complete (never user content)
    reason: str | None = None  # why a job was put off with no error: busy, llm_breaker, outage
    run: RunResult | None = None  # the pipeline's result, when the pipeline ended the run
    sessions: int | None = None  # adopted: the older release's sessions taken over

    @classmethod
    def of(cls, run: RunResult) -> JobEnd:
        return cls(run.outcome, run=run)

    def as_dict(self) -> dict[str, Any]:
        if self.run is not None:
            return self.run.as_dict()
        extra = {"error": self.error, "reason": self.reason, "sessions": self.sessions}
        return {"outcome": self.outcome, **{k: v for k, v in extra.items() if v is not None}}


def commit_note(deps: Deps, session: SessionRef, end: JobEnd | None) -> CommitNote:
    """The commit event's fields (worker.protocol.events), published only when the run
    settled (with no ending, it raised: nothing settled)."""
    tag = deps.telemetry.hashed_id(session.key)
    if end is None:
        return CommitNote(tag, "none")
    run = end.run
    if run is None:
        return CommitNote(tag, end.outcome)
    return CommitNote(tag, end.outcome, run.added, run.updated, run.deleted)


async def run_pipeline(
    deps: Deps, ctx: RunContext, session: SessionRef, snapshots: list[Snapshot], base: RunRecord
) -> tuple[JobEnd, Settlement]:
    """The pipeline's run over ``snapshots``, or the outcome of the error it raised (the
    retry policy's decision); raises ARQ's ``Retry`` when the job is to run again."""
    try:
        result = await run_once(ctx, snapshots)
        return JobEnd.of(result), result.settlement
    except InvalidJob as exc:
        return await record(deps, base, Outcome.INVALID, str(exc)), NOTHING_SETTLED
    except ModelBudgetBusy as exc:
        # The fleet is as busy as its model budget allows: a later job takes the
        # session over; no try is spent and the breaker stays closed.
        await defer(deps, session)
        return await record(deps, base, Outcome.DEFERRED, _describe(exc)), NOTHING_SETTLED
    except LockLost as exc:
        # Another job holds the session now, or Redis forgot the lock: either way a
        # later job takes over (the cursor fence keeps the slice from counting twice).
        await defer(deps, session)
        return await record(deps, base, Outcome.DEFERRED, _describe(exc)), NOTHING_SETTLED
    except MemfleetError as exc:
        if isinstance(exc, ProviderUnavailable):
            await _trip_breaker(deps)
        decision = after_error(exc, ctx.job_try, deps.settings.max_tries)
        log.warning("job did not complete", job_try=ctx.job_try, next=decision.value,
                    error=type(exc).__name__)
        if decision is Next.SKIP:
            skipped = await skip_slice(ctx, snapshots, _describe(exc))
            return JobEnd.of(skipped), skipped.settlement
        if decision is Next.WAIT_OUT:
            await defer(deps, session, int(deps.settings.outage_wait_s * 1000))
            await record(deps, base, Outcome.DEFERRED, _describe(exc))
            return JobEnd(Outcome.DEFERRED, reason="outage"), NOTHING_SETTLED
        recorded = await record(deps, base, decision.outcome, _describe(exc))
        if decision is Next.RETRY:
            await _stay_pending(deps, session, int(backoff_s(ctx.job_try) * 1000))
            raise Retry(defer=backoff_s(ctx.job_try)) from exc
        return recorded, NOTHING_SETTLED
    except Exception as exc:
        await record(deps, base, Outcome.ERROR, type(exc).__name__)
        raise


async def _stay_pending(deps: Deps, session: SessionRef, due_in_ms: int) -> None:
    """Before a retry: ARQ requeues this job only after it ends, and a worker that
    dies in between would leave the session to ARQ's in-progress expiry (job
    timeout + 10 s). Pending, the recovery pass queues it if the retry never runs."""
    try:
        await queue.keep_pending(deps.redis, session, deps.settings.queue_name, due_in_ms)
    except Exception as exc:  # noqa: BLE001 - Redis down: the retry itself stands
        log.warning("session not marked pending", error=type(exc).__name__)


async def defer(deps: Deps, session: SessionRef, at_least_ms: int = 0) -> None:
    """Hand the session to a later job, due after MEMFLEET_BUSY_DEFER_S or
    ``at_least_ms``, whichever is longer."""
    await queue.enqueue(deps.redis, session, payload=None,
                        queue_name=deps.settings.queue_name,
                        defer_ms=max(int(deps.settings.busy_defer_s * 1000), at_least_ms))


async def _trip_breaker(deps: Deps) -> None:
    """The model endpoint failed past its retries: pause every replica's model calls."""
    settings = deps.settings
    try:
        open_ms = await breaker.trip(deps.redis, BreakerKeys.of(settings.queue_name),
                                     settings.llm_breaker_open_s, settings.llm_breaker_max_s)
    except Exception as exc:  # noqa: BLE001 - the breaker only saves calls; the retry stands
        log.warning("circuit breaker not tripped", error=type(exc).__name__)
        return
    deps.telemetry.metrics.breaker_trips.add(1)
    log.warning("model endpoint failing: circuit breaker open", open_ms=open_ms)


def _describe(exc: BaseException) -> str:
    # Our own errors never carry user content; others are named by type only.
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, MemfleetError) else type(exc).__name__


async def nothing_new(deps: Deps, base: RunRecord, span: trace.Span) -> JobEnd:
    """The audit row of a run that found every list of its session finished."""
    run_id = None
    try:
        run_id = await deps.store.record_run(replace(base, outcome=Outcome.EMPTY))
    except StoreError as exc:
        log.warning("audit row not written", outcome=Outcome.EMPTY, error=str(exc)[:200])
    span.set_attribute("memfleet.outcome", Outcome.EMPTY)
    return JobEnd.of(RunResult(Outcome.EMPTY, run_id))


async def record(deps: Deps, base: RunRecord, outcome: Outcome, error: str) -> JobEnd:
    """The audit row of an ending the pipeline did not record, and that ending."""
    run = replace(base, outcome=outcome, error=error)
    try:
        await deps.store.record_run(run)
    except StoreError as exc:
        # The audit row is best effort when PostgreSQL itself is what failed.
        log.warning("audit row not written", outcome=outcome, error=str(exc)[:200])
    log.info("job recorded", outcome=outcome, job_id=run.job_id)
    return JobEnd(outcome, error=error)
