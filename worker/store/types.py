"""The store's vocabulary: what it reads and what one commit writes.

The pipeline builds these; the store executes them. The store knows nothing
of stages, prompts or providers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from worker.outcomes import Outcome
from worker.store.note_types import InsertNote
from worker.store.person_types import PersonRef, PersonWrites
from worker.vectors import Vector as Vector  # re-exported: the store speaks in it


@dataclass(frozen=True, slots=True)
class CursorState:
    session_id: str
    user_id: str
    version: int
    last_hash: str
    window_hash: str
    position: int
    processed_count: int
    user_turns_since_summary: int
    summary: str | None
    handover_seq: int = 0  # the hand-over number of the list the cursor was last moved in


@dataclass(frozen=True, slots=True)
class SessionRead:
    """What a run reads first: the session's cursor and the user's consent."""

    cursor: CursorState | None  # None: no run of the session has committed yet
    memory_enabled: bool | None  # the user's own choice; None: the fleet's default


@dataclass(frozen=True, slots=True)
class ConsentGate:
    """A read that finds nothing while the user's memory is off: their own choice
    (user_memory_consent), else ``memory_default`` (MEMFLEET_MEMORY_DEFAULT), checked
    in the read's own statement. Reads that feed a model take one; the user's own
    view of what is kept (list, chain, export) does not."""

    memory_default: bool = True


@dataclass(frozen=True, slots=True)
class ReadPlan:
    """What a prompt's read needs before it searches, read together: how many facts
    ``count_active`` finds, and the (model, dimension) of ``active_embedding``."""

    active: int
    embedding: tuple[str, int] | None
    # Facts about the user's persons a people section would find (worker.read_persons);
    # None: not counted.
    people: int | None = None


@dataclass(frozen=True, slots=True)
class Erasure:
    """An erase in PostgreSQL: the user's rows go, and a fence against hand-overs
    numbered up to ``erased_seq`` (the Redis clock when the user's hand-overs were
    cleared) stays. Rows are found by user alone, never by session id."""

    user_id: str
    erased_seq: int
    keep_opt_out: bool = True  # a user who turned memory off stays off


@dataclass(frozen=True, slots=True)
class CursorAdvance:
    """Move the cursor from ``expected_version`` (0: no cursor yet) to a new position."""

    session_id: str
    user_id: str
    expected_version: int
    last_hash: str
    window_hash: str
    position: int
    processed: int
    user_turns: int
    summary: str | None = None  # a refreshed rolling summary, stored with the move
    handover_seq: int = 0  # the hand-over number of the list the slice came from
    # What the erase fence is compared with (worker.protocol.payload.Snapshot.fence_seq);
    # None: handover_seq.
    fence_seq: int | None = None


@dataclass(frozen=True, slots=True)
class NeighborRow:
    id: int
    text: str
    observed_at: datetime
    distance: float
    pinned: bool = False
    confidence: float = 0.9


@dataclass(frozen=True, slots=True)
class Neighbors:
    """What the neighbour query read, in one snapshot."""

    version: int  # the user's version
    rows: list[list[NeighborRow]]  # per candidate, nearest first
    # The (model, dimension) the user's active facts are on when it is not the one
    # asked with (a re-embed moved them): embed the candidates again with it.
    other_model: tuple[str, int] | None = None


@dataclass(frozen=True, slots=True)
class ExistingRow:
    id: int


@dataclass(frozen=True, slots=True)
class NewRow:
    """A row inserted earlier in the same commit, by its position in ``writes``."""

    ref: int


FactRef = ExistingRow | NewRow


@dataclass(frozen=True, slots=True)
class FactTerms:
    """What a fact says beyond its text: scope, valid time, lifetime and trust."""

    scope: str = "profile"  # profile | relationship
    agent_id: str | None = None  # set exactly for relationship facts
    valid_from: datetime | None = None  # None: from when it was observed
    valid_to: datetime | None = None
    expires_at: datetime | None = None
    basis: str = "stated"  # stated | inferred
    confidence: float = 0.9
    # Who the fact is about: None, the user; else one of the user's persons
    # (docs/persons.md).
    person: PersonRef | None = None


PROFILE = FactTerms()


@dataclass(frozen=True, slots=True)
class InsertFact:
    ref: int
    text: str
    category: str
    importance: int
    embedding: Vector
    supersedes: FactRef | None = None
    terms: FactTerms = PROFILE


@dataclass(frozen=True, slots=True)
class SupersedeFact:
    target: FactRef


@dataclass(frozen=True, slots=True)
class HoldProposal:
    """A change consolidation proposed and memfleet keeps for the user instead of
    applying: to a pinned fact, or an inferred one against a fact the user stated;
    or a candidate consolidation could not decide about, held as an addition
    (``target`` None, event ADD, reason undecided) with what its fact would be; its
    ``terms.person`` is who the fact is about (the commit's persons argument names
    them, not ``row()``)."""

    target: ExistingRow | None
    event: str  # ADD | UPDATE | DELETE
    reason: str  # pinned | outranked | undecided
    text: str | None = None
    # An addition only: the fact an accept writes.
    category: str | None = None
    importance: int | None = None
    terms: FactTerms | None = None

    def row(self) -> dict[str, Any]:
        """The proposal's columns as memfleet_commit_run reads them (an addition: no
        fact_id, and the fact's category, importance, scope and agent)."""
        terms = self.terms or PROFILE
        adding = self.target is None
        return {"fact_id": None if self.target is None else self.target.id,
                "event": self.event, "reason": self.reason, "text": self.text,
                "category": self.category if adding else None,
                "importance": self.importance if adding else None,
                "scope": terms.scope if adding else None,
                "agent_id": terms.agent_id if adding else None}


