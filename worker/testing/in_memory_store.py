"""InMemoryStore: both store interfaces in plain Python, for unit tests of pure logic.

It keeps the PostgreSQL store's contract (tests/contract runs the same tests
against both): the same compare-and-sets, supersession instead of deletion,
everything scoped by user. Embeddings are rounded to half precision as the
halfvec column rounds them. Not for production: nothing is durable, and one
event loop's tasks are its only concurrency.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np

from worker.errors import (
    CursorFenced,
    MemoryOptedOut,
    StoreError,
    UserErased,
    UserVersionConflict,
)
from worker.memory_rules import MemoryScope
from worker.outcomes import DEAD_LETTERS, Outcome
from worker.store import visibility
from worker.store.types import (
    PROFILE,
    ConsentGate,
    CursorState,
    DeadLetter,
    Erasure,
    ExistingRow,
    FactRecord,
    FactRef,
    FactTerms,
    HoldProposal,
    InsertFact,
    NeighborRow,
    Neighbors,
    NewFact,
    RankedFact,
    RunCommit,
    RunRecord,
    SessionRead,
    Vector,
)
from worker.store.visibility import check_exclude, check_read
from worker.testing.in_memory_corrections import InMemoryCorrections
from worker.testing.in_memory_dead_letters import dead_letters_of
from worker.testing.in_memory_notes import InMemoryNotes, NoteRow
from worker.testing.in_memory_persons import InMemoryPersons
from worker.testing.in_memory_reads import InMemoryDerivedReads

_WORD = re.compile(r"\w+")


@dataclass(slots=True)
class _Row:
    fact: FactRecord
    embedding: Vector  # float32 of the half-precision values, unit length or not


@dataclass(slots=True)
class InMemoryStore(InMemoryPersons, InMemoryCorrections, InMemoryDerivedReads,
                    InMemoryNotes):
    cursors: dict[tuple[str, str], CursorState] = field(default_factory=dict)  # (user, session)
    versions: dict[str, int] = field(default_factory=dict)
    consents: dict[str, bool] = field(default_factory=dict)
    fences: dict[str, int] = field(default_factory=dict)  # user -> erased hand-over number
    erasures: list[dict[str, int]] = field(default_factory=list)
    rows: dict[int, _Row] = field(default_factory=dict)
    run_rows: list[dict[str, Any]] = field(default_factory=list)
    held: list[dict[str, Any]] = field(default_factory=list)  # memory_held_proposal
    note_rows: dict[int, NoteRow] = field(default_factory=dict)  # memory_note
    _next_fact: int = 1
    _next_note: int = 1
    _next_held: int = 0

    # -- the pipeline (PipelineStore) --------------------------------------

    async def load_session(self, user_id: str, session_id: str) -> SessionRead:
        return SessionRead(self.cursors.get((user_id, session_id)), self.consents.get(user_id))

    async def neighbors(
        self, user_id: str, embeddings: Vector, k: int, *,
        agents: Sequence[str | None] | None = None, model: str | None = None,
        persons: Sequence[int | None] | None = None,
    ) -> Neighbors:
        now = datetime.now(UTC)
        active = [row for row in self.rows.values()
                  if row.fact.user_id == user_id and visibility.active(row.fact, now)]
        dim = int(embeddings.shape[1]) if len(embeddings) else 0

        def ours(fact: FactRecord) -> bool:
            return fact.embedding_dim == dim and model in (None, fact.embedding_model)

        other = next(((r.fact.embedding_model or "", r.fact.embedding_dim or 0) for r in active
                      if not ours(r.fact)), None)
        same = [r for r in active if ours(r.fact)]
        result: list[list[NeighborRow]] = []
        for i, query in enumerate(_half(embeddings) if len(embeddings) else []):
            agent = agents[i] if agents is not None else None
            person = persons[i] if persons is not None else None
            ranked = sorted(((_distance(query, r.embedding), r.fact.id, r) for r in same
                             if r.fact.agent_id == agent and r.fact.person_id == person),
                            key=lambda t: (t[0], t[1]))[:k]
            result.append([NeighborRow(r.fact.id, r.fact.text, r.fact.observed_at, d,
                                       r.fact.pinned, r.fact.confidence)
                           for d, _, r in ranked])
        return Neighbors(self.versions.get(user_id, 0) if len(embeddings) else 0, result,
                         other if len(embeddings) else None)

    async def commit_run(self, commit: RunCommit) -> int:
        move, user = commit.cursor, commit.cursor.user_id
        fence_seq = move.handover_seq if move.fence_seq is None else move.fence_seq
        if self.fences.get(user, -1) >= fence_seq:
            raise UserErased(self.fences[user])
        if commit.run.outcome != Outcome.OPTED_OUT and self.consents.get(user) is False:
            raise MemoryOptedOut()
        current = self.cursors.get((user, move.session_id))
        if move.expected_version == 0:
            if current is not None:
                raise CursorFenced()
        elif (current is None or current.version != move.expected_version
              or current.user_id != user):
            raise CursorFenced()
        if commit.user_version is not None and self.versions.get(user, 0) != commit.user_version:
            raise UserVersionConflict()
        # Every check passes before anything is written: all or nothing, as one transaction.
        targets = [self._target(w.supersedes if isinstance(w, InsertFact) else w.target)
                   for w in commit.writes if not isinstance(w, HoldProposal)
                   and (not isinstance(w, InsertFact) or w.supersedes is not None)]
        for target in targets:
            if isinstance(target, int) and (not self._active(user, target)
                                            or self.rows[target].fact.pinned):
                raise UserVersionConflict()
        self.cursors[(user, move.session_id)] = _moved(current, move)
        if commit.user_version is not None:
            self.versions[user] = commit.user_version + 1
        run_id = self._insert_run(commit.run)
        new_ids: dict[int, int] = {}
        inserts = [w for w in commit.writes if isinstance(w, InsertFact)]
        additions = [w for w in commit.writes if isinstance(w, HoldProposal) and w.target is None]
        # Per new fact, then per held addition, as memfleet_commit_run's persons argument.
        refs = [w.terms.person for w in inserts] + [(w.terms or PROFILE).person
                                                    for w in additions]
        about = ([None] * len(refs) if commit.persons is None else self.write_persons(
            user, commit.persons, refs, commit.source_session_id, commit.observed_at))
        held_about = iter(about[len(inserts):])
        for insert, person_id in zip(inserts, about[:len(inserts)], strict=True):
            new_ids[insert.ref] = self._insert(
                user, insert.text, insert.category, insert.importance, insert.embedding,
                commit.observed_at, commit.source_session_id, "extracted",
                terms=insert.terms, model=commit.embedding_model, person_id=person_id)
        for write in commit.writes:
            if isinstance(write, HoldProposal):
                if write.target is None or write.target.id in self.rows:
                    self._next_held += 1  # never reused, as an identity column's
                    held = write.row()
                    self.held.append({**held, "id": self._next_held, "user_id": user,
                                      "run_id": run_id,
                                      "session_id": commit.source_session_id,
                                      "proposed_at": datetime.now(UTC),
                                      "person_id": None if write.target is not None
                                      else next(held_about)})
            elif isinstance(write, InsertFact):
                if write.supersedes is not None:
                    self._supersede(_resolve(write.supersedes, new_ids), commit.observed_at,
                                    new_ids[write.ref])
            else:
                self._supersede(_resolve(write.target, new_ids), commit.observed_at, None)
        self._next_note = self._commit_notes(user, commit.notes, observed_at=commit.observed_at,
                                             session_id=commit.source_session_id,
                                             first_id=self._next_note)
        return run_id

    async def record_run(self, run: RunRecord) -> int:
        return self._insert_run(run)

    # -- reading (MemoryStore) ---------------------------------------------

    async def facts(
        self, user_id: str, *, include_superseded: bool = False, scope: MemoryScope = "both",
        agent_id: str | None = None, valid_at: datetime | None = None,
        known_at: datetime | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        check_read(scope, include_superseded=include_superseded, valid_at=valid_at,
                   known_at=known_at)
        if not visibility.consent_open(self.consents.get(user_id), consent_gate):
            return []
        facts = [r.fact for r in self.rows.values() if r.fact.user_id == user_id]
        if include_superseded:
            return sorted((f for f in facts if visibility.in_scope(f, scope, agent_id)),
                          key=lambda f: f.id)
        now = datetime.now(UTC)
        return sorted((f for f in facts if visibility.visible(
                           f, scope, agent_id, now, valid_at=valid_at, known_at=known_at)),
                      key=lambda f: (f.observed_at, f.id))

    async def get_fact(self, user_id: str, fact_id: int) -> FactRecord | None:
        row = self.rows.get(fact_id)
        return row.fact if row is not None and row.fact.user_id == user_id else None

    async def active_embedding(self, user_id: str) -> tuple[str, int] | None:
        pairs = [(r.fact.embedding_model or "", r.fact.embedding_dim or 0)
                 for r in self.rows.values()
                 if r.fact.user_id == user_id and r.fact.superseded_at is None]
        if not pairs:
            return None
        return min(set(pairs), key=lambda pair: (-pairs.count(pair), pair))

    async def search(
        self, user_id: str, embedding: Vector, words_query: str, k: int, *,
        scope: MemoryScope = "both", agent_id: str | None = None,
        valid_at: datetime | None = None, known_at: datetime | None = None,
        consent_gate: ConsentGate | None = None, exclude: Sequence[int] = (),
    ) -> list[RankedFact]:
        check_exclude(exclude, as_of=valid_at is not None or known_at is not None)
        visible = {f.id for f in await self.facts(user_id, scope=scope, agent_id=agent_id,
                                                  valid_at=valid_at, known_at=known_at,
                                                  consent_gate=consent_gate)}
        visible -= set(exclude)
        active = [self.rows[i] for i in sorted(visible)]
        query = _half(np.asarray(embedding, dtype=np.float32)[None, :])[0]
        semantic = sorted((r for r in active if r.fact.embedding_dim == len(query)),
                          key=lambda r: (_distance(query, r.embedding), r.fact.id))[:k]
        words = {w.lower() for w in _WORD.findall(words_query) if w.lower() != "or"}
        scored = [(len(words & set(_WORD.findall(r.fact.text.lower()))), r) for r in active]
        lexical = [r for score, r in sorted((t for t in scored if t[0]),
                                            key=lambda t: (-t[0], t[1].fact.id))][:k]
        sem_rank = {r.fact.id: i + 1 for i, r in enumerate(semantic)}
        lex_rank = {r.fact.id: i + 1 for i, r in enumerate(lexical)}
        return [RankedFact(self.rows[i].fact, sem_rank.get(i), lex_rank.get(i))
                for i in sorted(sem_rank.keys() | lex_rank.keys())]

    async def runs(
        self, user_id: str, *, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        return [r for r in self.run_rows if r["user_id"] == user_id
                and (session_id is None or r["session_id"] == session_id)]

    async def dead_letters(
        self, outcomes: Sequence[str] = DEAD_LETTERS, *, include_resolved: bool = False,
        limit: int | None = None, session: tuple[str, str] | None = None,
    ) -> list[DeadLetter]:
        return dead_letters_of(self.run_rows, outcomes, include_resolved=include_resolved,
                               limit=limit, session=session)

    # -- writing (MemoryStore) ---------------------------------------------

    async def add_fact(self, user_id: str, fact: NewFact, *,
                       if_memory_on: ConsentGate | None = None) -> FactRecord:
        if if_memory_on is not None and not visibility.consent_open(
                self.consents.get(user_id), if_memory_on):
            raise MemoryOptedOut()
        self.versions[user_id] = self.versions.get(user_id, 0) + 1
        fact_id = self._insert(user_id, fact.text, fact.category, fact.importance,
                               fact.embedding, datetime.now(UTC), None, "manual",
                               terms=fact.terms, model=fact.embedding_model,
                               pinned=fact.pinned, via=fact.via)
        return self.rows[fact_id].fact

    async def remove_fact(self, user_id: str, fact_id: int) -> FactRecord | None:
        if not self._active(user_id, fact_id):
            return None
        self.versions[user_id] = self.versions.get(user_id, 0) + 1
        self._supersede(fact_id, datetime.now(UTC), None, "removed")
        return self.rows[fact_id].fact

    async def set_pinned(self, user_id: str, fact_id: int, pinned: bool) -> FactRecord | None:
        row = self.rows.get(fact_id)
        if row is None or row.fact.user_id != user_id or not visibility.active(
                row.fact, datetime.now(UTC)):
            return None
        self.versions[user_id] = self.versions.get(user_id, 0) + 1
        row.fact = replace(row.fact, pinned=pinned)
        return row.fact

    async def erase_user(self, erasure: Erasure) -> dict[str, int]:
        user_id = erasure.user_id
        self.fences[user_id] = max(self.fences.get(user_id, -1), erasure.erased_seq)
        facts = [i for i, r in self.rows.items() if r.fact.user_id == user_id]
        cursors = [key for key in self.cursors if key[0] == user_id]
        kept = [r for r in self.run_rows if r["user_id"] != user_id]
        runs = len(self.run_rows) - len(kept)
        for fact_id in facts:
            del self.rows[fact_id]
        held = [h for h in self.held if h["user_id"] != user_id]
        proposals, self.held = len(self.held) - len(held), held
        self.run_rows = kept
        for key in cursors:
            del self.cursors[key]
        state = 1 if self.versions.pop(user_id, None) is not None else 0
        consent = 0
        if user_id in self.consents and (self.consents[user_id] or not erasure.keep_opt_out):
            del self.consents[user_id]
            consent = 1
        persons = self.erase_persons(user_id)
        notes = self._erase_notes(user_id)
        counts = {"memory_held_proposal": proposals, "memory_note": notes,
                  "memory_note_check": 0, "memory_fact": len(facts),
                  "memory_person_label": persons, "memory_person": persons,
                  "memory_run": runs,
                  "session_cursor": len(cursors), "user_memory_state": state,
                  "user_memory_consent": consent,
                  # It keeps no portraits (docs/portrait.md: PostgreSQL's alone).
                  "memory_portrait": 0, "user_portrait_choice": 0}
        self.erasures.append(counts)
        return counts

    async def set_consent(self, user_id: str, enabled: bool) -> None:
        self.consents[user_id] = enabled

    async def consent(self, user_id: str) -> bool | None:
        return self.consents.get(user_id)

    # -- internals ---------------------------------------------------------

    def people_count(self, user_id: str, consent_gate: ConsentGate | None) -> int:
        """ReadPlan.people: the user's active facts about their persons, behind the gate."""
        if not visibility.consent_open(self.consents.get(user_id), consent_gate):
            return 0
        now = datetime.now(UTC)
        return sum(1 for r in self.rows.values() if r.fact.user_id == user_id
                   and r.fact.person_id is not None and visibility.active(r.fact, now))

    def _active(self, user_id: str, fact_id: int) -> bool:
        row = self.rows.get(fact_id)
        return row is not None and row.fact.user_id == user_id and row.fact.superseded_at is None

    @staticmethod
    def _target(ref: FactRef | None) -> int | None:
        return ref.id if isinstance(ref, ExistingRow) else None

    def _insert(self, user_id: str, text: str, category: str, importance: int,
                embedding: Vector, observed_at: datetime, session_id: str | None,
                kind: str, *, terms: FactTerms = PROFILE, model: str = "",
                pinned: bool = False, via: str | None = None,
                person_id: int | None = None) -> int:
        fact_id, self._next_fact = self._next_fact, self._next_fact + 1
        fact = FactRecord(
            id=fact_id, user_id=user_id, text=text, category=category, importance=importance,
            observed_at=observed_at, source_session_id=session_id, source_kind=kind,
            superseded_at=None, superseded_by=None, created_at=datetime.now(UTC),
            scope=terms.scope, agent_id=terms.agent_id,
            valid_from=terms.valid_from or observed_at, valid_to=terms.valid_to,
            expires_at=terms.expires_at, pinned=pinned, basis=terms.basis,
            confidence=terms.confidence, embedding_model=model,
            embedding_dim=int(np.asarray(embedding).shape[-1]), written_via=via,
            person_id=person_id,
        )
        vector = _half(np.asarray(embedding, dtype=np.float32)[None, :])[0]
        self.rows[fact_id] = _Row(fact, vector)
        return fact_id

    def _supersede(self, fact_id: int, at: datetime, successor: int | None,
                   reason: str | None = None) -> None:
        """As memfleet_commit_run: the validity ends where the successor's begins."""
        row = self.rows[fact_id]
        old = row.fact
        end = self.rows[successor].fact.valid_from if successor is not None else at
        valid_from = old.valid_from or old.observed_at
        valid_to = old.valid_to if reason == "removed" else (old.valid_to
                                                             or max(valid_from, end or at))
        row.fact = replace(old, superseded_at=at, superseded_by=successor, valid_to=valid_to,
                           superseded_reason=reason or ("updated" if successor else "deleted"))

    def _insert_run(self, run: RunRecord) -> int:
        row = {f.name: getattr(run, f.name) for f in dataclasses.fields(run)}
        seq = row.pop("handover_seq")  # not a column
        if run.user_id is None and run.session_id is not None:
            # memory_run_owner_check: a row names a session only with its user.
            raise StoreError("recording the run failed: CheckViolationError")
        if run.user_id is not None and self.fences.get(run.user_id, -1) >= seq:
            row.update(user_id=None, session_id=None)
        row.update(id=len(self.run_rows) + 1, finished_at=datetime.now(UTC))
        self.run_rows.append(row)
        return int(row["id"])


def _resolve(ref: FactRef, new_ids: dict[int, int]) -> int:
    return ref.id if isinstance(ref, ExistingRow) else new_ids[ref.ref]


def _moved(current: CursorState | None, move: Any) -> CursorState:
    """The cursor after ``move``, as memfleet_commit_run computes it."""
    summarised = move.summary is not None
    turns = (0 if summarised
             else (current.user_turns_since_summary if current else 0) + move.user_turns)
    return CursorState(
        session_id=move.session_id, user_id=move.user_id,
        version=current.version + 1 if current else 1, last_hash=move.last_hash,
        window_hash=move.window_hash, position=move.position,
        processed_count=(current.processed_count if current else 0) + move.processed,
        user_turns_since_summary=turns,
        summary=move.summary if summarised else (current.summary if current else None),
        handover_seq=max(move.handover_seq, current.handover_seq if current else 0),
    )


def _half(matrix: Vector) -> Vector:
    return np.asarray(matrix, dtype=np.float32).astype(np.float16).astype(np.float32)


def _distance(a: Vector, b: Vector) -> float:
    """pgvector's cosine distance."""
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return 1.0 - float(a @ b) / norm if norm else 1.0
