"""The LLM wire format (docs/llm_wire.md): what the passes send and may answer.

Every provider, the offline ``rules`` one included, speaks these models, so the
pipeline validates one shape whoever answered.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
)

from worker.memory_rules import CATEGORIES as CATEGORIES  # re-exported: the wire speaks them
from worker.memory_rules import MAX_IMPORTANCE, MIN_IMPORTANCE, Basis, Scope
from worker.memory_rules import Category as Category

Event = Literal["ADD", "UPDATE", "DELETE", "NONE"]
MAX_FACT_CHARS = 1000  # an extracted fact's text; providers must answer within it


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class WireMessage(_Frozen):
    role: str
    content: str


class ExtractionRequest(_Frozen):
    task: Literal["fact_extraction"] = "fact_extraction"
    observed_at: str  # "2026-11-22 (Sunday)"
    summary: str | None
    context: tuple[WireMessage, ...]
    messages: tuple[WireMessage, ...]
    # The agent (persona, assistant instance) the user talks with, when the chat
    # server named one: facts may then belong to that relationship. Absent, not
    # null, when there is none, so requests without agents read as before.
    agent: str | None = None

    @model_serializer(mode="wrap")
    def _without_absent_agent(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("agent") is None:
            data.pop("agent", None)
        return data


class ExtractedFact(_Frozen):
    """One fact. The fields after ``importance`` came with the memory model; an
    endpoint that leaves them out gets their defaults (a stated profile fact,
    valid from when it was said, not expiring)."""

    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS)
    category: Category
    importance: int = Field(ge=MIN_IMPORTANCE, le=MAX_IMPORTANCE)
    scope: Scope = "profile"
    basis: Basis = "stated"
    # Absolute dates, "YYYY-MM-DD" (or "YYYY-MM", "YYYY", or an ISO date-time);
    # anything else is read as unknown (worker.pipeline.extract.fact_terms).
    valid_from: str | None = Field(default=None, max_length=40)
    valid_to: str | None = Field(default=None, max_length=40)
    expires_at: str | None = Field(default=None, max_length=40)
    # The user asked to forget this: ``text`` is the fact to retract, not one to keep
    # (docs/memory_model.md, "Forget requests").
    forget: bool = False


class ExtractionAnswer(_Frozen):
    facts: tuple[ExtractedFact, ...]


class Neighbor(_Frozen):
    id: int
    text: str
    observed_at: str
    # Only when true: the user pinned it, changes to it are not applied.
    pinned: bool = False

    @model_serializer(mode="wrap")
    def _without_unpinned(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("pinned"):
            data.pop("pinned", None)
        return data


class Candidate(_Frozen):
    candidate: int
    text: str
    category: Category
    neighbors: tuple[Neighbor, ...]
    # Only when true: the user asked to forget this; its neighbours saying it are
    # to be retracted (DELETE), and it is never added.
    forget: bool = False

    @model_serializer(mode="wrap")
    def _without_keeping(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("forget"):
            data.pop("forget", None)
        return data


class ConsolidationRequest(_Frozen):
    task: Literal["memory_consolidation"] = "memory_consolidation"
    observed_at: str
    candidates: tuple[Candidate, ...]
    # Only in a second ask: what was wrong with the first answer, per candidate.
    corrections: tuple[str, ...] = ()

    @model_serializer(mode="wrap")
    def _without_empty_corrections(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("corrections"):
            data.pop("corrections", None)
        return data


class Decision(_Frozen):
    candidate: int
    event: Event
    target: int | None = None
    text: str | None = None


class ConsolidationAnswer(_Frozen):
    decisions: tuple[Decision, ...]


class AskedDecision(_Frozen):
    """A decision as the strict schema asks for it: no ``text``. Small models filled it
    with the neighbour's old text or a merge of two facts, which UPDATE then stored
    (issue 38); without it UPDATE stores the candidate, already one atomic fact. An
    endpoint that sends ``text`` anyway (json_object mode) is still read by Decision."""

    candidate: int
    event: Event
    target: int | None = None


class AskedConsolidation(_Frozen):
    """The consolidation answer's schema as sent (``response_format``); parsed as
    ConsolidationAnswer."""

    decisions: tuple[AskedDecision, ...]


class SummaryRequest(_Frozen):
    task: Literal["session_summary"] = "session_summary"
    observed_at: str
    previous_summary: str | None
    messages: tuple[WireMessage, ...]


class SummaryAnswer(_Frozen):
    summary: str = Field(max_length=4000)


# ---------------------------------------------------------------- the user's portrait

MAX_PORTRAIT_CHARS = 2000  # a portrait's text; providers must answer within it
MAX_PORTRAIT_FACTS = 200  # the most facts one request carries
MAX_PORTRAIT_WORDS = 300  # the highest length a request may ask for


class ProfileFact(_Frozen):
    """One active profile fact a portrait is written from."""

    text: str
    category: Category


class PortraitRequest(_Frozen):
    """The ``user_portrait`` pass (docs/llm_wire.md, docs/portrait.md): a short narrative
    of the user from their active profile facts, and from nothing else."""

    task: Literal["user_portrait"] = "user_portrait"
    observed_at: str  # "2026-11-22 (Sunday)": the day it is written
    max_words: int = Field(ge=10, le=MAX_PORTRAIT_WORDS)
    facts: tuple[ProfileFact, ...] = Field(min_length=1, max_length=MAX_PORTRAIT_FACTS)


class PortraitAnswer(_Frozen):
    portrait: str = Field(min_length=1, max_length=MAX_PORTRAIT_CHARS)
