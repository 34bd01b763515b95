"""Request and response bodies of the memory API.

A fact's JSON is FactRecord.to_json (the CLI prints the same); ``Fact`` is its
documented shape, less the user id, which the path already names.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, model_validator

from api_stub.fields import CleanText
from worker.contract import MAX_IMPORTANCE, MIN_IMPORTANCE, Category, SourceKind
from worker.store.types import FactRecord

MAX_FACT_CHARS = 2_000
MAX_QUERY_CHARS = 1_000
MAX_FACT_ID = 2**63 - 1  # bigint: a larger id can only be a miss, refused as bad input


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
        description="One group per category that has facts; facts ordered by observed_at."
    )


class NewFactBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: CleanText = Field(min_length=1, max_length=MAX_FACT_CHARS)
    category: Category = "general"
    importance: int = Field(default=5, ge=MIN_IMPORTANCE, le=MAX_IMPORTANCE)


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


class KnownFacts(BaseModel):
    block: str = Field(description="The system-prompt block; empty when nothing is known.")
    count: int


class Erased(BaseModel):
    user_id: str
    deleted: dict[str, int] = Field(
        description="What went, per table, with the sessions whose pending hand-over went "
                    "(handovers) and the chat stand-in's sessions (chat_sessions).")


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
    input_tokens: int
    output_tokens: int
    started_at: datetime
    finished_at: datetime


class Export(BaseModel):
    """Everything memfleet holds about the user (worker/export.py), streamed."""

    user_id: str
    exported_at: datetime
    consent: ExportConsent
    facts: list[ExportFact] = Field(description="Every row, active and superseded.")
    sessions: list[ExportSession]
    runs: list[ExportRun] = Field(description="The runs that read the user's sessions.")
