"""Summary stage: refresh the session's rolling summary when it is due.

Due every N user turns, and whenever the chat server summarised the history
(the cursor was not found). It reads the previous summary and every turn since it
(as far back as the hand-over's list still holds them), not only this run's slice.
The new summary is stored by the persist transaction together with the slice it
covers, and feeds the next slice's extraction, not this slice's decisions: the
pipeline asks it beside extraction and consolidation (worker.pipeline.run), once
per run, so a consolidation re-run (another job of the user committed first) does
not ask for it twice.
"""

from __future__ import annotations

import structlog

from worker.config import Settings
from worker.conversation import Handover
from worker.errors import ProviderError
from worker.pipeline.context import RunContext, ask
from worker.pipeline.cursor import CursorCase, Position
from worker.pipeline.extract import observed_label
from worker.providers.wire import SummaryRequest, WireMessage

log = structlog.get_logger("memfleet.summary")


def is_due(settings: Settings, position: Position, user_turns: int) -> bool:
    if position.case is CursorCase.NOT_FOUND:
        return True
    before = position.cursor.user_turns_since_summary if position.cursor else 0
    return before + user_turns >= settings.summary_every_user_turns


def build_request(handover: Handover, position: Position) -> SummaryRequest:
    return SummaryRequest(
        observed_at=observed_label(handover.handed_over_at),
        previous_summary=position.cursor.summary if position.cursor else None,
        # Every turn since the last refresh: with a slice per turn, the turns between
        # two refreshes would otherwise never reach a summary.
        messages=tuple(WireMessage(role=m.role, content=m.content)
                       for m in position.unsummarised_messages(handover)),
    )


async def run(ctx: RunContext, handover: Handover, position: Position) -> str | None:
    """The refreshed summary; None when not due, or when the model failed to give one."""
    if not is_due(ctx.settings, position, position.user_turns(handover)):
        return None
    request = build_request(handover, position)
    summarizer = ctx.providers.summarizer
    with ctx.clock.stage("summary"):
        try:
            answer = await ask(ctx, "chat", summarizer, lambda: summarizer.summarize(request))
        except ProviderError as exc:
            # The facts matter; a stale summary is tolerable. Its user turns keep
            # counting, so the next run of the session asks again. A bad setting
            # (ConfigurationError) or a lost lock is not a ProviderError: it ends the run.
            log.warning("summary refresh failed", error=type(exc).__name__)
            return None
    return answer.value.summary
