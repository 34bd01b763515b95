"""The user's portrait on PostgreSQL (schema/0018_portraits.sql, sql/portraits.sql;
docs/portrait.md): what a portrait is made from, its versions, and its writes.

A portrait is written in one transaction that takes the user's advisory lock shared
(as a worker's commit does; an erase or a consent switch takes it exclusive) and
checks, under it, that the portrait is still due: the user's memory is on, the user
wants one, and the facts it was made from are exactly the facts a portrait would be
made from now. An erase deletes every fact row and ids are never given twice, so a
portrait made from facts read before an erase never lands after it, however late
its model call returns: that compare is the portrait's erase fence. No transaction
is held open across the model call: the facts are read in one statement, the
portrait written in another transaction after the call.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from worker.store import queries
from worker.store.pool import PooledStore
from worker.store.translate import translated
from worker.store.types import ConsentGate

RemovedReason = Literal["user", "memory_off", "no_facts"]
# The facts a portrait is made from: profile facts only (an agent's relationship
# facts would reach every other agent through a portrait they all read).
PORTRAIT_SCOPE = "profile"


@dataclass(frozen=True, slots=True)
class PortraitFact:
    id: int
    text: str
    category: str


@dataclass(frozen=True, slots=True)
class Portrait:
    user_id: str
    version: int
    text: str
    facts_hash: str
    fact_count: int
    model: str
    prompt_version: str
    created_at: datetime
    # The user's own view (portrait_versions) carries how a version ended.
    superseded_at: datetime | None = None
    removed_at: datetime | None = None
    removed_reason: str | None = None


@dataclass(frozen=True, slots=True)
class PortraitState:
    """Where the user's portrait stands, before a refresh decides anything."""

    memory_on: bool  # the user's memory is on (their choice, else the fleet's default)
    current: int | None  # the current version (None: none shown)
    facts_hash: str | None  # what the current version was made from
    latest: int  # the latest version, current or not (0: never one)
    wanted: bool  # False: the user removed it and has not asked for one again


def facts_hash(facts: Sequence[PortraitFact]) -> str:
    """What a portrait was made from: the first 32 hex digits of SHA-256 over the facts'
    ids, sorted, comma-separated. A fact's text never changes under its id (a change
    is a new row), so equal hashes mean the same facts."""
    ids = ",".join(str(i) for i in sorted(f.id for f in facts))
    return hashlib.sha256(ids.encode()).hexdigest()[:32]


@runtime_checkable
class PortraitStore(Protocol):
    """What the portrait's refresh, the read path and the memory API need."""

    async def portrait_facts(self, user_id: str, limit: int,
                             gate: ConsentGate) -> list[PortraitFact]:
        """The first ``limit`` active profile facts in the stable order (pinned, importance,
        id); none while the user's memory is off."""
        ...

    async def portrait_state(self, user_id: str, gate: ConsentGate) -> PortraitState: ...

    async def write_portrait(
        self, user_id: str, facts: Sequence[PortraitFact], *, text: str, model: str,
        prompt_version: str, limit: int, gate: ConsentGate,
    ) -> Portrait | None:
        """The next version, superseding the current one, if still due (module doc);
        None, with nothing written, otherwise."""
        ...

    async def end_portrait(self, user_id: str, reason: RemovedReason) -> int | None:
        """End the current version without a successor; its version, or None when none."""
        ...

    async def current_portrait(self, user_id: str,
                               gate: ConsentGate | None = None) -> Portrait | None:
        """The current version; with ``gate``, none while the user's memory is off."""
        ...

    async def portrait_versions(self, user_id: str) -> list[Portrait]:
        """Every version, newest first (the user's own view, the export)."""
        ...

    async def remove_portrait(self, user_id: str) -> int | None:
        """The user removes their portrait: the current version ends ('user') and none is
        made until they ask again (``want_portrait``); the ended version, or None."""
        ...

    async def want_portrait(self, user_id: str) -> None:
        """The user asks for a portrait again after removing one."""
        ...


