"""Request and response bodies of the memory API and the chat stand-in.

Limits here are constants, not settings, so the OpenAPI document is the same
whatever the deployment's environment (docs/openapi.json is checked against it).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from worker.store.types import FactRecord

Category = Literal["preference", "fact", "event", "relationship", "decision", "general"]
SourceKind = Literal["extracted", "manual", "backfill"]

MAX_FACT_CHARS = 2_000
MAX_QUERY_CHARS = 1_000
MAX_CONTENT_CHARS = 32_000  # the hand-over's default MEMFLEET_MAX_MESSAGE_CHARS
MAX_ID_CHARS = 256
MAX_FACT_ID = 2**63 - 1  # bigint: a larger id can only be a miss, refused as bad input

# C0 and C1 control characters other than tab, newline and carriage return: the
# same rule as the hand-over, so what the chat endpoint stores it can hand over.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def clean_text(value: str) -> str:
    """Refuse text PostgreSQL or the hand-over would refuse later (as 422, never 500)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("text is not valid UTF-8 (lone surrogate)") from None
    if _CONTROL.search(value):
        raise ValueError("text contains control characters")
    if not value.strip():
        raise ValueError("text is blank")
    return value


CleanText = Annotated[str, AfterValidator(clean_text)]


class ErrorBody(BaseModel):
    detail: str


class Fact(BaseModel):
    id: int
    text: str
    category: Category
    importance: int = Field(ge=1, le=10)
    observed_at: datetime
    source_kind: SourceKind
    source_session_id: str | None
    superseded_at: datetime | None
    superseded_by: int | None
    created_at: datetime

    @classmethod
    def of(cls, record: FactRecord) -> Fact:
        return cls(
            id=record.id, text=record.text, category=record.category,  # type: ignore[arg-type]
            importance=record.importance, observed_at=record.observed_at,
            source_kind=record.source_kind,  # type: ignore[arg-type]
            source_session_id=record.source_session_id, superseded_at=record.superseded_at,
            superseded_by=record.superseded_by, created_at=record.created_at,
        )


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
    importance: int = Field(default=5, ge=1, le=10)


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
    deleted: dict[str, int] = Field(description="Rows deleted, per table (and chat sessions).")


class ChatBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: CleanText = Field(min_length=1, max_length=MAX_CONTENT_CHARS)


class ChatReply(BaseModel):
    session_id: str
    answer: str
    handover: Literal["scheduled", "unavailable", "refused"] = Field(
        description="What became of the memory hand-over; the answer never waits for memory."
    )
    known_facts: int = Field(description="Facts the stand-in put in its prompt for this turn.")
