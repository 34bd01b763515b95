"""A user's facts read back from PostgreSQL: MemoryStore's reads (facts, count_active,
newest_facts, stable_facts, read_plan, stable_plan, get_fact, active_embedding, chain,
search).

A mixin of ``PostgresStore`` (worker.store.postgres), its SQL in
worker/store/sql/facts.sql and memory_api.sql, which share the rules of which facts
a read sees (fact_rules.sql; worker.store.visibility checks a read's arguments).
Every statement names the user first, so a fact id of another user reads exactly
like an id that does not exist. A read for a prompt takes a consent gate, checked
in the read's own statement: nothing while the user's memory is off. Nothing here
writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg
from pgvector import HalfVector

from worker.memory_rules import MemoryScope
from worker.store import queries
from worker.store.pool import PooledStore
from worker.store.translate import translated
from worker.store.types import ConsentGate, FactRecord, RankedFact, ReadPlan, Vector
from worker.store.versioned import fact_of
from worker.store.visibility import check_exclude, check_read


def _facts_sql(name: str) -> str:
    return queries.load("facts")[name]


def _api_sql(name: str) -> str:
    return queries.load("memory_api")[name]


def _gate(consent_gate: ConsentGate | None) -> bool | None:
    # The SQL's gate parameter: NULL reads regardless of consent.
    return None if consent_gate is None else consent_gate.memory_default


class PostgresFactReads(PooledStore):
    async def facts(
        self, user_id: str, *, include_superseded: bool = False, scope: MemoryScope = "both",
        agent_id: str | None = None, valid_at: datetime | None = None,
        known_at: datetime | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        check_read(scope, include_superseded=include_superseded, valid_at=valid_at,
                   known_at=known_at)
        if scope == "none":
            return []
        extra: tuple[Any, ...] = ()
        if valid_at is not None or known_at is not None:
            name, extra = "facts_as_of", (valid_at, known_at)
        else:
            name = "all_facts" if include_superseded else "active_facts"
        async with translated("reading facts"):
            rows = await self._pool.fetch(_facts_sql(name), user_id, scope, agent_id, *extra,
                                          _gate(consent_gate))
        return [fact_of(row) for row in rows]

    async def count_active(
        self, user_id: str, *, scope: MemoryScope = "both", agent_id: str | None = None,
        consent_gate: ConsentGate | None = None,
    ) -> int:
        check_read(scope)
        if scope == "none":
            return 0
        async with translated("counting facts"):
            count: int = await self._pool.fetchval(_api_sql("count_active"), user_id, scope,
                                                   agent_id, _gate(consent_gate))
        return count

    async def newest_facts(
        self, user_id: str, limit: int, *, scope: MemoryScope = "both",
        agent_id: str | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        rows = await self._limited_facts("newest_active_facts", user_id, limit, scope,
                                         agent_id, consent_gate)
        return [fact_of(row) for row in reversed(rows)]

    async def stable_facts(
        self, user_id: str, limit: int, *, scope: MemoryScope = "both",
        agent_id: str | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        rows = await self._limited_facts("stable_active_facts", user_id, limit, scope,
                                         agent_id, consent_gate)
        return [fact_of(row) for row in rows]

    async def _limited_facts(self, query: str, user_id: str, limit: int, scope: MemoryScope,
                             agent_id: str | None,
                             consent_gate: ConsentGate | None) -> list[asyncpg.Record]:
        """The first ``limit`` active facts in ``query``'s order (facts.sql)."""
        check_read(scope)
        if scope == "none" or limit < 1:
            return []
        async with translated("reading facts"):
            rows: list[asyncpg.Record] = await self._pool.fetch(
                _facts_sql(query), user_id, scope, agent_id, _gate(consent_gate), limit)
        return rows

    async def read_plan(
        self, user_id: str, *, scope: MemoryScope = "both", agent_id: str | None = None,
        consent_gate: ConsentGate | None = None,
    ) -> ReadPlan:
        check_read(scope)
        async with translated("counting facts"):
            row = await self._pool.fetchrow(_api_sql("read_plan"), user_id, scope, agent_id,
                                            _gate(consent_gate))
        model = row["embedding_model"]
        # scope "none" matches no row: a count of 0.
        return ReadPlan(row["active"], None if model is None else (model, row["embedding_dim"]),
                        row["people"])

    async def stable_plan(
        self, user_id: str, limit: int, *, scope: MemoryScope = "both",
        agent_id: str | None = None, consent_gate: ConsentGate | None = None,
    ) -> tuple[list[FactRecord], ReadPlan]:
        check_read(scope)
        async with translated("reading facts"):
            rows = await self._pool.fetch(_api_sql("stable_plan"), user_id, scope, agent_id,
                                          _gate(consent_gate), max(0, limit))
        # scope "none" matches no row: a count of 0, no fact (one row, its columns NULL).
        first = rows[0]
        model = first["plan_model"]
        plan = ReadPlan(first["active"], None if model is None else (model, first["plan_dim"]),
                        first["people"])
        return [fact_of(row) for row in rows if row["id"] is not None], plan

    async def get_fact(self, user_id: str, fact_id: int) -> FactRecord | None:
        async with translated("reading a fact"):
            row = await self._pool.fetchrow(_api_sql("get_fact"), user_id, fact_id)
        return None if row is None else fact_of(row)

    async def active_embedding(self, user_id: str) -> tuple[str, int] | None:
        async with translated("reading the facts' model"):
            row = await self._pool.fetchrow(_api_sql("active_embedding"), user_id)
        return None if row is None else (row["embedding_model"], row["embedding_dim"])

    async def chain(self, user_id: str, fact_id: int) -> list[FactRecord]:
        async with translated("reading a chain"):
            rows = await self._pool.fetch(_api_sql("chain"), user_id, fact_id)
        return [fact_of(row) for row in rows]

    async def search(
        self, user_id: str, embedding: Vector, words_query: str, k: int, *,
        scope: MemoryScope = "both", agent_id: str | None = None,
        valid_at: datetime | None = None, known_at: datetime | None = None,
        consent_gate: ConsentGate | None = None, exclude: Sequence[int] = (),
    ) -> list[RankedFact]:
        """``words_query`` is websearch_to_tsquery syntax; an empty one matches nothing."""
        check_read(scope, valid_at=valid_at, known_at=known_at)
        as_of = valid_at is not None or known_at is not None
        check_exclude(exclude, as_of=as_of)
        if scope == "none":
            return []
        # The "as of" read takes no exclusion (check_exclude); the other its ids last.
        tail = (valid_at, known_at, _gate(consent_gate)) if as_of else (
            _gate(consent_gate), list(exclude))
        async with translated("searching facts"):
            rows = await self._pool.fetch(
                _api_sql("search_as_of" if as_of else "search"), user_id,
                HalfVector(embedding), words_query, k, len(embedding), scope, agent_id, *tail,
            )
        return [RankedFact(fact_of(r), r["semantic_rank"], r["lexical_rank"]) for r in rows]