def _portrait(row: Any) -> Portrait:
    return Portrait(**dict(row))


class PostgresPortraits(PooledStore):
    """PortraitStore's PostgreSQL half of PostgresStore."""

    @property
    def _portrait_sql(self) -> dict[str, str]:
        return queries.load("portraits")

    async def portrait_facts(self, user_id: str, limit: int,
                             gate: ConsentGate) -> list[PortraitFact]:
        async with translated("reading a portrait's facts"):
            rows = await self._pool.fetch(self._portrait_sql["portrait_facts"], user_id,
                                          PORTRAIT_SCOPE, None, gate.memory_default, limit)
        return [PortraitFact(r["id"], r["text"], r["category"]) for r in rows]

    async def portrait_state(self, user_id: str, gate: ConsentGate) -> PortraitState:
        async with translated("reading a portrait's state"):
            row = await self._pool.fetchrow(self._portrait_sql["portrait_state"], user_id,
                                            gate.memory_default)
        return PortraitState(bool(row["memory_on"]), row["current"], row["facts_hash"],
                             row["latest"], row["wanted"])

    async def write_portrait(
        self, user_id: str, facts: Sequence[PortraitFact], *, text: str, model: str,
        prompt_version: str, limit: int, gate: ConsentGate,
    ) -> Portrait | None:
        sql = self._portrait_sql
        ids = sorted(f.id for f in facts)
        async with translated("writing a portrait"), self._pool.acquire() as conn, \
                conn.transaction():
            await conn.execute(sql["lock_user_shared"], user_id)
            await conn.execute(sql["lock_portrait"], user_id)
            due = await conn.fetchval(sql["portrait_still_due"], user_id, ids,
                                      gate.memory_default, PORTRAIT_SCOPE, None, limit)
            if not due or not ids:
                return None
            await conn.execute(sql["supersede_portrait"], user_id)
            row = await conn.fetchrow(sql["insert_portrait"], user_id, text, facts_hash(facts),
                                      len(ids), model, prompt_version)
        return _portrait(row)

    async def end_portrait(self, user_id: str, reason: RemovedReason) -> int | None:
        async with translated("ending a portrait"), self._pool.acquire() as conn, \
                conn.transaction():
            await conn.execute(self._portrait_sql["lock_portrait"], user_id)
            ended: int | None = await conn.fetchval(self._portrait_sql["remove_portrait"],
                                                    user_id, reason)
        return ended

    async def current_portrait(self, user_id: str,
                               gate: ConsentGate | None = None) -> Portrait | None:
        async with translated("reading a portrait"):
            row = await self._pool.fetchrow(
                self._portrait_sql["current_portrait"], user_id,
                None if gate is None else gate.memory_default)
        return None if row is None else _portrait(row)

    async def portrait_versions(self, user_id: str) -> list[Portrait]:
        async with translated("reading portraits"):
            rows = await self._pool.fetch(self._portrait_sql["portrait_versions"], user_id)
        return [_portrait(r) for r in rows]

    async def remove_portrait(self, user_id: str) -> int | None:
        sql = self._portrait_sql
        async with translated("removing a portrait"), self._pool.acquire() as conn, \
                conn.transaction():
            await conn.execute(sql["lock_portrait"], user_id)
            await conn.execute(sql["set_portrait_wanted"], user_id, False)
            ended: int | None = await conn.fetchval(sql["remove_portrait"], user_id, "user")
        return ended

    async def want_portrait(self, user_id: str) -> None:
        async with translated("asking for a portrait"):
            await self._pool.execute(self._portrait_sql["set_portrait_wanted"], user_id, True)

    async def _end_portrait_on(self, conn: Any, user_id: str, reason: RemovedReason) -> None:
        """Inside a caller's transaction under the user's exclusive lock (a consent switch)."""
        await conn.execute(self._portrait_sql["remove_portrait"], user_id, reason)
