"""The user's corrections in the in-memory store (InMemoryStore's edit_fact,
held_proposals, held_proposal, accept_held, dismiss_held), as
worker/store/corrections.py and worker/store/sql/corrections.sql do them on PostgreSQL;
tests/contract runs both."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

from worker.store import visibility
from worker.store.types import (
    Acceptance,
    FactEdit,
    FactRecord,
    FactTerms,
    HeldOutcome,
    ProposalState,
    Vector,
)

_ANSWER = ("resolution", "resolved_at", "resolved_by", "result_fact_id")
# An addition's own fact, and whom it is about (None: the user).
_ADDITION = ("category", "importance", "scope", "agent_id", "person_id")


class _Host(Protocol):
    """What the mixin needs of InMemoryStore."""

    rows: dict[int, Any]
    held: list[dict[str, Any]]
    versions: dict[str, int]

    def _insert(self, user_id: str, text: str, category: str, importance: int,
                embedding: Vector, observed_at: datetime, session_id: str | None,
                kind: str, *, terms: FactTerms = ..., model: str = "",
                pinned: bool = False, via: str | None = None,
                person_id: int | None = None) -> int: ...


def _current(host: _Host, user_id: str, fact_id: int) -> FactRecord | None:
    """The user's fact if it is the active, unexpired version."""
    row = host.rows.get(fact_id)
    if row is None or row.fact.user_id != user_id:
        return None
    fact: FactRecord = row.fact
    return fact if visibility.active(fact, datetime.now(UTC)) else None


def _listed(host: _Host, user_id: str, held: dict[str, Any]) -> dict[str, Any]:
    shown = {k: v for k, v in held.items() if k != "user_id"}
    for key in (*_ANSWER, *_ADDITION):
        shown.setdefault(key, None)
    # An addition was held against no fact: it is never stale.
    shown["stale"] = shown["resolution"] is None and held["fact_id"] is not None and _current(
        host, user_id, held["fact_id"]) is None
    return shown


def _own(host: _Host, user_id: str, proposal_id: int) -> dict[str, Any] | None:
    return next((h for h in host.held if h["user_id"] == user_id and h["id"] == proposal_id),
                None)


def _succeed(host: _Host, old: FactRecord, new_id: int) -> None:
    """End ``old`` where its successor begins (supersede_version of
    worker/store/sql/corrections.sql)."""
    new = host.rows[new_id].fact
    end = max(old.valid_from or old.observed_at, new.valid_from or new.observed_at)
    valid_to = end if old.valid_to is None else min(old.valid_to, end)
    host.rows[old.id].fact = replace(old, superseded_at=new.observed_at, superseded_by=new_id,
                                     superseded_reason="updated", valid_to=valid_to)


class InMemoryCorrections:
    __slots__ = ()

    async def edit_fact(self: _Host, user_id: str, fact_id: int,
                        edit: FactEdit) -> FactRecord | None:
        old = _current(self, user_id, fact_id)
        if old is None:
            return None
        self.versions[user_id] = self.versions.get(user_id, 0) + 1
        terms = FactTerms(scope=old.scope, agent_id=old.agent_id, valid_from=edit.valid_from,
                          valid_to=edit.valid_to, expires_at=edit.expires_at, basis="stated",
                          confidence=edit.confidence)
        new_id = self._insert(user_id, edit.text, edit.category, edit.importance,
                              edit.embedding, datetime.now(UTC), None, "manual", terms=terms,
                              model=edit.embedding_model, pinned=old.pinned, via=edit.via)
        _succeed(self, old, new_id)
        fact: FactRecord = self.rows[new_id].fact
        return fact

    async def held_proposals(self: _Host, user_id: str, *,
                             state: ProposalState = "open") -> list[dict[str, Any]]:
        mine = [_listed(self, user_id, h) for h in self.held if h["user_id"] == user_id]
        return sorted((h for h in mine if state == "all"
                       or (h["resolution"] is None) == (state == "open")),
                      key=lambda h: int(h["id"]))

    async def held_proposal(self: _Host, user_id: str,
                            proposal_id: int) -> dict[str, Any] | None:
        held = _own(self, user_id, proposal_id)
        return None if held is None else _listed(self, user_id, held)

    async def accept_held(self: _Host, user_id: str, proposal_id: int,
                          acceptance: Acceptance) -> HeldOutcome:
        held = _own(self, user_id, proposal_id)
        if held is None:
            return HeldOutcome("missing")
        if held.get("resolution") is not None:
            return HeldOutcome("resolved", _listed(self, user_id, held))
        if held["event"] == "ADD":
            if acceptance.embedding is None:
                raise ValueError("accepting an addition needs the proposed text's embedding")
            self.versions[user_id] = self.versions.get(user_id, 0) + 1
            terms = FactTerms(scope=held["scope"], agent_id=held["agent_id"],
                              valid_from=held["proposed_at"], confidence=acceptance.confidence)
            # No merges here (PostgreSQL's alone): the person it was held for is current.
            added = self._insert(user_id, held["text"], held["category"], held["importance"],
                                 acceptance.embedding, datetime.now(UTC), held["session_id"],
                                 "extracted", terms=terms, model=acceptance.embedding_model,
                                 person_id=held.get("person_id"))
            held.update(resolution="accepted", resolved_at=datetime.now(UTC),
                        resolved_by=acceptance.resolved_by, result_fact_id=added)
            return HeldOutcome("done", _listed(self, user_id, held), self.rows[added].fact)
        old = _current(self, user_id, held["fact_id"])
        if old is None:
            return HeldOutcome("stale", _listed(self, user_id, held))
        self.versions[user_id] = self.versions.get(user_id, 0) + 1
        result: int | None = None
        if held["event"] == "UPDATE":
            if acceptance.embedding is None:
                raise ValueError("accepting an UPDATE needs the proposed text's embedding")
            terms = FactTerms(scope=old.scope, agent_id=old.agent_id,
                              valid_from=held["proposed_at"], confidence=acceptance.confidence)
            result = self._insert(user_id, held["text"], old.category, old.importance,
                                  acceptance.embedding, datetime.now(UTC), held["session_id"],
                                  "extracted", terms=terms, model=acceptance.embedding_model,
                                  pinned=old.pinned)
            _succeed(self, old, result)
            fact = self.rows[result].fact
        else:
            end = max(old.valid_from or old.observed_at, held["proposed_at"])
            fact = replace(old, superseded_at=datetime.now(UTC), superseded_reason="deleted",
                           valid_to=end if old.valid_to is None else min(old.valid_to, end))
            self.rows[old.id].fact = fact
        held.update(resolution="accepted", resolved_at=datetime.now(UTC),
                    resolved_by=acceptance.resolved_by, result_fact_id=result)
        return HeldOutcome("done", _listed(self, user_id, held), fact)

    async def dismiss_held(self: _Host, user_id: str, proposal_id: int,
                           resolved_by: str) -> HeldOutcome:
        held = _own(self, user_id, proposal_id)
        if held is None:
            return HeldOutcome("missing")
        if held.get("resolution") is not None:
            return HeldOutcome("resolved", _listed(self, user_id, held))
        held.update(resolution="dismissed", resolved_at=datetime.now(UTC),
                    resolved_by=resolved_by, result_fact_id=None)
        return HeldOutcome("done", _listed(self, user_id, held))
