"""The store interfaces: what the pipeline, the memory API and the operators'
commands need of storage.

``PipelineStore`` and ``MemoryStore`` are each implemented by ``PostgresStore``
(the real one) and ``InMemoryStore`` (unit tests of pure logic); tests/contract
runs the same tests against both. ``MaintenanceStore`` (the expiry pass, the
access export, re-embedding) by ``PostgresMaintenanceStore`` alone: its work is
transactions and snapshots, tested against PostgreSQL. Every operation on facts
takes the user id: one user's facts never reach another's request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol

from worker.memory_rules import MemoryScope
from worker.outcomes import DEAD_LETTERS
from worker.store.note_types import (
    NoteNeighbor,
    NoteRecord,
    NoteState,
    PromotableNote,
    Promotion,
    PromotionResult,
    RankedNote,
)
from worker.store.person_types import PersonLabel, PersonOrigin, PersonRecord, PersonStatus
from worker.store.types import (
    Acceptance,
    ActiveRows,
    ConsentGate,
    DeadLetter,
    Erasure,
    ExportSection,
    FactEdit,
    FactRecord,
    HeldOutcome,
    Neighbors,
    NewFact,
    ProposalState,
    RankedFact,
    ReadPlan,
    RowsToMove,
    RunCommit,
    RunRecord,
    SessionRead,
    Vector,
)


class PipelineStore(Protocol):
    """What one run of the job pipeline reads and writes."""

    async def load_session(self, user_id: str, session_id: str) -> SessionRead: ...

    async def neighbors(
        self, user_id: str, embeddings: Vector, k: int, *,
        agents: Sequence[str | None] | None = None, model: str | None = None,
        persons: Sequence[int | None] | None = None,
    ) -> Neighbors:
        """The user's version and, per row of ``embeddings``, its top-k ACTIVE, unexpired
        facts of the same agent (``agents``, per row: None for a profile fact) and about
        the same person (``persons``, per row: None for the user), nearest
        first (cosine distance), read in one snapshot. Only rows embedded by ``model`` at
        the embeddings' dimension are ranked; ``other_model`` says when the user's facts
        are on another."""
        ...

    async def commit_run(self, commit: RunCommit) -> int:
        """Write the whole run atomically; return the audit row's id.

        Raises CursorFenced or UserVersionConflict when a compare-and-set loses,
        MemoryOptedOut when the user turned memory off since ``load_session``
        (unless the run is ``opted_out``), UserErased when the user was erased
        after the run's hand-over was made; nothing is written then.
        """
        ...

    async def record_run(self, run: RunRecord) -> int:
        """An audit row on its own, for runs that write no fact and move no cursor."""
        ...

    async def note_neighbors(
        self, user_id: str, session_id: str, embeddings: Vector, model: str,
    ) -> list[NoteNeighbor | None]:
        """Per row of ``embeddings``, the nearest ACTIVE note of the user's session
        ``session_id`` embedded by ``model`` at that dimension; None where there is none
        (docs/notes.md)."""
        ...

    async def known_persons(self, user_id: str) -> list[PersonRecord]:
        """The user's persons that are not merged into another, with their current
        label, by id (docs/persons.md): what a run attributes facts to."""
        ...


class PersonStore(Protocol):
    """What the memory API and the read path do on the people in a user's life
    (docs/persons.md). Every change is a write under the user's version; nothing is
    deleted but by an erase."""

    async def persons(self, user_id: str, *, include_merged: bool = False
                      ) -> list[PersonRecord]: ...

    async def person(self, user_id: str, person_id: int) -> PersonRecord | None: ...

    async def person_facts(
        self, user_id: str, *, person_id: int | None = None, limit: int = ...,
        consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        """Active, unexpired facts about the user's persons (one, or all), by person,
        then pinned, importance and id; none behind a closed ``consent_gate``."""
        ...

    async def create_person(self, user_id: str, label: PersonLabel,
                            origin: PersonOrigin = "user") -> PersonRecord: ...

    async def relabel_person(self, user_id: str, person_id: int, label: PersonLabel
                             ) -> tuple[PersonStatus, PersonRecord | None]: ...

    async def move_fact(self, user_id: str, fact_id: int, person_id: int | None
                        ) -> tuple[PersonStatus, FactRecord | None]: ...

    async def merge_persons(self, user_id: str, source_id: int, target_id: int
                            ) -> tuple[PersonStatus, PersonRecord | None]: ...


class MemoryStore(Protocol):
    """What the memory API and the read path do on one user's facts."""

    async def facts(
        self, user_id: str, *, include_superseded: bool = False, scope: MemoryScope = "both",
        agent_id: str | None = None, valid_at: datetime | None = None,
        known_at: datetime | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        """Active, unexpired facts of ``scope`` oldest observation first; with superseded
        ones, by id. ``scope``: profile facts, the relationship facts of ``agent_id``
        (none without one), both, or none; another agent's never. ``valid_at``: the
        rows true then, by what is known now; ``known_at``: the rows believed then
        (docs/memory_model.md, "Time"); one of the two, without include_superseded
        (ValueError otherwise). ``consent_gate``: none while the user's memory is off,
        read in the same statement (reads for a prompt)."""
        ...

    async def count_active(
        self, user_id: str, *, scope: MemoryScope = "both", agent_id: str | None = None,
        consent_gate: ConsentGate | None = None,
    ) -> int: ...

    async def newest_facts(
        self, user_id: str, limit: int, *, scope: MemoryScope = "both",
        agent_id: str | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        """The last ``limit`` of ``facts`` (active ones, oldest observation first)."""
        ...

    async def stable_facts(
        self, user_id: str, limit: int, *, scope: MemoryScope = "both",
        agent_id: str | None = None, consent_gate: ConsentGate | None = None,
    ) -> list[FactRecord]:
        """The first ``limit`` active facts of ``facts`` in the prompt's stable order:
        pinned first, then importance (highest first), then id (oldest first)."""
        ...

    async def read_plan(
        self, user_id: str, *, scope: MemoryScope = "both", agent_id: str | None = None,
        consent_gate: ConsentGate | None = None,
    ) -> ReadPlan:
        """``count_active`` and ``active_embedding`` at once (one round trip)."""
        ...

    async def stable_plan(
        self, user_id: str, limit: int, *, scope: MemoryScope = "both",
        agent_id: str | None = None, consent_gate: ConsentGate | None = None,
    ) -> tuple[list[FactRecord], ReadPlan]:
        """``stable_facts`` and ``read_plan`` at once (one round trip): the prompt
        split's read before its search."""
        ...

    async def get_fact(self, user_id: str, fact_id: int) -> FactRecord | None: ...

    async def active_embedding(self, user_id: str) -> tuple[str, int] | None:
        """The (model, dimension) the user's active facts are embedded with (most of
        them, should a move to another model be under way); None when they have none."""
        ...

    async def chain(self, user_id: str, fact_id: int) -> list[FactRecord]:
        """Every version of the fact, oldest first; empty when the user has no such fact."""
        ...

    async def search(
        self, user_id: str, embedding: Vector, words_query: str, k: int, *,
        scope: MemoryScope = "both", agent_id: str | None = None,
        valid_at: datetime | None = None, known_at: datetime | None = None,
        consent_gate: ConsentGate | None = None, exclude: Sequence[int] = (),
    ) -> list[RankedFact]:
        """Top-k facts by meaning and by words, with their rank in each list: of the
        rows ``facts`` returns for the same scope, agent, time and consent gate, less
        the ids of ``exclude`` (ranked as if they were not there; a read of now only:
        with a time, ValueError)."""
        ...

    async def add_fact(self, user_id: str, fact: NewFact, *,
                       if_memory_on: ConsentGate | None = None) -> FactRecord:
        """Insert a fact written by hand (source_kind 'manual'); bumps the user's version.
        With ``if_memory_on``, only while the user's memory is on behind that gate, read
        in the write's own transaction under the user's lock (a consent change is
        before it or after it): else MemoryOptedOut, nothing written."""
        ...

    async def remove_fact(self, user_id: str, fact_id: int) -> FactRecord | None:
        """Supersede an active fact with no successor; None when there is no such fact."""
        ...

    async def set_pinned(self, user_id: str, fact_id: int, pinned: bool) -> FactRecord | None:
        """Pin or unpin an active, unexpired fact; bumps the user's version. None when
        the user has no such active fact."""
        ...

    async def edit_fact(self, user_id: str, fact_id: int, edit: FactEdit) -> FactRecord | None:
        """Supersede the active, unexpired version ``fact_id`` with the user's ``edit`` (a
        manual fact of its scope, agent and pin, in its chain); bumps the user's version.
        None, with nothing written, when the user has no such active fact."""
        ...

    async def held_proposals(
        self, user_id: str, *, state: ProposalState = "open"
    ) -> list[dict[str, Any]]:
        """The changes consolidation proposed and did not apply (memory_held_proposal),
        open ones (not yet answered), answered ones or all, by id: id, fact_id, run_id,
        event, reason, text, session_id, proposed_at, resolution (accepted | dismissed |
        None), resolved_at, resolved_by, result_fact_id, and stale (open, and its fact
        is no longer the version it was held against)."""
        ...

    async def held_proposal(self, user_id: str, proposal_id: int) -> dict[str, Any] | None:
        """One of the user's held proposals, as ``held_proposals`` lists it."""
        ...

    async def accept_held(
        self, user_id: str, proposal_id: int, acceptance: Acceptance
    ) -> HeldOutcome:
        """Apply an open proposal if its fact is still the version it was held against:
        an UPDATE supersedes it with the proposed text, a DELETE ends it; the proposal is
        answered 'accepted'. One transaction under the user's version; otherwise
        nothing is written (status missing, resolved or stale)."""
        ...

    async def dismiss_held(
        self, user_id: str, proposal_id: int, resolved_by: str
    ) -> HeldOutcome:
        """Answer an open proposal 'dismissed'; no fact changes (status done, missing
        or resolved)."""
        ...

    async def erase_user(self, erasure: Erasure) -> dict[str, int]:
        """Delete everything stored about the user and fence their runs in flight;
        rows deleted per table. Recorded in memory_erasure without personal data."""
        ...

    async def set_consent(self, user_id: str, enabled: bool) -> None:
        """The user's memory flag; serialised with their commits in flight."""
        ...

    async def consent(self, user_id: str) -> bool | None:
        """The user's own choice; None: never made (the fleet's default applies)."""
        ...

    async def runs(
        self, user_id: str, *, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        """Audit rows of the user, or of one of their sessions, oldest first."""
        ...

    async def dead_letters(
        self, outcomes: Sequence[str] = DEAD_LETTERS, *, include_resolved: bool = False,
        limit: int | None = None, session: tuple[str, str] | None = None,
    ) -> list[DeadLetter]:
        """Dead letters whose latest run ended with one of ``outcomes``, newest first: the
        open ones, or every one with ``include_resolved`` (those naming no session
        too); of one (user id, session id) ``session`` alone when given."""
        ...

    # -- notes (docs/notes.md) ---------------------------------------------

    async def notes(
        self, user_id: str, *, state: NoteState = "active",
        consent_gate: ConsentGate | None = None,
    ) -> list[NoteRecord]:
        """The user's active notes, oldest observation first (none while memory is off,
        given ``consent_gate``), or every version by id (``state="all"``)."""
        ...

    async def notes_of_fact(self, user_id: str, fact_id: int) -> list[NoteRecord]:
        """The notes the promotion job made the fact from, by id."""
        ...

    async def remove_note(self, user_id: str, note_id: int) -> NoteRecord | None:
        """Supersede an active note as removed; None when the user has no such note."""
        ...

    async def search_notes(
        self, user_id: str, embedding: Vector, words_query: str, k: int, *,
        consent_gate: ConsentGate | None = None,
    ) -> list[RankedNote]:
        """Top-k active notes by meaning and by words, with their rank in each list."""
        ...


class ExportSnapshot(Protocol):
    """One user's rows, read in one read-only REPEATABLE READ snapshot."""

    async def consent(self) -> dict[str, Any] | None:
        """The user's own choice (``enabled``, ``updated_at``); None: never made."""
        ...

    def rows(self, section: ExportSection) -> AsyncIterator[dict[str, Any]]:
        """The section's rows, by id, fetched a batch at a time (bounded memory)."""
        ...


class MaintenanceStore(Protocol):
    """What the operators' passes over many users need: the expiry pass, the right of
    access's export, and `memfleet reembed`."""

    async def expire_batch(self, *, users: int, facts: int) -> int:
        """One transaction of the expiry pass: up to ``facts`` due facts of up to ``users``
        users no one else holds, superseded as expired; how many."""
        ...

    def export_snapshot(
        self, user_id: str, *, acquire_timeout_s: float | None = None
    ) -> AbstractAsyncContextManager[ExportSnapshot]:
        """The user's rows in one snapshot, on a connection held while it is open.
        StoreUnavailable when none comes within ``acquire_timeout_s`` (None: no bound)."""
        ...

    def claim_reembed(self, model: str, dim: int) -> AbstractAsyncContextManager[bool]:
        """Whether this process holds the move (False: another reembed runs); while it
        holds it, the move to ``model`` at ``dim`` is recorded as under way."""
        ...

    async def users_left(self, model: str, dim: int, limit: int) -> list[str]:
        """Up to ``limit`` users with active facts or notes on another model or dimension."""
        ...

    async def rows_to_move(self, user_id: str, model: str, dim: int) -> RowsToMove:
        """The user's active facts and notes still on another model, with their version."""
        ...

    async def move_user(
        self, user_id: str, version: int, ids: Sequence[int], embeddings: Vector, *,
        model: str, dim: int, note_ids: Sequence[int] = (), note_embeddings: Vector | None = None,
    ) -> bool:
        """Fact ``ids[i]`` re-embedded as ``embeddings[i]``, and note ``note_ids[i]`` as
        ``note_embeddings[i]``, in one transaction; False (and nothing written) when the
        user's facts changed since ``version``, or a note read has ended since."""
        ...

    async def finish_reembed(self, model: str, dim: int) -> ActiveRows | None:
        """Record the move finished (the fleet's model and dimension) and return the active
        facts and notes, all on ``model``; None, with nothing recorded, when rows are left."""
        ...


class NotePromotionStore(Protocol):
    """What the notes' promotion job needs (docs/notes.md): one pass at a time in the
    fleet, the users with notes to look at, and each promotion as one transaction."""

    def claim_pass(self) -> AbstractAsyncContextManager[bool]:
        """Whether this process runs the pass now (False: another process does)."""
        ...

    async def users_to_check(
        self, sessions: int, memory_default: bool, limit: int
    ) -> list[tuple[str, int]]:
        """Up to ``limit`` (user, newest active note id) pairs: memory on, active notes
        from ``sessions`` sessions or more, a note newer than the last look."""
        ...

    async def user_notes(
        self, user_id: str, model: str, dim: int, limit: int
    ) -> list[PromotableNote]:
        """The user's newest ``limit`` active notes of ``model`` at ``dim``, newest first."""
        ...

    async def nearest_facts(
        self, user_id: str, embeddings: Vector, model: str
    ) -> list[tuple[int, float] | None]:
        """Per row, the user's nearest active profile fact of ``model``: (id, distance)."""
        ...

    async def promote(
        self, user_id: str, promotion: Promotion, *, memory_default: bool
    ) -> PromotionResult | None:
        """Write the fact (or keep the covering one) and link every note of the cluster to
        it, in one transaction; None, with nothing written, when a note is no longer
        active, the covering fact is gone, or the user's memory is off."""
        ...

    async def mark_checked(self, user_id: str, newest_note: int) -> None:
        """The user was looked at up to ``newest_note``; nothing for an erased user."""
        ...
