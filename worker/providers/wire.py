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
MAX_NOTE_CHARS = 1000  # an extracted note's text (docs/notes.md)


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
    # Notes are asked for (docs/notes.md): the answer may carry ``notes`` beside its
    # facts. Absent, not false, when they are not, so such requests read as before.
    with_notes: bool = False

    @model_serializer(mode="wrap")
    def _without_absent_agent(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and data.get("agent") is None:
            data.pop("agent", None)
        if isinstance(data, dict) and not data.get("with_notes"):
            data.pop("with_notes", None)
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


# Free-form narrative context about the user that is not one short atomic fact
# ("considering a kitchen renovation, budget about $40k, timeline unclear"): kept beside
# the facts, never consolidated with them (docs/notes.md).
class ExtractedNote(_Frozen):
    text: str = Field(min_length=1, max_length=MAX_NOTE_CHARS)


class ExtractionAnswer(_Frozen):
    facts: tuple[ExtractedFact, ...]
    # Only when the request asked ``with_notes``; absent from a dump when empty, so an
    # answer without notes reads (and is served by the stub) as before.
    notes: tuple[ExtractedNote, ...] = ()

    @model_serializer(mode="wrap")
    def _without_empty_notes(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not data.get("notes"):
            data.pop("notes", None)
        return data


# The extraction answer's schema as sent when notes are not asked for: facts only, so
# the request is byte for byte the one without notes. Parsed as ExtractionAnswer. (A
# comment, not a docstring: a docstring would enter the schema as its description.)
class AskedExtraction(_Frozen):
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


class PromotionNote(_Frozen):
    text: str
    observed_at: str  # "2026-11-22"


class NotePromotionRequest(_Frozen):
    """The note promotion pass (docs/notes.md): similar notes of the user from several
    sessions, newest last, to be said as one lasting fact."""

    task: Literal["note_promotion"] = "note_promotion"
    observed_at: str
    notes: tuple[PromotionNote, ...]


class PromotedFact(_Frozen):
    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS)
    category: Category
    importance: int = Field(ge=MIN_IMPORTANCE, le=MAX_IMPORTANCE)


class NotePromotionAnswer(_Frozen):
    fact: PromotedFact