Write = InsertFact | SupersedeFact | HoldProposal


@dataclass(frozen=True, slots=True)
class RunRecord:
    """The audit row of one run."""

    job_id: str
    job_try: int
    session_id: str | None
    user_id: str | None
    outcome: Outcome
    started_at: datetime
    error: str | None = None
    slice_first_hash: str | None = None
    slice_last_hash: str | None = None
    slice_len: int = 0
    candidates: int = 0
    added: int = 0
    updated: int = 0
    deleted: int = 0
    unchanged: int = 0
    rejected: int = 0
    consolidation_attempts: int = 0
    held: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    timings_ms: dict[str, float] = field(default_factory=dict)
    # Not a column: the number of the hand-over the run worked on (0: none read
    # yet). A row of a run whose hand-over an erase cleared keeps no user or
    # session id (memfleet_insert_run).
    handover_seq: int = 0


# open: nothing moved the session's cursor past it yet; resolved: a later run did;
# no_session: its run names no session (an unreadable job, or a run whose user an
# erase cleared), so nothing can resolve or re-drive it.
DeadLetterStatus = Literal["open", "resolved", "no_session"]


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One point where a session's memory stopped (`memfleet runs`): every run that
    tried the slice at that cursor and stored nothing, however it came (ARQ's tries,
    a job queued again, a re-drive, a later hand-over), counts once, here."""

    user_id: str | None
    session_id: str | None
    outcome: str  # the latest dead-letter run's (worker.outcomes.DEAD_LETTERS)
    error: str | None  # the latest dead-letter run's: never user content
    job_id: str
    job_try: int
    attempts: int  # the runs at this point that stored nothing (outcomes.ATTEMPTS)
    first_failed_at: datetime
    last_failed_at: datetime
    # The first run that moved the cursor past it (outcomes.CURSOR_MOVES); a skipped
    # slice is moved past by its own run.
    resolved_by: str | None = None
    resolved_at: datetime | None = None

    @property
    def status(self) -> DeadLetterStatus:
        if self.session_id is None:
            return "no_session"
        return "open" if self.resolved_by is None else "resolved"


@dataclass(frozen=True, slots=True)
class RunCommit:
    """Everything one run writes, in one transaction."""

    cursor: CursorAdvance
    user_version: int | None  # None: the run writes no fact, the user's version is not checked
    writes: tuple[Write, ...]
    observed_at: datetime
    embedding_model: str
    source_session_id: str
    run: RunRecord
    # The run's notes (docs/notes.md), written in the same transaction; none when notes
    # are off.
    notes: tuple[InsertNote, ...] = ()
    # The persons the run creates or relabels (docs/persons.md); None: persons are
    # off, and every new fact is about the user.
    persons: PersonWrites | None = None


@dataclass(frozen=True, slots=True)
class FactRecord:
    id: int
    user_id: str
    text: str
    category: str
    importance: int
    observed_at: datetime
    source_session_id: str | None
    source_kind: str
    superseded_at: datetime | None
    superseded_by: int | None
    created_at: datetime
    scope: str = "profile"
    agent_id: str | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    expires_at: datetime | None = None
    pinned: bool = False
    basis: str = "stated"
    confidence: float = 0.9
    superseded_reason: str | None = None
    embedding_model: str | None = None
    embedding_dim: int | None = None
    # How a manual fact was written (api | panel | tool | cli); None for an extracted
    # or imported fact, and for a manual one written before it was recorded.
    written_via: str | None = None
    # Who the fact is about: None, the user; else the id of one of the user's persons.
    person_id: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "user_id": self.user_id,
            "text": self.text,
            "category": self.category,
            "importance": self.importance,
            "observed_at": self.observed_at.isoformat(),
            "source_session_id": self.source_session_id,
            "source_kind": self.source_kind,
            "superseded_at": self.superseded_at.isoformat() if self.superseded_at else None,
            "superseded_by": self.superseded_by,
            "created_at": self.created_at.isoformat(),
            "scope": self.scope,
            "agent_id": self.agent_id,
            "valid_from": _iso(self.valid_from),
            "valid_to": _iso(self.valid_to),
            "expires_at": _iso(self.expires_at),
            "pinned": self.pinned,
            "basis": self.basis,
            "confidence": round(self.confidence, 4),
            "superseded_reason": self.superseded_reason,
            "embedding_model": self.embedding_model,
            "embedding_dim": self.embedding_dim,
            "written_via": self.written_via,
            "person_id": self.person_id,
        }


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


@dataclass(frozen=True, slots=True)
class RankedFact:
    """A search hit: the fact and its 1-based rank in each list (None: not in that list)."""

    fact: FactRecord
    semantic_rank: int | None
    lexical_rank: int | None


# How a manual fact was written: through the memory API by an application, on the
# panel by the user, by the assistant with the memory tools, or with the memfleet CLI.
WrittenVia = Literal["api", "panel", "tool", "cli"]
WRITTEN_VIA: tuple[WrittenVia, ...] = ("api", "panel", "tool", "cli")


@dataclass(frozen=True, slots=True)
class NewFact:
    """A fact written by hand through the memory API."""

    text: str
    category: str
    importance: int
    embedding: Vector  # one row of the embedder's matrix
    embedding_model: str
    terms: FactTerms = FactTerms(confidence=1.0)
    pinned: bool = False
    via: WrittenVia = "api"  # how it was written: recorded as its written_via


@dataclass(frozen=True, slots=True)
class FactEdit:
    """The user's new version of an active fact (the memory API's edit), whole: the
    caller merges what the user left out from the old version. Scope, agent and pin
    are the old version's, read in the write's own transaction."""

    text: str
    category: str
    importance: int
    embedding: Vector
    embedding_model: str
    valid_from: datetime
    valid_to: datetime | None
    expires_at: datetime | None
    confidence: float = 1.0  # a manual, stated fact's
    via: WrittenVia = "api"  # how the correction was written: the new version's written_via


@dataclass(frozen=True, slots=True)
class Acceptance:
    """The user accepts a held proposal. ``resolved_by``: 'user' or 'key:<id>'."""

    resolved_by: str
    embedding: Vector | None = None  # of the proposed text: an UPDATE's
    embedding_model: str = ""
    confidence: float = 0.9  # of the new version: stated in conversation, confirmed


# Which held proposals a read lists: the ones waiting for the user, or answered, or all.
ProposalState = Literal["open", "resolved", "all"]
# What became of an accept or a dismiss: done; no such proposal of the user; answered
# already; or (accept only) its fact is no longer the version it was held against.
HeldStatus = Literal["done", "missing", "resolved", "stale"]


@dataclass(frozen=True, slots=True)
class HeldOutcome:
    status: HeldStatus
    # The proposal as it stands after the call (None: missing): id, fact_id, run_id,
    # event, reason, text, session_id, proposed_at, resolution, resolved_at,
    # resolved_by, result_fact_id, stale.
    proposal: dict[str, Any] | None = None
    # An accepted UPDATE: the new version; an accepted DELETE: the version it ended.
    fact: FactRecord | None = None


# -- maintenance (worker.store.maintenance) -----------------------------------

# The lists of a user's access export, in the document's order (worker.ops.access_export).
ExportSection = Literal["facts", "sessions", "runs", "held_proposals", "persons", "portraits",
                        "notes"]
EXPORT_SECTIONS: tuple[ExportSection, ...] = ("facts", "sessions", "runs", "held_proposals",
                                              "persons", "portraits", "notes")


@dataclass(frozen=True, slots=True)
class RowsToMove:
    """A user's active facts and notes still on another model, read with their version
    in one snapshot (``memfleet reembed``)."""

    version: int
    ids: list[int]
    texts: list[str]
    note_ids: list[int] = field(default_factory=list)
    note_texts: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class ActiveRows:
    """The active rows at the end of a move, every one on its model (``memfleet reembed``)."""

    facts: int
    notes: int
