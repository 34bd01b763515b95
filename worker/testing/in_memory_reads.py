"""The in-memory store's reads that follow from its others (count_active, newest_facts,
stable_facts, read_plan, stable_plan, chain), as a mixin of InMemoryStore: what PostgreSQL answers
in one statement each (worker/store/sql/facts.sql, memory_api.sql), here derived from
``facts``."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from worker.memory_rules import MemoryScope
from worker.store.types import ConsentGate, FactRecord, ReadPlan


class _Host(Protocol):
    """What the mixin needs of InMemoryStore."""

    async def facts(
        self, user_id: str, *, include_superseded: bool = False, scope: MemoryScope = "both",
        agent_id: str | None = None, valid_at: datetime | None = None,
        known_at: datetime | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]: ...

    async def get_fact(self, user_id: str, fact_id: int) -> FactRecord | None: ...

    async def active_embedding(self, user_id: str) -> tuple[str, int] | None: ...

    async def count_active(
        self, user_id: str, *, scope: MemoryScope = "both", agent_id: str | None = None,
        consent_gate: ConsentGate | None = None,
    ) -> int: ...


class _Stable(Protocol):
    """What stable_plan needs: the mixin's own two reads."""

    async def stable_facts(
        self, user_id: str, limit: int, *, scope: MemoryScope = "both",
        agent_id: str | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]: ...

    async def read_plan(
        self, user_id: str, *, scope: MemoryScope = "both", agent_id: str | None = None,
        consent_gate: ConsentGate | None = None,
    ) -> ReadPlan: ...


class InMemoryDerivedReads:
    __slots__ = ()

    async def count_active(
        self: _Host, user_id: str, *, scope: MemoryScope = "both", agent_id: str | None = None,
        consent_gate: ConsentGate | None = None,
    ) -> int:
        return len(await self.facts(user_id, scope=scope, agent_id=agent_id,
                                    consent_gate=consent_gate))

    async def newest_facts(
        self: _Host, user_id: str, limit: int, *, scope: MemoryScope = "both",
        agent_id: str | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        facts = await self.facts(user_id, scope=scope, agent_id=agent_id,
                                 consent_gate=consent_gate)
        return facts[-limit:] if limit >= 1 else []

    async def stable_facts(
        self: _Host, user_id: str, limit: int, *, scope: MemoryScope = "both",
        agent_id: str | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        facts = await self.facts(user_id, scope=scope, agent_id=agent_id,
                                 consent_gate=consent_gate)
        ordered = sorted(facts, key=lambda f: (not f.pinned, -f.importance, f.id))
        return ordered[:limit] if limit >= 1 else []

    async def stable_plan(
        self: _Stable, user_id: str, limit: int, *, scope: MemoryScope = "both",
        agent_id: str | None = None, consent_gate: ConsentGate | None = None,
    ) -> tuple[list[FactRecord], ReadPlan]:
        facts = await self.stable_facts(user_id, limit, scope=scope, agent_id=agent_id,
                                        consent_gate=consent_gate)
        return facts, await self.read_plan(user_id, scope=scope, agent_id=agent_id,
                                           consent_gate=consent_gate)

    async def read_plan(
        self: _Host, user_id: str, *, scope: MemoryScope = "both", agent_id: str | None = None,
        consent_gate: ConsentGate | None = None,
    ) -> ReadPlan:
        active = await self.count_active(user_id, scope=scope, agent_id=agent_id,
                                         consent_gate=consent_gate)
        return ReadPlan(active, await self.active_embedding(user_id))

    async def chain(self: _Host, user_id: str, fact_id: int) -> list[FactRecord]:
        if await self.get_fact(user_id, fact_id) is None:
            return []
        mine = {f.id: f for f in await self.facts(user_id, include_superseded=True,
                                                  scope="all")}
        found, todo = set(), [fact_id]
        while todo:
            at = todo.pop()
            if at in found or at not in mine:
                continue
            found.add(at)
            successor = mine[at].superseded_by
            todo += [successor] if successor is not None else []
            todo += [f.id for f in mine.values() if f.superseded_by == at]
        return [mine[i] for i in sorted(found)]
