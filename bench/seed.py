"""Migrate a fresh database and seed users, facts and session cursors directly in SQL.

Seeding bypasses the pipeline on purpose: it is set-up, not what is measured,
and 200 facts for each of hundreds of users through the workers would take
longer than the whole bench.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import asyncpg
from pgvector import HalfVector
from pgvector.asyncpg import register_vector

from bench.workload import SessionPlan, seed_facts
from worker.payload import Message, message_hash
from worker.providers.hashing import hash_embed
from worker.stages.cursor import window_hash
from worker.store.migrate import migrate

EMBEDDING_MODEL = "hashing-v1"  # what HashingEmbedder calls itself by default
_SEEDED_AT = datetime(2025, 6, 1, tzinfo=UTC)


async def prepare_database(
    dsn: str, *, seed: int, users: int, plans: Sequence[SessionPlan], embed_dim: int
) -> int:
    """Migrate, seed every user and every session's cursor; return the facts written."""
    await migrate(dsn, embed_dim=embed_dim)
    conn = await asyncpg.connect(dsn)
    try:
        await register_vector(conn)
        facts = await _seed_facts(conn, seed, users, embed_dim)
        await conn.copy_records_to_table(
            "user_memory_state", columns=["user_id", "version"],
            records=[(f"bench-user-{u:05d}", 1) for u in range(users)],
        )
        await conn.copy_records_to_table(
            "session_cursor",
            columns=["session_id", "user_id", "version", "last_hash", "window_hash", "position",
                     "processed_count", "user_turns_since_summary", "summary"],
            records=[_cursor_row(plan) for plan in plans],
        )
        # Statistics and the visibility map now, and the seeding's dirty pages
        # written out now: otherwise autovacuum (triggered by the bulk insert)
        # and a checkpoint would do it in the middle of the measurement.
        await conn.execute("VACUUM (ANALYZE)")
        await conn.execute("CHECKPOINT")
    finally:
        await conn.close()
    return facts


async def _seed_facts(conn: asyncpg.Connection, seed: int, users: int, embed_dim: int) -> int:
    written = 0
    for first in range(0, users, 50):  # bounded batches keep memory flat
        records = []
        for user in range(first, min(users, first + 50)):
            for n, fact in enumerate(seed_facts(seed, user)):
                records.append((
                    fact.user_id, fact.text, fact.category, fact.importance,
                    HalfVector(hash_embed(fact.text, embed_dim)), EMBEDDING_MODEL,
                    _SEEDED_AT + timedelta(hours=n), "bench-history", "extracted",
                ))
        await conn.copy_records_to_table(
            "memory_fact",
            columns=["user_id", "text", "category", "importance", "embedding",
                     "embedding_model", "observed_at", "source_session_id", "source_kind"],
            records=records,
        )
        written += len(records)
    return written


def _cursor_row(plan: SessionPlan) -> tuple[object, ...]:
    """The cursor a previous run would have left at the end of the plan's history."""
    hashes = [message_hash(Message.model_validate(m)) for m in plan.history]
    end = len(hashes) - 1
    return (plan.session_id, plan.user_id, 1, hashes[end], window_hash(hashes, end), end,
            len(hashes), plan.turns_since_summary, plan.summary)
