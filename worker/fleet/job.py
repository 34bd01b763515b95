"""The ARQ job: take the session, run the pipeline, decide the outcome.

Outcomes, each counted in ``memfleet.jobs`` and, but for ``deferred`` by a
busy lock, recorded with an audit row in ``memory_run``:

- committed / empty / fenced / skipped: see worker.pipeline.run and worker.pipeline.persist;
- deferred: the session lock is busy, or was lost mid-run; a later job takes
  the session over, and no try is spent;
- invalid: the job or its payload cannot be read; never retried;
- retry: a transient error (``MemfleetError.transient``); ARQ runs the job
  again after a backoff, with the cursor untouched;
- failed: a permanent error (refused request, bad settings), at once; or a
  transient one on the last allowed try. The next hand-over starts over;
- deferred (reason ``outage``): PostgreSQL was still down on the last try. A
  server being away is nobody's error: the session gets a fresh job after
  ``outage_wait_s``, as often as it takes, instead of failing;
- skipped, on the last try, when the model kept breaking the answer schema
  for this slice: the cursor moves past it with no fact written; at once when
  the offline provider's answer broke the wire or its CPU work on the slice's
  text went over MEMFLEET_PROVIDER_CPU_BUDGET_S (both would only repeat);
- retry, too: Redis went away mid-job; the job runs again once it is back
  (worker.protocol.arq_worker);
- error: anything memfleet did not expect; recorded, counted, and raised to ARQ
  as UnexpectedJobError (type and place, never the message: ARQ logs it).

The names are worker.outcomes.Outcome; the retry policy is worker.protection.retry_policy.
Inside the job an ending is a typed JobEnd; ARQ keeps it as a plain dict.

This module takes the session (the claim, its lists, the lock's release, the follow-up
job) and runs the pipeline; how the run's ending or error becomes the outcome, its
audit row and a deferral is worker.fleet.job_outcome's.
"""

from __future__ import annotations

import asyncio
import os
import traceback
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import structlog
from arq import Retry
from opentelemetry import propagate, trace

from worker.config import Settings
from worker.errors import InvalidJob, MemfleetError, UnexpectedJobError
from worker.fleet import job_outcome, portrait_job
from worker.fleet.job_outcome import JobEnd as JobEnd  # re-exported: callers import it here
from worker.outcomes import Outcome
from worker.pipeline.cursor import NOTHING_SETTLED
from worker.pipeline.run import RunContext
from worker.protection import breaker
from worker.protection.breaker import BreakerKeys
from worker.protection.retry_policy import GIVEN_UP, backoff_s
from worker.protocol import lock, queue
from worker.protocol.arq_worker import REDIS_DOWN
from worker.protocol.keys import SessionRef
from worker.protocol.payload import Limits, Snapshot, decode_handover
from worker.providers.base import Providers
from worker.store.base import PipelineStore
from worker.store.portraits import PortraitStore
from worker.store.types import RunRecord
from worker.telemetry import StageClock, Telemetry

log = structlog.get_logger("memfleet.job")

FOLLOW_UP_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Deps:
    """Built once in on_startup and shared by every job of the process."""

    settings: Settings
    redis: Any
    store: PipelineStore
    providers: Providers
    limits: Limits
    telemetry: Telemetry
    portraits: PortraitStore | None = None  # the user's portrait (docs/portrait.md)


