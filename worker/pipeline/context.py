"""What every stage of one run is handed, and the one way a stage calls a provider."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TypeVar

from worker.config import Settings
from worker.providers.base import Answer, Labelled, Providers
from worker.store.base import PipelineStore
from worker.telemetry import StageClock

T = TypeVar("T")


def _never_lost() -> None:
    return None


@dataclass(frozen=True, slots=True)
class RunContext:
    settings: Settings
    store: PipelineStore
    providers: Providers
    clock: StageClock
    job_id: str
    job_try: int
    started_at: datetime
    # Raises LockLost once the session lock is no longer the job's (SessionLock.check).
    check_lock: Callable[[], None] = _never_lost


async def ask(
    ctx: RunContext, operation: str, provider: Labelled, call: Callable[[], Awaitable[Answer[T]]]
) -> Answer[T]:
    """One provider call in its gen_ai span, its tokens counted; never once the lock is lost."""
    ctx.check_lock()
    with ctx.clock.provider_call(operation, provider.provider_name, provider.model) as done:
        answer = await call()
        done(answer.model, answer.usage.input_tokens, answer.usage.output_tokens)
    return answer
