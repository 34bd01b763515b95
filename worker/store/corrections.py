"""The user's corrections on PostgreSQL: a fact edited, a held proposal accepted or
dismissed (MemoryStore's edit_fact, held_proposals, held_proposal, accept_held,
dismiss_held; docs/memory_model.md, "The user's corrections").

An edit and an accept change facts, so each is one transaction under the
user-version compare-and-set (worker.store.versioned), like every other write
of a user's facts: a consolidation that read the old version re-reads, and a
write made on a view of a version that has since changed finds it inactive and
writes nothing. A dismiss changes no fact: it takes the proposal's row lock
alone, which an accept takes first too, so a proposal is answered once.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pgvector import HalfVector

from worker.store import queries
from worker.store.translate import translated
from worker.store.types import (
    Acceptance,
    FactEdit,
    FactRecord,
    HeldOutcome,
    HeldStatus,
    ProposalState,
)
from worker.store.versioned import RowMissing, VersionedWrites, fact_of


class _Refused(Exception):
    """An accept that cannot be done: rolls its transaction back."""

    def __init__(self, status: HeldStatus) -> None:
        super().__init__(status)
        self.status = status


def _sql(name: str) -> str:
    return queries.load("corrections")[name]


async def _new_version(
    conn: Any, user_id: str, old: Any, *, text: str, category: str, importance: int,
    embedding: Any, model: str, session_id: str | None, kind: str,
    valid_from: datetime, valid_to: datetime | None, expires_at: datetime | None,
    confidence: float, via: str | None = None,
) -> FactRecord:
    """Insert the successor of the locked version ``old`` and end ``old`` with it."""
    row = await conn.fetchrow(
        _sql("insert_version"), user_id, text, category, importance, HalfVector(embedding),
        model, datetime.now(UTC), session_id, kind, old["scope"], old["agent_id"],
        valid_from, valid_to, expires_at, old["pinned"], confidence, via, old["person_id"])
    if await conn.fetchval(_sql("supersede_version"), user_id, old["id"], row["id"]) is None:
        raise RowMissing  # cannot happen: ``old`` is locked and was active
    return fact_of(row)


async def _addition(conn: Any, user_id: str, proposal: Any, acceptance: Acceptance) -> FactRecord:
    """Insert the fact of an accepted addition (a candidate held as undecided), about
    the person it was held for (None: the user)."""
    if acceptance.embedding is None:
        raise ValueError("accepting an addition needs the proposed text's embedding")
    row = await conn.fetchrow(
        _sql("insert_addition"), user_id, proposal["text"], proposal["category"],
        proposal["importance"], HalfVector(acceptance.embedding), acceptance.embedding_model,
        proposal["proposed_at"], proposal["session_id"], proposal["scope"],
        proposal["agent_id"], acceptance.confidence, proposal["person_id"])
    return fact_of(row)


class PostgresCorrections(VersionedWrites):
    async def edit_fact(self, user_id: str, fact_id: int, edit: FactEdit) -> FactRecord | None:
        async def write(conn: Any) -> FactRecord:
            old = await conn.fetchrow(_sql("lock_active_fact"), user_id, fact_id)
            if old is None:
                raise RowMissing
            return await _new_version(
                conn, user_id, old, text=edit.text, category=edit.category,
                importance=edit.importance, embedding=edit.embedding,
                model=edit.embedding_model, session_id=None, kind="manual",
                valid_from=edit.valid_from, valid_to=edit.valid_to,
                expires_at=edit.expires_at, confidence=edit.confidence, via=edit.via)

        return await self._versioned("editing a fact", user_id, write)

    async def held_proposals(
        self, user_id: str, *, state: ProposalState = "open"
    ) -> list[dict[str, Any]]:
        async with translated("reading held proposals"):
            rows = await self._pool.fetch(_sql("held_proposals"), user_id, state)
        return [dict(row) for row in rows]

    async def held_proposal(self, user_id: str, proposal_id: int) -> dict[str, Any] | None:
        async with translated("reading a held proposal"):
            row = await self._pool.fetchrow(_sql("held_proposal"), user_id, proposal_id)
        return None if row is None else dict(row)

    async def accept_held(
        self, user_id: str, proposal_id: int, acceptance: Acceptance
    ) -> HeldOutcome:
        async def write(conn: Any) -> HeldOutcome:
            proposal = await conn.fetchrow(_sql("lock_proposal"), user_id, proposal_id)
            if proposal is None:
                raise _Refused("missing")
            if proposal["resolution"] is not None:
                raise _Refused("resolved")
            if proposal["event"] == "ADD":
                added = await _addition(conn, user_id, proposal, acceptance)
                await conn.fetchval(_sql("resolve_proposal"), user_id, proposal_id, "accepted",
                                    acceptance.resolved_by, added.id)
                return HeldOutcome("done", dict(await conn.fetchrow(
                    _sql("held_proposal"), user_id, proposal_id)), added)
            old = await conn.fetchrow(_sql("lock_active_fact"), user_id, proposal["fact_id"])
            if old is None:
                raise _Refused("stale")
            if proposal["event"] == "UPDATE":
                if acceptance.embedding is None:
                    raise ValueError("accepting an UPDATE needs the proposed text's embedding")
                fact = await _new_version(
                    conn, user_id, old, text=proposal["text"], category=old["category"],
                    importance=old["importance"], embedding=acceptance.embedding,
                    model=acceptance.embedding_model, session_id=proposal["session_id"],
                    kind="extracted", valid_from=proposal["proposed_at"], valid_to=None,
                    expires_at=None, confidence=acceptance.confidence)
                result: int | None = fact.id
            else:
                fact = fact_of(await conn.fetchrow(_sql("end_version"), user_id, old["id"],
                                                   proposal["proposed_at"]))
                result = None
            await conn.fetchval(_sql("resolve_proposal"), user_id, proposal_id, "accepted",
                                acceptance.resolved_by, result)
            return HeldOutcome("done", dict(await conn.fetchrow(
                _sql("held_proposal"), user_id, proposal_id)), fact)

        try:
            done = await self._versioned("accepting a held proposal", user_id, write)
        except _Refused as refused:
            return HeldOutcome(refused.status, await self.held_proposal(user_id, proposal_id))
        if done is None:  # the locked version was not there to end: cannot happen
            return HeldOutcome("stale", await self.held_proposal(user_id, proposal_id))
        return done

    async def dismiss_held(
        self, user_id: str, proposal_id: int, resolved_by: str
    ) -> HeldOutcome:
        async with translated("dismissing a held proposal"), self._pool.acquire() as conn, \
                conn.transaction():
            proposal = await conn.fetchrow(_sql("lock_proposal"), user_id, proposal_id)
            if proposal is None:
                return HeldOutcome("missing")
            if proposal["resolution"] is None:
                await conn.fetchval(_sql("resolve_proposal"), user_id, proposal_id,
                                    "dismissed", resolved_by, None)
            answered = dict(await conn.fetchrow(_sql("held_proposal"), user_id, proposal_id))
        return HeldOutcome("done" if proposal["resolution"] is None else "resolved", answered)
