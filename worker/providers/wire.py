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
    field_validator,
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


class KnownPerson(_Frozen):
    """A person of the user's that memory knows already (docs/persons.md): how the
    extraction can tell "Ana" and "my sister" are one, and say so in ``about``."""

    name: str | None
    relation: str | None
    aliases: tuple[str, ...] = ()


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
    # Persons on (MEMFLEET_PERSONS): the user's known persons, possibly none, and
    # each fact is then asked who it is about (ExtractedFact.about). Absent when
    # persons are off, so such a request reads as before.
    people: tuple[KnownPerson, ...] | None = None
    # Notes are asked for (docs/notes.md): the answer may carry ``notes`` beside its
    # facts. Absent, not false, when they are not, so such requests read as before.
    with_notes: bool = False

    @model_serializer(mode="wrap")
    def _without_absent_agent(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            for optional in ("agent", "people"):
                if data.get(optional) is None:
                    data.pop(optional, None)
            if not data.get("with_notes"):
                data.pop("with_notes", None)
        return data


# Neither a name nor a relation: someone the conversation does not make clear
# ("he", "my friend" among several); such a fact is kept by no one (docs/persons.md).
class AboutPerson(_Frozen):
    """The person a fact is about, when not the user: their name, their relation to
    the user, or both."""

    name: str | None = Field(default=None, max_length=100)
    relation: str | None = Field(default=None, max_length=40)


# One fact as the extraction answer was before persons: the shape asked for while
# persons are off (AskedExtraction). Its docstring is part of the schema sent, so it
# stays as it was.
class UserFact(_Frozen):
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


# A UserFact and who it is about (docs/persons.md); an endpoint that leaves
# ``about`` out means the user. The docstrings below are sent in the schema.
class ExtractedFact(UserFact):
    """One fact, and who it is about: "about" is null for the user."""

    about: AboutPerson | None = None

    @model_serializer(mode="wrap")
    def _without_the_user(self, handler: SerializerFunctionWrapHandler) -> Any:
        # A fact about the user dumps as it did before persons (the stub's answers).
        data = handler(self)
        if isinstance(data, dict) and data.get("about") is None:
            data.pop("about", None)
        return data

    @field_validator("about", mode="before")
    @classmethod
    def _name_alone(cls, value: Any) -> Any:
        # json_object mode: a small model writes the name alone ("about": "Ana").
        if isinstance(value, str):
            return {"name": value} if value.strip() else None
        return value


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


# The extraction answer's schemas as sent, each parsed as ExtractionAnswer. (No
# docstrings: a docstring would enter the schema as its description.) Persons off and
# notes off: without ``about`` and without ``notes``, as before either.
class AskedExtraction(_Frozen):
    facts: tuple[UserFact, ...]


# Persons on, notes off: who each fact is about, no notes (the schema persons sent).
class AskedAttributed(_Frozen):
    facts: tuple[ExtractedFact, ...]


# Persons off, notes on (docs/notes.md): the facts as before persons, and the notes.
class AskedWithNotes(_Frozen):
    facts: tuple[UserFact, ...]
    notes: tuple[ExtractedNote, ...] = ()


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


# ---------------------------------------------------------------- the user's portrait

MAX_PORTRAIT_CHARS = 2000  # a portrait's text; providers must answer within it
MAX_PORTRAIT_FACTS = 200  # the most facts one request carries
MAX_PORTRAIT_WORDS = 300  # the highest length a request may ask for
MIN_PORTRAIT_WORDS = 10  # the lowest


class ProfileFact(_Frozen):
    """One active profile fact a portrait is written from."""

    text: str
    category: Category


class PortraitRequest(_Frozen):
    """The ``user_portrait`` pass (docs/llm_wire.md, docs/portrait.md): a short narrative
    of the user from their active profile facts, and from nothing else."""

    task: Literal["user_portrait"] = "user_portrait"
    observed_at: str  # "2026-11-22 (Sunday)": the day it is written
    max_words: int = Field(ge=MIN_PORTRAIT_WORDS, le=MAX_PORTRAIT_WORDS)
    facts: tuple[ProfileFact, ...] = Field(min_length=1, max_length=MAX_PORTRAIT_FACTS)


class PortraitAnswer(_Frozen):
    portrait: str = Field(min_length=1, max_length=MAX_PORTRAIT_CHARS)
