"""Test helpers: drive burst workers in-process and read results back."""

from __future__ import annotations

from typing import Any

import asyncpg

from worker.app import build_worker
from worker.config import Settings


async def drain(settings: Settings, **overrides: Any) -> dict[str, int]:
    """Run a burst worker until the queue (deferred jobs included) is empty."""
    worker = build_worker(settings, burst=True, poll_delay=0, **overrides)
    try:
        await worker.main()
    finally:
        await worker.close()
    return {"complete": worker.jobs_complete, "failed": worker.jobs_failed,
            "retried": worker.jobs_retried}


def user_msg(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def bot_msg(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


async def active_texts(db: asyncpg.Connection, user_id: str) -> list[str]:
    rows = await db.fetch(
        "SELECT text FROM memory_fact WHERE user_id = $1 AND superseded_at IS NULL ORDER BY id",
        user_id,
    )
    return [r["text"] for r in rows]


async def runs(db: asyncpg.Connection, session_id: str) -> list[asyncpg.Record]:
    return await db.fetch("SELECT * FROM memory_run WHERE session_id = $1 ORDER BY id", session_id)
