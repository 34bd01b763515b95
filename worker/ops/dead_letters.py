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

from worker.protocol import keys, queue
from worker.protocol.session_ref import SessionRef
from worker.store.base import MemoryStore

# Which outcomes are dead letters (they stored nothing for their slice) is
# worker.outcomes.DEAD_LETTERS: `memfleet runs` lists those by default.


@dataclass(frozen=True, slots=True)
class Redriven:
    user_id: str
    session_id: str
    status: str  # queued | already queued | no hand-over in Redis


async def redrive(
    redis: Any, store: MemoryStore, queue_name: str,
    sessions: Sequence[tuple[str, str]] | None,
) -> list[Redriven]:
    """Queue a job for each (user, session) (None: every session whose latest run failed)."""
    pairs = list(sessions) if sessions is not None else await store.failed_sessions()
    out = []
    for user_id, session_id in pairs:
        session = SessionRef(user_id, session_id)
        if not await redis.exists(keys.handover_key(session)):
            out.append(Redriven(user_id, session_id, "no hand-over in Redis"))
            continue
        enqueued = await queue.enqueue(redis, session, payload=None, queue_name=queue_name)
        out.append(Redriven(user_id, session_id,
                            "queued" if enqueued.job_id else "already queued"))
    return out


def describe_run(run: dict[str, Any]) -> dict[str, Any]:
    """An audit row as JSON: times as ISO strings."""
    return {k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in run.items()}
