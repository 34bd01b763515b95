"""The fleet's side of the user's portrait (docs/portrait.md): after a commit, and the
refresh itself, an ARQ job of its own.

- ``after_commit``: a job whose commit changed a user's facts counts it toward the
  user's next refresh (worker.protocol.portrait_queue.facts_changed: debounced, one
  queued per user, as the memory API's manual writes do). Best effort: a Redis error
  is logged and the commit stands; the next change queues the refresh.
- ``refresh_user_portrait``: the ARQ function. It claims the refresh (commits from
  now on count toward the next), then runs worker.pipeline.portrait: at most one
  model call, within the fleet's model budget (the provider's calls take budget
  slots like the job's), none while the circuit breaker is open, none when the
  facts are those of the current portrait. A busy budget or an open breaker queues
  the refresh again later; a transient failure is tried again by ARQ, at most
  PORTRAIT_JOB_TRIES times.

Counted in ``memfleet.portrait.refreshes`` by outcome (and commits that joined a
queued refresh in ``memfleet.portrait.debounced``); its span names the user by the
keyed stand-in, never the portrait's text.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import structlog
from arq import Retry
from opentelemetry import trace

from worker.config import Settings
from worker.errors import MemfleetError, ModelBudgetBusy, ProviderUnavailable
from worker.pipeline.portrait import PortraitPolicy, refresh_portrait
from worker.protection import breaker
from worker.protection.breaker import BreakerKeys
from worker.protection.retry_policy import backoff_s
from worker.protocol import portrait_queue
from worker.protocol.portrait_queue import PortraitPace
from worker.telemetry import StageClock, record_error

if TYPE_CHECKING:  # worker.fleet.job calls after_commit: no import cycle at run time
    from worker.fleet.job import Deps

log = structlog.get_logger("memfleet.portrait")

# Tries of one refresh whose model or database failed for now: a portrait can wait
# for the next commit, a job slot should not.
PORTRAIT_JOB_TRIES = 3


def policy(settings: Settings) -> PortraitPolicy:
    return PortraitPolicy(max_facts=settings.portrait_max_facts,
                          max_words=settings.portrait_max_words,
                          memory_default=settings.memory_default)


async def after_commit(deps: Deps, user_id: str) -> None:
    """A commit changed the user's facts: their portrait is due (debounced)."""
    noted = await portrait_queue.facts_changed(deps.redis, user_id, deps.settings)
    if noted is not None and noted.joined:
        deps.telemetry.metrics.portrait_debounced.add(1)


async def refresh_user_portrait(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """The ARQ job: ``{"user_id": ...}``; returns ``{"outcome": ...}``."""
    deps: Deps = ctx["deps"]
    outcome = "error"
    try:
        outcome = await _refresh(deps, ctx, args, kwargs)
        return {"outcome": outcome}
    except Retry:
        outcome = "retry"
        raise
    except asyncio.CancelledError:
        outcome = "cancelled"
        raise
    except Exception as exc:
        # By type only, as the session's job does: a foreign message may quote a fact.
        log.error("portrait refresh ended in an unexpected error", error=type(exc).__name__)
        if isinstance(exc, MemfleetError):
            raise
        raise MemfleetError(f"{type(exc).__name__} (its message is withheld)") from None
    finally:
        deps.telemetry.metrics.portrait_refreshes.add(1, {"outcome": outcome})


async def _refresh(deps: Deps, ctx: dict[str, Any], args: tuple[Any, ...],
                   kwargs: dict[str, Any]) -> str:
    user_id = kwargs.get("user_id")
    if args or set(kwargs) != {"user_id"} or not isinstance(user_id, str):
        return "invalid"
    settings = deps.settings
    writer = deps.providers.portrait_writer
    if not settings.portrait_enabled or deps.portraits is None or writer is None:
        return "disabled"
    job_id, job_try = str(ctx.get("job_id", "")), int(ctx.get("job_try", 1))
    clock = StageClock(deps.telemetry.tracer, deps.telemetry.metrics)
    with clock.span("portrait refresh", trace.SpanKind.CONSUMER,
                    {"memfleet.job.try": job_try}) as span:
        if span.is_recording():
            span.set_attribute("memfleet.user", deps.telemetry.hashed_id(user_id))
        await portrait_queue.claim(deps.redis, user_id, job_id)
        open_ms = await breaker.open_for_ms(deps.redis, BreakerKeys.of(settings.queue_name))
        if open_ms:
            return await _later(deps, user_id, open_ms, span)
        try:
            refreshed = await refresh_portrait(
                deps.portraits, writer, user_id, policy(settings), now=datetime.now(UTC),
                clock=clock)
        except ModelBudgetBusy:
            return await _later(deps, user_id, int(settings.busy_defer_s * 1000), span)
        except MemfleetError as exc:
            record_error(span, exc)
            if exc.transient and job_try < PORTRAIT_JOB_TRIES:
                log.warning("portrait refresh did not complete", job_try=job_try,
                            next="retry", error=type(exc).__name__)
                raise Retry(defer=backoff_s(job_try)) from None
            log.warning("portrait refresh failed", job_try=job_try,
                        error=type(exc).__name__, unavailable=isinstance(exc, ProviderUnavailable))
            span.set_attribute("memfleet.portrait.outcome", "failed")
            return "failed"
        span.set_attribute("memfleet.portrait.outcome", refreshed.outcome)
        log.info("portrait refreshed", outcome=refreshed.outcome, version=refreshed.version,
                 facts=refreshed.fact_count)
        return refreshed.outcome


async def _later(deps: Deps, user_id: str, in_ms: int, span: trace.Span) -> str:
    """The model cannot be asked now (a busy budget, an open breaker): the refresh is
    queued again for then, spending no try."""
    settings = deps.settings
    due = int(datetime.now(UTC).timestamp() * 1000) + max(in_ms, 1)
    await portrait_queue.note_commit(deps.redis, user_id, PortraitPace.of_settings(settings),
                                     settings.queue_name, due_ms=due)
    span.set_attribute("memfleet.portrait.outcome", "deferred")
    return "deferred"
