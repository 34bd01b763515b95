"""Request and response bodies of the user's corrections (worker.api.panel_routes)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from worker.api.fields import CleanText
from worker.api.memory_models import (
    MAX_FACT_CHARS,
    VIA_DESCRIPTION,
    Fact,
    HeldProposal,
    Moment,
    Via,
)
from worker.memory_rules import MAX_IMPORTANCE, MIN_IMPORTANCE, Category

# Fields an edit may leave out (the old version's then) but not set to null.
_NOT_NULL = ("category", "importance", "valid_from")


class FactEditBody(BaseModel):
    """A merge patch of the version (RFC 7396): a member left out keeps the old
    version's value; valid_to and expires_at set to null are cleared."""

    model_config = ConfigDict(extra="forbid")

    text: CleanText = Field(min_length=1, max_length=MAX_FACT_CHARS,
                            description="The user's words for the fact.")
    category: Category | None = None
    importance: int | None = Field(default=None, ge=MIN_IMPORTANCE, le=MAX_IMPORTANCE)
    valid_from: Moment | None = Field(
        default=None, description="Left out: the old version's, so the edit is a correction "
                                  "(the old text was never true); a later time says the "
                                  "fact changed then. Without a zone: UTC.")
    valid_to: Moment | None = None
    expires_at: Moment | None = None
    via: Via = Field(default="api", description=VIA_DESCRIPTION)

    @model_validator(mode="after")
    def _no_null_where_a_value_is_needed(self) -> FactEditBody:
        for name in _NOT_NULL:
            if name in self.model_fields_set and getattr(self, name) is None:
                raise ValueError(f"{name} cannot be null; leave it out to keep the old one")
        return self


class ListedProposal(HeldProposal):
    stale: bool = Field(description="Open, and its fact is no longer the version it was "
                                    "held against (edited, removed, expired or changed "
                                    "since): it can only be dismissed.")


class HeldProposals(BaseModel):
    proposals: list[ListedProposal] = Field(description="Oldest first.")


ProposalStateQuery = Literal["open", "resolved", "all"]


class HeldAnswer(BaseModel):
    proposal: ListedProposal = Field(description="The proposal with its answer.")
    fact: Fact | None = Field(
        description="Accepted: the new version (UPDATE), the new fact (ADD) or the version "
                    "it ended (DELETE); "
                    "null for a dismissal.")
