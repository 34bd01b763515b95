"""Dead letters for operators: where sessions' memory stopped, and re-driving those
sessions (`memfleet runs`, `memfleet retry`).

A dead letter is one point where a session's memory stopped, however many runs
tried it (worker.store.types.DeadLetter); it is resolved once a later run moves
the session's cursor past it. A failed run leaves the cursor where it was, and
the hand-over stays in Redis for a week: re-driving is queueing a job for the
session, which processes everything after the cursor. A session whose hand-over
has expired needs its chat server to hand it over again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from worker.errors import MemfleetError
from worker.outcomes import Outcome
from worker.protocol import queue, shards
from worker.protocol.keys import SessionRef
from worker.store.base import MemoryStore
from worker.store.types import DeadLetter


class Redrive(StrEnum):
    """What `memfleet retry` did with one session (printed as is)."""

    QUEUED = "queued"
    ALREADY_QUEUED = "already queued"
    HEALTHY = ("healthy: nothing to retry (no open dead letter, no hand-over waiting: its "
               "memory is up to date)")
    GONE = ("no hand-over in Redis (kept a week): its open dead letter needs the chat "
            "server to hand the session over again")


@dataclass(frozen=True, slots=True)
class Redriven:
    user_id: str
    session_id: str
    status: Redrive


async def redrive_failed(redis: Any, store: MemoryStore, queue_name: str) -> list[Redriven]:
    """Queue a job for every session whose open dead letter ended ``failed``."""
    letters = await store.dead_letters([Outcome.FAILED])
    out = []
    for letter in letters:
        if letter.user_id is None or letter.session_id is None:
            continue  # an open dead letter names its session; this keeps mypy sure of it
        session = SessionRef(letter.user_id, letter.session_id)
        out.append(await _queue(redis, session, queue_name) or Redriven(
            session.user_id, session.session_id, Redrive.GONE))
    return out


async def redrive_session(
    redis: Any, store: MemoryStore, queue_name: str, user_id: str, session_id: str
) -> Redriven:
    """Queue a job for one session: one with a hand-over waiting (whether or not a run
    failed on it), or say that it is healthy, or that its hand-over is gone."""
    session = SessionRef(user_id, session_id)
    queued = await _queue(redis, session, queue_name)
    if queued is not None:
        return queued
    if await store.dead_letters(session=(user_id, session_id)):
        return Redriven(user_id, session_id, Redrive.GONE)
    if not await store.runs(user_id, session_id=session_id):
        raise MemfleetError(
            f"no run recorded and no hand-over in Redis for session {session_id!r} of user "
            f"{user_id!r}: check --session and --user (a hand-over no worker ran expires "
            "after a week)")
    return Redriven(user_id, session_id, Redrive.HEALTHY)


async def _queue(redis: Any, session: SessionRef, queue_name: str) -> Redriven | None:
    """Queue a job for the session if its hand-over is in Redis; None if it is not.
    ``redis``: a client, or a ShardedRedis (the user's shard, both while they move)."""
    for client in shards.user_clients(redis, session.user_id):
        if await client.exists(session.handover_key):
            enqueued = await queue.enqueue(client, session, payload=None,
                                           queue_name=queue_name)
            return Redriven(session.user_id, session.session_id,
                            Redrive.QUEUED if enqueued.job_id else Redrive.ALREADY_QUEUED)
    return None


def describe(letter: DeadLetter) -> dict[str, Any]:
    """A dead letter as JSON: its status first, times as ISO strings."""
    return {"status": letter.status,
            **{k: v.isoformat() if hasattr(v, "isoformat") else v
               for k, v in asdict(letter).items()}}


def line(letter: DeadLetter) -> str:
    """A dead letter on one line of `memfleet runs` (no user content: errors are memfleet's)."""
    resolved = (f"  resolved {letter.resolved_at.isoformat()} by {letter.resolved_by}"
                if letter.resolved_at is not None else "")
    return (f"{letter.last_failed_at.isoformat()}  {letter.status:<10} {letter.outcome:<8}"
            f" user={letter.user_id or '-'} session={letter.session_id or '-'}"
            f" attempts={letter.attempts}{resolved}  {letter.error or ''}").rstrip()
