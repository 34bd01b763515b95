"""PgMemoryStore: the real store, on asyncpg with binary pgvector codecs.

Every fact query takes the user id; errors from asyncpg are translated here.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import fields
from datetime import datetime
from typing import Any

import asyncpg

from worker.errors import CursorFenced, StoreError, UserVersionConflict
from worker.store import halfvec, queries
from worker.store.types import (
    CursorState,
    ExistingRow,
    FactRecord,
    InsertFact,
    NeighborRow,
    RunCommit,
    RunRecord,
    Vector,
)

_PG_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError)
# SQLSTATEs raised by memfleet_commit_run (schema/0003_commit_run.sql).
_CURSOR_MOVED = "MF001"
_USER_CHANGED = "MF002"


@asynccontextmanager
async def _translated(what: str) -> AsyncIterator[None]:
    try:
        yield
    except _PG_ERRORS as exc:
        raise StoreError(f"{what} failed: {type(exc).__name__}: {exc}") from exc


def _flat_json(record: Any) -> str:
    """A flat dataclass (datetimes as ISO strings) as JSON, for jsonb parameters: the
    cursor move, and the audit row that insert_run and memfleet_commit_run both read.

    Shallow on purpose: ``dataclasses.asdict`` deep-copies every value first.
    """
    return json.dumps({f.name: getattr(record, f.name) for f in fields(record)},
                      default=_iso)


def _iso(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _fact(row: Any) -> FactRecord:
    return FactRecord(**dict(row))


class PgMemoryStore:
    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._sql = queries.load("pipeline")
        self._facts_sql = queries.load("facts")

    # -- the pipeline ----------------------------------------------------

    async def load_cursor(self, session_id: str) -> CursorState | None:
        async with _translated("loading the cursor"):
            row = await self._pool.fetchrow(self._sql["load_cursor"], session_id)
        return None if row is None else CursorState(**dict(row))

    async def neighbors(
        self, user_id: str, embeddings: Vector, k: int
    ) -> tuple[int, list[list[NeighborRow]]]:
        """The user's version and, per embedding (a row of the matrix), its top-k active facts."""
        result: list[list[NeighborRow]] = [[] for _ in range(len(embeddings))]
        if not len(embeddings):
            return 0, result
        vectors = halfvec.encode_rows(embeddings)
        async with _translated("the neighbour query"):
            rows = await self._pool.fetch(self._sql["neighbors"], user_id, vectors, k)
        version = 0
        for row in rows:
            version = row["version"]
            if row["id"] is not None:
                result[row["ord"] - 1].append(
                    NeighborRow(row["id"], row["text"], row["observed_at"], row["distance"])
                )
        return version, result

    async def commit_run(self, commit: RunCommit) -> int:
        """Write one run atomically, in one round trip; return the run id.

        Raises CursorFenced or UserVersionConflict when a compare-and-set
        loses; the statement then wrote nothing.
        """
        cursor = commit.cursor
        inserts = [w for w in commit.writes if isinstance(w, InsertFact)]
        position = {w.ref: i + 1 for i, w in enumerate(inserts)}  # 1-based, as in SQL
        targets: list[int | None] = []
        targets_new: list[int | None] = []
        successors: list[int | None] = []
        for write in commit.writes:
            if isinstance(write, InsertFact):
                if write.supersedes is None:
                    continue
                target, successor = write.supersedes, position[write.ref]
            else:
                target, successor = write.target, None
            if isinstance(target, ExistingRow):
                targets.append(target.id)
                targets_new.append(None)
            else:
                targets.append(None)
                targets_new.append(position[target.ref])
            successors.append(successor)
        try:
            run_id: int = await self._pool.fetchval(
                self._sql["commit_run"],
                _flat_json(cursor), commit.user_version, _flat_json(commit.run),
                [w.text for w in inserts], [w.category for w in inserts],
                [w.importance for w in inserts],
                halfvec.encode_each([w.embedding for w in inserts]),
                commit.embedding_model, commit.observed_at, commit.source_session_id,
                targets, targets_new, successors,
            )
        except asyncpg.PostgresError as exc:
            if exc.sqlstate == _CURSOR_MOVED:
                raise CursorFenced(cursor.session_id) from exc
            if exc.sqlstate == _USER_CHANGED:
                raise UserVersionConflict(cursor.user_id) from exc
            raise StoreError(f"the persist transaction failed: {type(exc).__name__}") from exc
        except (asyncpg.InterfaceError, OSError) as exc:
            raise StoreError(f"the persist transaction failed: {type(exc).__name__}") from exc
        return run_id

    async def record_run(self, run: RunRecord) -> int:
        """An audit row on its own, for runs that write no fact and move no cursor."""
        async with _translated("recording the run"):
            run_id: int = await self._pool.fetchval(self._sql["insert_run"], _flat_json(run))
        return run_id

    # -- reading ---------------------------------------------------------

    async def facts(self, user_id: str, *, include_superseded: bool = False) -> list[FactRecord]:
        name = "all_facts" if include_superseded else "active_facts"
        async with _translated("reading facts"):
            rows = await self._pool.fetch(self._facts_sql[name], user_id)
        return [_fact(row) for row in rows]

    async def runs(
        self, *, session_id: str | None = None, user_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Audit rows of one session or of one user, oldest first."""
        name, key = ("runs_for_session", session_id) if session_id else ("runs_for_user", user_id)
        async with _translated("reading runs"):
            rows = await self._pool.fetch(self._facts_sql[name], key)
        return [dict(row) for row in rows]
