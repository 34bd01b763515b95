"""Dead letters for operators: runs that ended without storing their slice, and
re-driving their sessions (`memfleet runs`, `memfleet retry`).

A failed run leaves the session's cursor where it was, and the hand-over stays
in Redis for a week: re-driving is queueing a job for the session, which
processes everything after the cursor. A session whose hand-over has expired
needs its chat server to hand it over again.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from worker import queue
from worker.store.base import MemoryStore

# Outcomes that stored nothing for the slice they were given.
DEAD_OUTCOMES = ("failed", "skipped", "invalid", "error")


@dataclass(frozen=True, slots=True)
class Redriven:
    session_id: str
    status: str  # queued | already queued | no hand-over in Redis


async def redrive(
    redis: Any, store: MemoryStore, queue_name: str, session_ids: Sequence[str] | None
) -> list[Redriven]:
    """Queue a job for each session (None: every session whose latest run failed)."""
    sessions = list(session_ids) if session_ids is not None else await store.failed_sessions()
    out = []
    for session_id in sessions:
        if not await redis.exists(queue.handover_key(session_id)):
            out.append(Redriven(session_id, "no hand-over in Redis"))
            continue
        enqueued = await queue.enqueue(redis, session_id, payload=None, queue_name=queue_name)
        out.append(Redriven(session_id, "queued" if enqueued.job_id else "already queued"))
    return out


def describe_run(run: dict[str, Any]) -> dict[str, Any]:
    """An audit row as JSON: times as ISO strings."""
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in run.items()}