async def persist_session_memory(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    deps: Deps = ctx["deps"]
    metrics = deps.telemetry.metrics
    job_id = str(ctx.get("job_id", ""))
    metrics.running.add(job_id)
    outcome = Outcome.ERROR
    try:
        end = await _run(deps, ctx, args, kwargs)
        outcome = end.outcome
        return end.as_dict()
    except Retry:
        outcome = Outcome.RETRY
        raise
    except asyncio.CancelledError:
        # ARQ's job timeout cancels the job: count it, or it vanishes from the dashboard.
        outcome = Outcome.CANCELLED
        raise
    except REDIS_DOWN as exc:
        # Redis went away mid-job (past the client's retries): nobody's error. The
        # job runs again once Redis is back, from the cursor PostgreSQL holds.
        outcome = Outcome.RETRY
        log.warning("job did not complete", job_try=ctx.get("job_try", 1), next="retry",
                    error=type(exc).__name__)
        raise Retry(defer=backoff_s(int(ctx.get("job_try", 1)))) from None
    except Exception as exc:
        # By type and place only: the message, and any exception chained to it, can
        # quote user content (a pydantic error cites its input). ARQ logs what the
        # job raises with its message and traceback, so a foreign error is handed
        # over as a stand-in; memfleet's own messages carry no user content.
        where = _innermost_frame(exc)
        log.error("job ended in an unexpected error", error=type(exc).__name__, where=where)
        if isinstance(exc, MemfleetError):
            raise
        raise UnexpectedJobError(
            f"{type(exc).__name__} at {where} (its message is withheld)") from None
    finally:
        metrics.running.discard(job_id)
        metrics.jobs.add(1, {"outcome": outcome})


async def _run(
    deps: Deps, ctx: dict[str, Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> JobEnd:
    job_id: str = ctx["job_id"]
    job_try: int = ctx.get("job_try", 1)
    started_at = datetime.now(UTC)
    clock = StageClock(deps.telemetry.tracer, deps.telemetry.metrics)
    base = RunRecord(job_id=job_id, job_try=job_try, session_id=None, user_id=None,
                     outcome=Outcome.INVALID, started_at=started_at)

    with clock.span(
        f"process {deps.settings.queue_name}", trace.SpanKind.CONSUMER,
        {
            "messaging.system": "arq", "messaging.operation.name": "process",
            "messaging.operation.type": "process",
            "messaging.destination.name": deps.settings.queue_name,
            "messaging.message.id": job_id, "memfleet.job.try": job_try,
        },
    ) as span:
        if not args and set(kwargs) == {"session_id"} and isinstance(kwargs["session_id"], str):
            # Queued by a release that keyed sessions by id alone (a rolling upgrade).
            adopted = await queue.adopt_legacy(deps.redis, kwargs["session_id"],
                                               deps.settings.queue_name)
            return JobEnd(Outcome.ADOPTED, sessions=adopted)
        session = _session_of(args, kwargs)
        if session is None:
            return await job_outcome.record(
                deps, base, Outcome.INVALID,
                "the job's arguments are not {user_id: str, session_id: str}")
        base = replace(base, session_id=session.session_id, user_id=session.user_id)
        # Not recorded (no exporter, or sampled out): skip the hashing and parsing.
        recording = span.is_recording()
        if recording:
            span.set_attribute("memfleet.session", deps.telemetry.hashed_id(session.key))
            span.set_attribute("memfleet.user", deps.telemetry.hashed_id(session.user_id))
        session_lock = lock.SessionLock(deps.redis, session,
                                        int(deps.settings.lock_ttl_s * 1000),
                                        deps.settings.queue_name)
        claimed = await lock.take(deps.redis, session_lock, job_id, clock)
        if claimed.payload is not None and not claimed.locked:
            # Busy, or the model endpoint is resting: not a failure, and no try is
            # spent. A job that runs later takes the session over.
            reason = "llm_breaker" if claimed.breaker_open_ms else "busy"
            await job_outcome.defer(deps, session, claimed.breaker_open_ms)
            span.set_attributes({"memfleet.outcome": Outcome.DEFERRED,
                                 "memfleet.deferred.reason": reason})
            return JobEnd(Outcome.DEFERRED, reason=reason)
        if claimed.payload is None and claimed.finished:
            # A commit finished every list and the release dropped the snapshot: a
            # re-run of that job (ARQ is at-least-once), or one more queued for it.
            return await job_outcome.nothing_new(deps, base, span)
        snapshots, unreadable = read_lists(claimed, deps.limits, session)
        for error in unreadable:
            await job_outcome.record(deps, base, Outcome.INVALID, error)
        if not snapshots:
            await session_lock.release(gave_up=True)
            return JobEnd(Outcome.INVALID, error=unreadable[-1])
        handover = snapshots[-1].handover
        base = replace(base, handover_seq=snapshots[-1].fence_seq)
        if recording:
            _link_to_handover(span, handover.trace)
        run_ctx = RunContext(deps.settings, deps.store, deps.providers, clock, job_id, job_try,
                             started_at, check_lock=session_lock.check)
        settlement = NOTHING_SETTLED
        end: JobEnd | None = None
        try:
            end, settlement = await job_outcome.run_pipeline(deps, run_ctx, session, snapshots,
                                                             base)
            if settlement.follow_up and end.error is None:
                # A long list goes in bounded chunks, and each older list in its own
                # job, queued while this job still holds the session: a worker that
                # dies here leaves the lock for the recovery pass, never an orphan.
                await _follow_up(deps, session, job_try)
        finally:
            await session_lock.release(
                done_through=settlement.done_through, latest_done=settlement.latest_done,
                gave_up=end is not None and end.outcome in GIVEN_UP,
                note=job_outcome.commit_note(deps, session, end))
        if end.run is not None and end.run.added + end.run.updated + end.run.deleted:
            await portrait_job.after_commit(deps, session.user_id)  # docs/portrait.md
        if claimed.breaker_failures and end.error is None:
            await breaker.reset(deps.redis, BreakerKeys.of(deps.settings.queue_name))
        span.set_attribute("memfleet.outcome", end.outcome)
        run = end.run
        if run is not None:  # the pipeline's ending; the others were recorded as they came
            log.info("job finished", job_id=job_id, job_try=job_try, outcome=run.outcome,
                     added=run.added, updated=run.updated, deleted=run.deleted,
                     timings_ms=clock.timings_ms)
        return end


def _session_of(args: tuple[Any, ...], kwargs: dict[str, Any]) -> SessionRef | None:
    user_id, session_id = kwargs.get("user_id"), kwargs.get("session_id")
    if args or set(kwargs) != {"user_id", "session_id"}:
        return None
    if not isinstance(user_id, str) or not isinstance(session_id, str):
        return None
    return SessionRef(user_id, session_id)


def read_lists(
    claimed: lock.Claimed, limits: Limits, session: SessionRef
) -> tuple[list[Snapshot], list[str]]:
    """The session's lists that parse and belong to ``session``, oldest first, and
    why the others do not."""
    snapshots: list[Snapshot] = []
    unreadable: list[str] = []
    if claimed.payload is None:
        unreadable.append("the session has no hand-over payload")
    for raw in claimed.lists():
        try:
            handover = decode_handover(raw.payload, limits)
            if (handover.user_id, handover.session_id) != (session.user_id, session.session_id):
                raise InvalidJob("the hand-over names another session than its key")
            snapshots.append(Snapshot(raw.seq, handover, raw.latest))
        except InvalidJob as exc:
            unreadable.append(str(exc) if raw.latest else f"an older list: {exc}")
    return snapshots, unreadable


async def _follow_up(deps: Deps, session: SessionRef, job_try: int) -> None:
    """Queue the job for the rest of the backlog. If Redis will not take it, this
    job is retried instead: its next run starts where this commit left the cursor."""
    for attempt in range(1, FOLLOW_UP_ATTEMPTS + 1):
        try:
            await queue.enqueue(deps.redis, session, payload=None,
                                queue_name=deps.settings.queue_name)
            return
        except Exception as exc:  # noqa: BLE001 - any Redis failure: try again, then hand to ARQ
            log.warning("follow-up enqueue failed", attempt=attempt, error=type(exc).__name__)
            if attempt < FOLLOW_UP_ATTEMPTS:
                await asyncio.sleep(0.1 * attempt)
    raise Retry(defer=backoff_s(job_try))


def _link_to_handover(span: trace.Span, carrier: dict[str, str]) -> None:
    """Link the job to the hand-over's PRODUCER span, carried in the payload."""
    producer = trace.get_current_span(propagate.extract(carrier)).get_span_context()
    if producer.is_valid:
        span.add_link(producer, {"messaging.operation.type": "send"})


def _innermost_frame(exc: BaseException) -> str:
    """Where an exception was raised, as ``file:line in function``: code, never data."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "(no traceback)"
    last = frames[-1]
    return f"{os.path.basename(last.filename)}:{last.lineno} in {last.name}"
