"""One run over a session's hand-over, the stages in the order they run.

    cursor → extract → embed → summary → consolidate ⇄ persist

The job calls it with the session lock held (worker.stages.lock). The summary
is asked before consolidation and stored by the persist transaction.
Consolidate and persist repeat while another job of the same user commits
first (the user-version compare-and-set); nothing holds a transaction open
across a provider call.
"""

from __future__ import annotations

from collections.abc import Sequence

from worker.errors import ConsolidationContention, UserVersionConflict
from worker.payload import Snapshot
from worker.stages import consolidate, cursor, embed, extract, persist, summary
from worker.stages.context import RunContext
from worker.stages.persist import RunResult

__all__ = ["RunContext", "RunResult", "run_once", "skip_slice"]


async def run_once(ctx: RunContext, snapshots: Sequence[Snapshot]) -> RunResult:
    """One slice of the first list (oldest first) with messages after the cursor."""
    position = await cursor.run(ctx, snapshots)
    handover = position.handover
    if position.piece.empty:
        return await persist.record_empty(ctx, position)
    if not position.remember:
        return await persist.opt_out(ctx, handover, position)
    candidates = await extract.run(ctx, handover, position)
    embeddings = await embed.run(ctx, candidates)
    new_summary = await summary.run(ctx, handover, position)
    attempts = ctx.settings.consolidation_attempts
    for attempt in range(1, attempts + 1):
        decided = await consolidate.run(ctx, handover.user_id, candidates, embeddings,
                                        handover.handed_over_at, attempt)
        try:
            return await persist.commit(ctx, handover, position, decided, new_summary,
                                        candidates=len(candidates), attempt=attempt)
        except UserVersionConflict:
            continue  # another job of the user committed first: decide again on fresh neighbours
    raise ConsolidationContention(f"{attempts} consolidations lost to other jobs of the user")


async def skip_slice(ctx: RunContext, snapshots: Sequence[Snapshot], reason: str) -> RunResult:
    """Move the cursor past the slice without writing a fact, on the record (persist.skip)."""
    position = await cursor.run(ctx, snapshots)
    if not position.remember:
        return await persist.opt_out(ctx, position.handover, position)
    return await persist.skip(ctx, position.handover, position, reason)
