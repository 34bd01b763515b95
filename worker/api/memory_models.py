"""Request and response bodies of the memory API.

A fact's JSON is FactRecord.to_json (the CLI prints the same); ``Fact`` is its
documented shape, less the user id, which the path already names.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from worker.api.fields import AgentId, CleanText
from worker.api.note_models import NoteHitBody
from worker.memory_rules import (
    MAX_IMPORTANCE,
    MIN_IMPORTANCE,
    Basis,
    Category,
    Scope,
    SourceKind,
    SupersededReason,
)
from worker.store.types import FactRecord, WrittenVia

MAX_FACT_CHARS = 2_000
MAX_QUERY_CHARS = 1_000
MAX_FACT_ID = 2**63 - 1  # bigint: a larger id can only be a miss, refused as bad input


def utc(value: datetime) -> datetime:
    """A time in UTC; one without a zone is taken as UTC. One that UTC cannot hold
    (an offset past the calendar's ends) is refused here rather than by the driver."""
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the time is out of range") from None


Moment = Annotated[datetime, AfterValidator(utc)]

# How a write through the API says it was made: by an application (the default), by
# the user on the memory panel, or by the assistant with the memory tools
# (worker/client/memory_tools.py, clients/typescript/src/tools.ts). Recorded as the
# fact's written_via; it changes nothing else about the fact.
Via = Literal["api", "panel", "tool"]
VIA_DESCRIPTION = ("How the fact was written: api (an application; the default), panel (the "
                   "user on the memory panel) or tool (the assistant with the memory tools). "
                   "Recorded as the fact's written_via, and nothing else.")


class Fact(BaseModel):
    model_config = ConfigDict(extra="ignore")  # user_id: the path's user

    id: int
    text: str
    category: Category
    importance: int = Field(ge=MIN_IMPORTANCE, le=MAX_IMPORTANCE)
    observed_at: datetime
    source_kind: SourceKind
    source_session_id: str | None
    superseded_at: datetime | None
    superseded_by: int | None
    created_at: datetime
    scope: Scope = Field(description="profile: for any agent; relationship: of agent_id only.")
    agent_id: str | None
    valid_from: datetime | None = Field(description="When it began to hold in the user's world.")
    valid_to: datetime | None = Field(description="When it stopped holding; null: open.")
    expires_at: datetime | None = Field(description="From then on reads skip it.")
    pinned: bool = Field(description="Set by the user: consolidation holds changes to it.")
    basis: Basis
    confidence: float = Field(ge=0, le=1)
    superseded_reason: SupersededReason | None
    embedding_model: str | None
    embedding_dim: int | None
    written_via: WrittenVia | None = Field(
        default=None, description="A manual fact's way in: api, panel, tool or cli; null for "
                                  "an extracted or imported fact, and for a manual one "
                                  "written before it was recorded.")
    person_id: int | None = Field(
        default=None, description="Who the fact is about: null, the user; else one of the "
                                  "user's persons (docs/persons.md).")

    @classmethod
    def of(cls, record: FactRecord) -> Fact:
        return cls.model_validate(record.to_json())


class CategoryGroup(BaseModel):
    category: Category
    facts: list[Fact]


class ActiveFacts(BaseModel):
    user_id: str
    count: int
    groups: list[CategoryGroup] = Field(
        description="One group per category that has facts; in each, pinned facts first, "
                    "then by importance, confidence, and the newest first."
    )


class NewFactBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: CleanText = Field(min_length=1, max_length=MAX_FACT_CHARS)
    category: Category = "general"
    importance: int = Field(default=5, ge=MIN_IMPORTANCE, le=MAX_IMPORTANCE)
    scope: Scope = Field(default="profile", description="relationship needs agent_id; "
                                                        "profile takes none.")
    agent_id: AgentId | None = None
    valid_from: Moment | None = Field(default=None, description="Default: now. Without a "
                                                                "zone: UTC.")
    valid_to: Moment | None = None
    expires_at: Moment | None = None
    pinned: bool = False
    via: Via = Field(default="api", description=VIA_DESCRIPTION)
    if_memory_on: bool = Field(
        default=False,
        description="Store it only while the user's memory is on, as the memory tools ask:"
                    " else 409 with error MemoryOff and nothing stored or embedded. Checked"
                    " again in the write's own transaction, so a consent change is before"
                    " the write or after it, never between the check and the write.")

    @model_validator(mode="after")
    def _consistent(self) -> NewFactBody:
        if self.scope == "relationship" and self.agent_id is None:
            raise ValueError("a relationship fact needs agent_id")
        if self.scope == "profile" and self.agent_id is not None:
            raise ValueError("a profile fact takes no agent_id")
        start = self.valid_from or datetime.now(UTC)
        if self.valid_to is not None and self.valid_to < start:
            raise ValueError("valid_to is before valid_from")
        return self


class HeldProposal(BaseModel):
    id: int
    fact_id: int | None = Field(description="The fact the change was for; null for an ADD.")
    run_id: int | None
    event: Literal["ADD", "UPDATE", "DELETE"]
    reason: Literal["pinned", "outranked", "undecided"] = Field(
        description="pinned: the user pinned the fact; outranked: an inferred change "
                    "against a more trusted fact; undecided: a new fact the model could "
                    "not say how to file (new, or a change of one it was shown), kept "
                    "for the user to add or dismiss.")
    text: str | None = Field(description="The proposed replacement, or the fact an ADD "
                                         "would add; null for a DELETE.")
    category: str | None = Field(default=None, description="An ADD's fact: its category.")
    importance: int | None = Field(default=None, description="An ADD's fact: its importance.")
    scope: str | None = Field(default=None, description="An ADD's fact: its scope.")
    agent_id: str | None = Field(default=None, description="An ADD's fact: its agent.")
    person_id: int | None = Field(
        default=None, description="An ADD's fact: who it is about; null, the user, else one "
                                  "of the user's persons (docs/persons.md), whose fact an "
                                  "accept writes. Null for an UPDATE or DELETE.")
    session_id: str | None
    proposed_at: datetime
    resolution: Literal["accepted", "dismissed"] | None = Field(
        default=None, description="The user's answer; null while the proposal is open.")
    resolved_at: datetime | None = None
    resolved_by: str | None = Field(
        default=None, description="Who answered: user (the user's own token) or "
                                  "key:<id> (a service key).")
    result_fact_id: int | None = Field(
        default=None, description="An accepted UPDATE or ADD: the fact it wrote.")


class Chain(BaseModel):
    fact_id: int
    versions: list[Fact] = Field(description="Every version of the fact, oldest first.")


class SearchHitBody(BaseModel):
    fact: Fact
    score: float = Field(description="Reciprocal Rank Fusion score (k = 60).")
    semantic_rank: int | None
    lexical_rank: int | None


class SearchResults(BaseModel):
    results: list[SearchHitBody]
    notes: list[NoteHitBody] = Field(
        default_factory=list,
        description="The user's notes for the query, each marked kind 'note', never mixed "
                    "into results: with MEMFLEET_NOTES_ENABLED and no valid_at or known_at "
                    "(docs/notes.md); otherwise empty.")


class KnownFacts(BaseModel):
    block: str = Field(description="The system-prompt block; empty when nothing is known.")
    count: int


class StableBlockBody(BaseModel):
    block: str = Field(description="The stable block: the cacheable part of the system "
                                   "prompt; empty when nothing is held.")
    version: str = Field(description="A hash of the block's bytes; the ETag, quoted.")
    count: int


class VolatileBlockBody(BaseModel):
    block: str = Field(description="The facts retrieved for this turn's message that the "
                                   "stable block lacks, re-ranked; empty without q.")
    count: int


class PromptBlocksBody(BaseModel):
    stable: StableBlockBody
    volatile: VolatileBlockBody


class Erased(BaseModel):
    user_id: str
    deleted: dict[str, int] = Field(
        description="What went, per table, with the sessions whose pending hand-over went "
                    "(handovers), and what the app's extensions held (the chat stand-in's "
                    "sessions, chat_sessions, where it is served).")


class Consent(BaseModel):
    enabled: bool = Field(description="Whether memfleet remembers the user now.")
    chosen: bool = Field(description="False: the user never chose; the fleet's default applies.")


class ConsentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled: bool
    forget: bool = Field(default=False, description="With enabled false: also erase "
                                                    "everything held about the user.")

    @model_validator(mode="after")
    def _forget_turns_off(self) -> ConsentBody:
        if self.forget and self.enabled:
            raise ValueError("forget goes with enabled: false")
        return self


class ConsentChanged(Consent):
    deleted: dict[str, int] | None = Field(
        default=None, description="With forget: what went, as DELETE /users/{user_id} says.")


class ExportConsent(BaseModel):
    enabled: bool
    chosen: bool
    updated_at: datetime | None


class ExportFact(BaseModel):
    id: int
    text: str
    category: str
    importance: int
    observed_at: datetime
    source_session_id: str | None
    source_kind: str
    superseded_at: datetime | None
    superseded_by: int | None
    run_id: int | None
    embedding_model: str
    created_at: datetime
    scope: str
    agent_id: str | None
    valid_from: datetime
    valid_to: datetime | None
    expires_at: datetime | None
    pinned: bool
    basis: str
    confidence: float
    superseded_reason: str | None
    embedding_dim: int | None
    written_via: str | None = None
    person_id: int | None = None


class ExportPersonLabel(BaseModel):
    id: int
    display_name: str | None
    relation: str | None
    aliases: list[str]
    set_by: str
    observed_at: datetime
    superseded_at: datetime | None
    superseded_by: int | None


class ExportPerson(BaseModel):
    id: int
    created_from: str
    source_session_id: str | None
    created_at: datetime
    merged_into: int | None
    merged_at: datetime | None
    labels: list[ExportPersonLabel] = Field(
        description="Every version of the person's name, relation and aliases, oldest first.")


class ExportSession(BaseModel):
    session_id: str
    processed_count: int
    user_turns_since_summary: int
    summary: str | None
    summary_updated_at: datetime | None
    updated_at: datetime


class ExportRun(BaseModel):
    id: int
    session_id: str | None
    outcome: str
    error: str | None
    slice_first_hash: str | None
    slice_last_hash: str | None
    slice_len: int
    candidates: int
    added: int
    updated: int
    deleted: int
    unchanged: int
    rejected: int
    held: int
    input_tokens: int
    output_tokens: int
    started_at: datetime
    finished_at: datetime


class ExportPortrait(BaseModel):
    version: int
    text: str
    facts_hash: str
    fact_count: int
    model: str
    prompt_version: str
    created_at: datetime
    superseded_at: datetime | None
    removed_at: datetime | None
    removed_reason: str | None
class ExportNote(BaseModel):
    id: int
    text: str
    observed_at: datetime
    source_session_id: str | None
    run_id: int | None
    created_at: datetime
    superseded_at: datetime | None
    superseded_by: int | None
    superseded_reason: str | None
    promoted_to: int | None
    embedding_model: str
    embedding_dim: int | None


class Export(BaseModel):
    """Everything memfleet holds about the user (worker/ops/access_export.py), streamed."""

    user_id: str
    exported_at: datetime
    consent: ExportConsent
    facts: list[ExportFact] = Field(description="Every row, active and superseded.")
    sessions: list[ExportSession]
    runs: list[ExportRun] = Field(description="The runs that read the user's sessions.")
    held_proposals: list[HeldProposal] = Field(
        description="Changes consolidation proposed and memfleet kept for the user.")
    persons: list[ExportPerson] = Field(
        default_factory=list,
        description="The people in the user's life (docs/persons.md), merged ones too.")
    portraits: list[ExportPortrait] = Field(
        default_factory=list, description="Every version of the user's portrait.")
    notes: list[ExportNote] = Field(
        default_factory=list,
        description="Every note beside the facts, active and superseded (docs/notes.md).")
