"""PostgresMaintenanceStore: the statements of the operators' passes over many users.

The expiry pass (worker.ops.expiry), the right of access's export
(worker.ops.access_export) and `memfleet reembed` (worker.ops.reembed) decide
what to do; the transactions, locks and snapshots they need are here, with
their SQL (worker/store/sql/expiry.sql, export.sql, reembed.sql) and asyncpg's
errors translated at this edge.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import asyncpg

from worker.errors import ConfigurationError, StoreUnavailable
from worker.store import halfvec, queries
from worker.store.pool import PooledStore
from worker.store.translate import PG_ERRORS, status_count, translated
from worker.store.types import (
    EXPORT_SECTIONS,
    ActiveRows,
    ExportSection,
    RowsToMove,
    Vector,
)

# An export's rows come from server-side cursors this many at a time.
ROWS_PER_FETCH = 500


class _Changed(Exception):
    """Internal: the user's rows are not what was read; rolls the move back."""


class _Snapshot:
    """One user's export rows on a connection inside a read-only snapshot."""

    def __init__(self, conn: Any, sql: dict[str, str], user_id: str) -> None:
        self._conn, self._sql, self._user_id = conn, sql, user_id

    async def consent(self) -> dict[str, Any] | None:
        row = await self._conn.fetchrow(self._sql["consent"], self._user_id)
        return None if row is None else dict(row)

    async def rows(self, section: ExportSection) -> AsyncIterator[dict[str, Any]]:
        if section not in EXPORT_SECTIONS:
            raise ValueError(f"no export section {section!r}")
        async for row in self._conn.cursor(self._sql[section], self._user_id,
                                           prefetch=ROWS_PER_FETCH):
            item = dict(row)
            if section == "persons":  # a person's label versions, aggregated as jsonb
                item["labels"] = json.loads(item["labels"] or "[]")
            yield item


class PostgresMaintenanceStore(PooledStore):
    """worker.store.base.MaintenanceStore on PostgreSQL."""

    def __init__(self, pool: Any) -> None:
        super().__init__(pool)
        self._expiry = queries.load("expiry")
        self._export = queries.load("export")
        self._reembed = queries.load("reembed")

    # -- the expiry pass ---------------------------------------------------

    async def expire_batch(self, *, users: int, facts: int) -> int:
        sql = self._expiry
        async with translated("the expiry pass"), self._pool.acquire() as conn, \
                conn.transaction():
            locked = [row["user_id"] for row in await conn.fetch(sql["lock_due_users"], users)]
            expired: int = await conn.fetchval(sql["expire_due"], locked, facts)
        return expired

    # -- the access export -------------------------------------------------

    @contextlib.asynccontextmanager
    async def export_snapshot(
        self, user_id: str, *, acquire_timeout_s: float | None = None
    ) -> AsyncIterator[_Snapshot]:
        """Errors while it is open, the rows' included, come out translated."""
        async with translated("exporting a user"), self._connection(acquire_timeout_s) as conn, \
                conn.transaction(isolation="repeatable_read", readonly=True):
            yield _Snapshot(conn, self._export, user_id)

    @contextlib.asynccontextmanager
    async def _connection(self, timeout_s: float | None) -> AsyncIterator[Any]:
        try:
            conn = await self._pool.acquire(timeout=timeout_s)
        except TimeoutError:  # asyncpg's own; an OSError, which translated() would blur
            raise StoreUnavailable(
                f"exporting a user: no database connection within {timeout_s:g} s") from None
        try:
            yield conn
        finally:
            await self._pool.release(conn)

    # -- re-embedding ------------------------------------------------------

    @contextlib.asynccontextmanager
    async def claim_reembed(self, model: str, dim: int) -> AsyncIterator[bool]:
        """The advisory lock is held on a connection of its own for the whole move: a
        killed process's connection closes, and the lock goes with it."""
        sql = self._reembed
        async with translated("starting the move"), self._pool.acquire() as lock:
            if not await lock.fetchval(sql["try_lock"]):
                yield False
                return
            try:
                try:
                    await lock.fetchval(sql["start"], model, dim)
                except asyncpg.UndefinedTableError as exc:
                    raise ConfigurationError(
                        "the database is not migrated: run `memfleet migrate`") from exc
                yield True
            finally:
                # A connection that broke took the lock with it.
                with contextlib.suppress(*PG_ERRORS):
                    await lock.execute(sql["unlock"])

    async def users_left(self, model: str, dim: int, limit: int) -> list[str]:
        async with translated("listing the users left"):
            rows = await self._pool.fetch(self._reembed["users_left"], model, dim, limit)
        return [row["user_id"] for row in rows]

    async def rows_to_move(self, user_id: str, model: str, dim: int) -> RowsToMove:
        async with translated("reading a user's facts"):
            rows = await self._pool.fetch(self._reembed["user_rows"], model, dim, user_id)
        # One row at least: the user's version, joined to no row when none is left.
        facts = [row for row in rows if row["id"] is not None and not row["is_note"]]
        notes = [row for row in rows if row["id"] is not None and row["is_note"]]
        return RowsToMove(rows[0]["version"], [row["id"] for row in facts],
                          [row["text"] for row in facts], [row["id"] for row in notes],
                          [row["text"] for row in notes])

    async def move_user(
        self, user_id: str, version: int, ids: Sequence[int], embeddings: Vector, *,
        model: str, dim: int, note_ids: Sequence[int] = (), note_embeddings: Vector | None = None,
    ) -> bool:
        """Under the user's advisory lock, shared (as commits take it), after winning the
        user-version compare-and-set every writer of a user's facts takes."""
        sql = self._reembed
        moves = [("move_rows", ids, embeddings)]
        if note_ids:
            if note_embeddings is None or len(note_embeddings) != len(note_ids):
                raise ValueError("one embedding a note")
            moves.append(("move_notes", note_ids, note_embeddings))
        try:
            async with translated("moving a user's facts"), self._pool.acquire() as conn, \
                    conn.transaction():
                await conn.execute(sql["lock_user"], user_id)
                if await conn.fetchval(sql["bump_user_version"], user_id, version) is None:
                    raise _Changed
                for statement, row_ids, vectors in moves:
                    if not row_ids:
                        continue
                    status = await conn.execute(sql[statement], model, dim, user_id,
                                                list(row_ids), halfvec.encode_rows(vectors))
                    if status_count(status) != len(row_ids):
                        raise _Changed
                await conn.execute(sql["count_moved"], model, dim, len(ids) + len(note_ids))
        except _Changed:
            return False
        return True

    async def finish_reembed(self, model: str, dim: int) -> ActiveRows | None:
        sql = self._reembed
        async with translated("verifying the move"), self._pool.acquire() as conn, \
                conn.transaction():
            state = await conn.fetchrow(sql["verify"], model, dim)
            if state["other"] or state["other_dim"]:
                return None
            await conn.execute(sql["finish"], model, dim)
        return ActiveRows(facts=state["active"], notes=state["active_notes"])
