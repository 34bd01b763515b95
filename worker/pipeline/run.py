"""One run over a session's hand-over, the stages in the order they run.

    cursor → extract → embed → consolidate ⇄ persist
           ↘ summary (beside them) ↗

The job calls it with the session lock held (worker.protocol.lock). The
refreshed summary feeds the next slice's extraction, not this slice's
decisions, so it is asked beside extraction and consolidation rather than in
line with them, and stored by the persist transaction: with a model that
answers in T, a job with a summary due takes about 2T, not 3T.
Consolidate and persist repeat while another job of the same user commits
first (the user-version compare-and-set); nothing holds a transaction open
across a provider call.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from worker.conversation import Snapshot
from worker.errors import ConsolidationContention, UserVersionConflict
from worker.pipeline import consolidate, cursor, embed, extract, notes, persist, summary
from worker.pipeline import persons as persons_stage
from worker.pipeline.context import RunContext
from worker.pipeline.cursor import Position
from worker.pipeline.extract import CandidateFact
from worker.pipeline.notes import NO_NOTES, NotePlan
from worker.pipeline.persist import RunResult
from worker.providers.wire import KnownPerson
from worker.store.person_types import PersonRecord
from worker.vectors import Vector

__all__ = ["RunContext", "RunResult", "run_once", "skip_slice"]


async def run_once(ctx: RunContext, snapshots: Sequence[Snapshot]) -> RunResult:
    """One slice of the first list (oldest first) with messages after the cursor."""
    position = await cursor.run(ctx, snapshots)
    handover = position.handover
    if position.piece.empty:
        return await persist.record_empty(ctx, position)
    if not position.remember:
        return await persist.opt_out(ctx, handover, position)
    refreshing = asyncio.create_task(summary.run(ctx, handover, position))
    try:
        persons: list[PersonRecord] | None = None

        async def people() -> tuple[KnownPerson, ...] | None:
            # The user's persons (persons on), read within the extract stage.
            nonlocal persons
            persons = await persons_stage.read_known(ctx, handover.user_id)
            return persons_stage.people_of(persons)

        extracted = await extract.run(ctx, handover, position, people)
        candidates = extracted.facts
        embedded = await embed.run(ctx, candidates, extracted.notes)
        embeddings = embedded[:len(candidates)]
        # The notes' writes (docs/notes.md): decided once, outside the facts' loop, since
        # they depend on no fact and on no other session.
        note_plan = await notes.run(ctx, handover.user_id, handover.session_id,
                                    extracted.notes, embedded[len(candidates):])
        return await _decide_and_commit(ctx, position, candidates, embeddings, refreshing,
                                        persons, note_plan)
    finally:
        if not refreshing.done():  # the run ended early (an error): the summary is moot
            refreshing.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await refreshing  # retrieved, so an early failure of its own is not left unread


async def _decide_and_commit(
    ctx: RunContext, position: Position, candidates: Sequence[CandidateFact],
    embeddings: Vector, refreshing: asyncio.Task[str | None],
    persons: Sequence[PersonRecord] | None = None, note_plan: NotePlan = NO_NOTES,
) -> RunResult:
    handover = position.handover
    decided = await consolidate.run(ctx, handover.user_id, candidates, embeddings,
                                    handover.handed_over_at, 1, persons)
    new_summary = await refreshing  # before the commit: it is stored with the slice
    attempts = ctx.settings.consolidation_attempts
    for attempt in range(1, attempts + 1):
        if attempt > 1:
            decided = await consolidate.run(ctx, handover.user_id, candidates, embeddings,
                                            handover.handed_over_at, attempt, persons)
        try:
            return await persist.commit(ctx, handover, position, decided, new_summary,
                                        candidates=len(candidates), attempt=attempt,
                                        notes=note_plan)
        except UserVersionConflict:
            continue  # another job of the user committed first: decide again on fresh neighbours
    raise ConsolidationContention(f"{attempts} consolidations lost to other jobs of the user")


async def skip_slice(ctx: RunContext, snapshots: Sequence[Snapshot], reason: str) -> RunResult:
    """Move the cursor past the slice without writing a fact, on the record (persist.skip)."""
    position = await cursor.run(ctx, snapshots)
    if not position.remember:
        return await persist.opt_out(ctx, position.handover, position)
    return await persist.skip(ctx, position.handover, position, reason)
