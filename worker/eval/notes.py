"""`memfleet eval`'s notes kind (docs/notes.md): the fleet's promotion job, run once for
the run's own users after their conversations, as the daily pass would have."""

from __future__ import annotations

from collections.abc import Sequence

from worker.config import Settings
from worker.ops.note_promotion import PassReport, PromotionPolicy, promote_users
from worker.providers.factory import build_embedder, build_note_promoter, embedding_model
from worker.store.note_promotion import PostgresNotePromotion


async def promote_notes(settings: Settings, user_ids: Sequence[str]) -> PassReport:
    """Promote the recurring notes of ``user_ids`` (only theirs: the eval never touches
    another user's memory), with the settings' promotion model and embedder."""
    store = await PostgresNotePromotion.connect(settings.database_url or "")
    promoter = build_note_promoter(settings)
    embedder = build_embedder(settings, embedding_model(settings), settings.embed_dim)
    try:
        return await promote_users(store, promoter, embedder,
                                   PromotionPolicy.from_settings(settings), user_ids)
    finally:
        await promoter.aclose()
        close = getattr(embedder, "aclose", None)
        if close is not None:
            await close()
        await store.aclose()
