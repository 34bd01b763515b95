"""Dead letters from audit rows in plain Python: worker/store/sql/facts.sql's
``dead_letters`` for InMemoryStore (tests/contract holds the two to the same answers).

A point is a session's cursor as its runs left it: a run that moved the cursor
(worker.outcomes.CURSOR_MOVES) ends the point it started from, and every dead
letter run at one point is one dead letter, resolved by the first move at or
after its first run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from worker.outcomes import ATTEMPTS, CURSOR_MOVES, DEAD_LETTERS
from worker.store.types import DeadLetter


def dead_letters_of(
    rows: Iterable[dict[str, Any]], outcomes: Sequence[str], *, include_resolved: bool,
    limit: int | None, session: tuple[str, str] | None,
) -> list[DeadLetter]:
    """``rows``: memory_run rows, by id."""
    points: dict[tuple[str | None, str | None, int], list[dict[str, Any]]] = {}
    moves: dict[tuple[str | None, str | None], list[dict[str, Any]]] = {}
    singles: list[list[dict[str, Any]]] = []
    for row in rows:
        owner = (row["user_id"], row["session_id"])
        if row["session_id"] is None:
            if row["outcome"] in DEAD_LETTERS and session is None:
                singles.append([row])
            continue
        if session is not None and owner != session:
            continue
        moved = moves.setdefault(owner, [])
        points.setdefault((*owner, len(moved)), []).append(row)
        if row["outcome"] in CURSOR_MOVES:
            moved.append(row)
    letters: list[tuple[int, DeadLetter]] = []
    groups = [*points.items(), *(((None, None, 0), runs) for runs in singles)]
    for (user_id, session_id, _), runs in groups:
        dead = [r for r in runs if r["outcome"] in DEAD_LETTERS]
        if not dead:
            continue
        tried = [r for r in runs if r["outcome"] in ATTEMPTS]
        past = next((m for m in moves.get((user_id, session_id), [])
                     if m["id"] >= dead[0]["id"]), None)
        latest = dead[-1]
        letters.append((latest["id"], DeadLetter(
            user_id=user_id, session_id=session_id, outcome=latest["outcome"],
            error=latest["error"], job_id=latest["job_id"], job_try=latest["job_try"],
            attempts=len(tried), first_failed_at=tried[0]["finished_at"],
            last_failed_at=latest["finished_at"],
            resolved_by=past["outcome"] if past else None,
            resolved_at=past["finished_at"] if past else None)))
    chosen = [letter for _, letter in sorted(letters, key=lambda pair: -pair[0])
              if letter.outcome in outcomes
              and (include_resolved or letter.status == "open")]
    return chosen[:limit]
