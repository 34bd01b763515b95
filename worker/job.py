"""The ARQ job: claim the hand-over, take the session lock, run the pipeline.

Outcomes, each with an audit row in ``memory_run``:

- committed / empty / fenced: see worker.pipeline;
- deferred: the session lock is busy; a follow-up job is queued, no try is spent;
- invalid: the job or its payload cannot be read; recorded, never retried;
- retry: a transient failure (PostgreSQL, provider, contention); ARQ runs the job
  again after a backoff, with the cursor untouched;
- failed: the same, on the last allowed try; the next hand-over starts over;
- skipped: on the last allowed try, when the model kept breaking the answer
  schema for this slice: the cursor moves past it with no fact written, and the
  audit row names the slice (first and last hash) and the error.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import structlog
from arq import Retry
from opentelemetry import propagate, trace

from worker import queue
from worker.config import Settings
from worker.errors import (
    ConfigurationError,
    InvalidJob,
    MemfleetError,
    ProviderAnswerInvalid,
    ProviderError,
    StoreError,
)
from worker.payload import Limits, decode_handover
from worker.pipeline import ConsolidationContention, RunContext, run_once, skip_slice
from worker.providers.base import Providers
from worker.stages.lock import SessionLock
from worker.store.postgres import PgMemoryStore
from worker.store.types import RunRecord
from worker.telemetry import StageClock, Telemetry, hashed_id

log = structlog.get_logger("memfleet.job")

_TRANSIENT = (StoreError, ProviderError, ConsolidationContention)


@dataclass(frozen=True, slots=True)
class Deps:
    """Built once in on_startup and shared by every job of the process."""

    settings: Settings
    redis: Any
    store: PgMemoryStore
    providers: Providers
    limits: Limits
    telemetry: Telemetry


def backoff_s(job_try: int) -> float:
    return float(min(300, 2 ** min(job_try, 9)))


async def persist_session_memory(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    deps: Deps = ctx["deps"]
    metrics = deps.telemetry.metrics
    metrics.running_jobs += 1
    try:
        result = await _run(deps, ctx, args, kwargs)
    except Retry:
        metrics.jobs.add(1, {"outcome": "retry"})
        raise
    except asyncio.CancelledError:
        # ARQ's job timeout cancels the job: count it, or it vanishes from the dashboard.
        metrics.jobs.add(1, {"outcome": "cancelled"})
        raise
    finally:
        metrics.running_jobs -= 1
    metrics.jobs.add(1, {"outcome": str(result.get("outcome"))})
    return result


async def _run(
    deps: Deps, ctx: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    job_id: str = ctx["job_id"]
    job_try: int = ctx.get("job_try", 1)
    started_at = datetime.now(UTC)
    clock = StageClock(deps.telemetry.tracer, deps.telemetry.metrics)
    session_id = kwargs.get("session_id")

    with clock.span(
        f"process {deps.settings.queue_name}", trace.SpanKind.CONSUMER,
        {
            "messaging.system": "arq", "messaging.operation.name": "process",
            "messaging.operation.type": "process",
            "messaging.destination.name": deps.settings.queue_name,
            "messaging.message.id": job_id, "memfleet.job.try": job_try,
        },
    ) as span:
        if args or set(kwargs) != {"session_id"} or not isinstance(session_id, str):
            return await _record(deps, RunRecord(
                job_id=job_id, job_try=job_try, session_id=None, user_id=None,
                outcome="invalid", started_at=started_at,
                error="the job's arguments are not {session_id: str}",
            ))
        # Not recorded (no exporter, or sampled out): skip the hashing and parsing.
        recording = span.is_recording()
        if recording:
            span.set_attribute("memfleet.session", hashed_id(session_id))
        base = RunRecord(job_id=job_id, job_try=job_try, session_id=session_id, user_id=None,
                         outcome="invalid", started_at=started_at)
        lock = SessionLock(deps.redis, session_id, int(deps.settings.lock_ttl_s * 1000))
        with clock.stage("lock") as lock_span:
            # The claim and the lock go in one round trip (worker.queue.claim).
            claimed = await queue.claim(deps.redis, session_id, job_id, lock=lock.request)
            if claimed.locked:
                lock.held()
            lock_span.set_attribute("memfleet.lock.acquired", claimed.locked)
        if claimed.payload is not None and not claimed.locked:
            deps.telemetry.metrics.lock_contention.add(1)
            # Busy is not a failure: hand the session to a job that runs later.
            await queue.enqueue(deps.redis, session_id, payload=None,
                                queue_name=deps.settings.queue_name,
                                defer_ms=int(deps.settings.busy_defer_s * 1000))
            span.set_attribute("memfleet.outcome", "deferred")
            return {"outcome": "deferred"}
        try:
            handover = decode_handover(claimed.payload, deps.limits)
        except InvalidJob as exc:
            if claimed.locked:
                await lock.release()
            return await _record(deps, _ended(base, "invalid", str(exc)))
        if recording:
            _link_to_handover(span, handover.trace)
            span.set_attribute("memfleet.user", hashed_id(handover.user_id))

        run_ctx = RunContext(deps.settings, deps.store, deps.providers, clock, job_id, job_try,
                             started_at)
        try:
            result = await run_once(run_ctx, handover)
        except InvalidJob as exc:
            return await _record(deps, _ended(base, "invalid", str(exc), handover.user_id))
        except ConfigurationError as exc:
            # A revoked key or a wrong model name: retrying will not help until an
            # operator fixes it; the cursor is untouched, so nothing is lost.
            log.error("job failed on configuration", error=_describe(exc))
            return await _record(deps, _ended(base, "failed", _describe(exc), handover.user_id))
        except _TRANSIENT as exc:
            final = job_try >= deps.settings.max_tries
            log.warning("job did not complete", job_try=job_try, final=final,
                        error=type(exc).__name__)
            if final and isinstance(exc, ProviderAnswerInvalid):
                # The model keeps breaking the contract on this slice: skip it, on the
                # record, rather than block the session forever (docs/architecture.md).
                result = await skip_slice(run_ctx, handover, _describe(exc))
            else:
                await _record(deps, _ended(base, "failed" if final else "retry",
                                           _describe(exc), handover.user_id))
                if final:
                    return {"outcome": "failed", "error": type(exc).__name__}
                raise Retry(defer=backoff_s(job_try)) from exc
        finally:
            await lock.release()
        if result.remaining:
            # A long backlog goes in bounded chunks, one job each.
            await queue.enqueue(deps.redis, session_id, payload=None,
                                queue_name=deps.settings.queue_name)
        span.set_attribute("memfleet.outcome", result.outcome)
        log.info("job finished", job_id=job_id, job_try=job_try, outcome=result.outcome,
                 added=result.added, updated=result.updated, deleted=result.deleted,
                 timings_ms=clock.timings_ms)
        return result.as_dict()


def _link_to_handover(span: trace.Span, carrier: dict[str, str]) -> None:
    """Link the job to the hand-over's PRODUCER span, carried in the payload."""
    producer = trace.get_current_span(propagate.extract(carrier)).get_span_context()
    if producer.is_valid:
        span.add_link(producer, {"messaging.operation.type": "send"})


def _ended(base: RunRecord, outcome: str, error: str, user_id: str | None = None) -> RunRecord:
    return replace(base, outcome=outcome, error=error, user_id=user_id)


def _describe(exc: BaseException) -> str:
    # Our own errors never carry user content; others are named by type only.
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, MemfleetError) else type(exc).__name__


async def _record(deps: Deps, run: RunRecord) -> dict[str, Any]:
    try:
        await deps.store.record_run(run)
    except StoreError as exc:
        # The audit row is best effort when PostgreSQL itself is what failed.
        log.warning("audit row not written", outcome=run.outcome, error=str(exc)[:200])
    log.info("job recorded", outcome=run.outcome, job_id=run.job_id)
    return {"outcome": run.outcome, "error": run.error}

