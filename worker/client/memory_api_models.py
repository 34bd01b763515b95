"""What the memory API answers, as typed values (docs/api.md; the server's models are
worker/api/memory_models.py, panel_models.py and session_routes.py, which this module
mirrors without importing: a chat server installs no part of the API).

Each ``parse`` reads the API's JSON and ignores members it does not know, so that a
newer API adding fields (docs/memory_model.md) does not break an older client. An
answer missing a member or of another type raises KeyError, TypeError or ValueError,
which the client reports as a MemoryApiError naming the operation.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar, cast

from worker.memory_rules import Basis, Category, Scope, SourceKind, SupersededReason

if TYPE_CHECKING:
    from worker.client.memory_api_notes import NoteHit

__all__ = ["ActiveFacts", "CategoryGroup", "Chain", "Consent", "Erased", "Export", "Fact",
           "HandedOver", "HeldAnswer", "HeldProposal", "KnownFacts", "ProposalState",
           "ReadScope", "Readiness", "SearchHit", "SearchResults", "SessionStatus",
           "WaitOutcome"]

V = TypeVar("V")
ProposalState = Literal["open", "resolved", "all"]
# How a manual fact was written; a write through the API names api, panel or tool.
WrittenVia = Literal["api", "panel", "tool", "cli"]
Via = Literal["api", "panel", "tool"]
ReadScope = Literal["none", "profile", "relationship", "both", "all"]


def _time(value: Any) -> datetime:
    if not isinstance(value, str):
        raise TypeError("a time is not a string")
    return datetime.fromisoformat(value)


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("not an integer")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError("not a boolean")
    return value


def _float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("not a number")
    return float(value)


def _obj(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError("not a JSON object")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError("not a JSON list")
    return value


def _opt(read: Callable[[Any], V], value: Any) -> V | None:
    """``read(value)``, or None for a JSON null or a member left out."""
    return None if value is None else read(value)


def _counts(value: Any) -> dict[str, int]:
    return {_str(k): _int(v) for k, v in _obj(value).items()}


@dataclass(frozen=True, slots=True)
class Fact:
    """One version of a fact, as ``GET /users/{u}/facts`` lists it."""

    id: int
    text: str
    category: Category
    importance: int
    observed_at: datetime
    source_kind: SourceKind
    source_session_id: str | None
    superseded_at: datetime | None
    superseded_by: int | None
    created_at: datetime
    scope: Scope
    agent_id: str | None
    valid_from: datetime | None
    valid_to: datetime | None
    expires_at: datetime | None
    pinned: bool
    basis: Basis
    confidence: float
    superseded_reason: SupersededReason | None
    embedding_model: str | None
    embedding_dim: int | None
    # A manual fact's way in (api | panel | tool | cli); None for an extracted or
    # imported fact, a manual one written before it was recorded, or an older server.
    written_via: WrittenVia | None = None
    # Who it is about: None, the user (or an older server); else a person's id.
    person_id: int | None = None

    @classmethod
    def parse(cls, value: Any) -> Fact:
        d = _obj(value)
        return cls(
            id=_int(d["id"]), text=_str(d["text"]),
            category=cast(Category, _str(d["category"])), importance=_int(d["importance"]),
            observed_at=_time(d["observed_at"]),
            source_kind=cast(SourceKind, _str(d["source_kind"])),
            source_session_id=_opt(_str, d.get("source_session_id")),
            superseded_at=_opt(_time, d.get("superseded_at")),
            superseded_by=_opt(_int, d.get("superseded_by")),
            created_at=_time(d["created_at"]), scope=cast(Scope, _str(d["scope"])),
            agent_id=_opt(_str, d.get("agent_id")),
            valid_from=_opt(_time, d.get("valid_from")),
            valid_to=_opt(_time, d.get("valid_to")),
            expires_at=_opt(_time, d.get("expires_at")), pinned=_bool(d["pinned"]),
            basis=cast(Basis, _str(d["basis"])), confidence=_float(d["confidence"]),
            superseded_reason=cast(SupersededReason | None,
                                   _opt(_str, d.get("superseded_reason"))),
            embedding_model=_opt(_str, d.get("embedding_model")),
            embedding_dim=_opt(_int, d.get("embedding_dim")),
            written_via=cast(WrittenVia | None, _opt(_str, d.get("written_via"))),
            person_id=_opt(_int, d.get("person_id")),
        )


@dataclass(frozen=True, slots=True)
class CategoryGroup:
    category: Category
    facts: list[Fact]


@dataclass(frozen=True, slots=True)
class ActiveFacts:
    """The user's facts, grouped by category (each group pinned first, then by
    importance, confidence and the newest first); ``facts`` is every one in that order."""

    user_id: str
    count: int
    groups: list[CategoryGroup]

    @property
    def facts(self) -> list[Fact]:
        return [fact for group in self.groups for fact in group.facts]

    @classmethod
    def parse(cls, value: Any) -> ActiveFacts:
        d = _obj(value)
        groups = [CategoryGroup(category=cast(Category, _str(_obj(g)["category"])),
                                facts=[Fact.parse(f) for f in _list(g["facts"])])
                  for g in _list(d["groups"])]
        return cls(user_id=_str(d["user_id"]), count=_int(d["count"]), groups=groups)


@dataclass(frozen=True, slots=True)
class Chain:
    """Every version of a fact, oldest first."""

    fact_id: int
    versions: list[Fact]

    @classmethod
    def parse(cls, value: Any) -> Chain:
        d = _obj(value)
        return cls(fact_id=_int(d["fact_id"]),
                   versions=[Fact.parse(f) for f in _list(d["versions"])])


def server_timing(header: str | None) -> dict[str, float]:
    """``Server-Timing: embed;dur=1.41, store;dur=5.92, total;dur=7.63`` as
    {"embed": 1.41, "store": 5.92, "total": 7.63} (milliseconds); {} without it."""
    timing: dict[str, float] = {}
    for metric in (header or "").split(","):
        name, *params = (part.strip() for part in metric.split(";"))
        for param in params:
            key, _, number = param.partition("=")
            if name and key == "dur":
                with contextlib.suppress(ValueError):
                    timing[name] = float(number)
    return timing


@dataclass(frozen=True, slots=True)
class SearchHit:
    fact: Fact
    score: float  # Reciprocal Rank Fusion (k = 60)
    semantic_rank: int | None
    lexical_rank: int | None


@dataclass(frozen=True, slots=True)
class SearchResults:
    results: list[SearchHit]
    # The answer's Server-Timing in ms: embed (absent without an embeddings call), store, total.
    timing_ms: dict[str, float] = field(default_factory=dict)
    # The user's notes for the query, each marked kind "note" (docs/notes.md); empty from a
    # server with notes off, or without them.
    notes: list[NoteHit] = field(default_factory=list)

    @classmethod
    def parse(cls, value: Any, timing_ms: dict[str, float] | None = None) -> SearchResults:
        from worker.client.memory_api_notes import NoteHit

        hits = [SearchHit(fact=Fact.parse(_obj(h)["fact"]), score=_float(h["score"]),
                          semantic_rank=_opt(_int, h.get("semantic_rank")),
                          lexical_rank=_opt(_int, h.get("lexical_rank")))
                for h in _list(_obj(value)["results"])]
        return cls(results=hits, timing_ms=timing_ms or {}, notes=NoteHit.parse_list(value))


@dataclass(frozen=True, slots=True)
class KnownFacts:
    """The system-prompt block of what memory knows ("" when nothing, or while the
    user's memory is off) and how many facts it holds."""

    block: str
    count: int
    timing_ms: dict[str, float] = field(default_factory=dict)

    @classmethod
    def parse(cls, value: Any, timing_ms: dict[str, float] | None = None) -> KnownFacts:
        d = _obj(value)
        return cls(block=_str(d["block"]), count=_int(d["count"]), timing_ms=timing_ms or {})


@dataclass(frozen=True, slots=True)
class HeldProposal:
    """A change consolidation proposed and did not apply (docs/api.md, "The user's
    corrections"); ``stale``: open, but its fact changed since, so only a dismissal goes."""

    id: int
    fact_id: int | None
    run_id: int | None
    event: Literal["ADD", "UPDATE", "DELETE"]
    reason: Literal["pinned", "outranked", "undecided"]
    text: str | None
    category: str | None
    importance: int | None
    scope: str | None
    agent_id: str | None
    session_id: str | None
    proposed_at: datetime
    resolution: Literal["accepted", "dismissed"] | None
    resolved_at: datetime | None
    resolved_by: str | None
    result_fact_id: int | None
    stale: bool
    # An ADD's fact: who it is about (None: the user); an older server sends none.
    person_id: int | None = None

    @classmethod
    def parse(cls, value: Any) -> HeldProposal:
        d = _obj(value)
        return cls(
            id=_int(d["id"]), fact_id=_opt(_int, d.get("fact_id")),
            run_id=_opt(_int, d.get("run_id")),
            event=cast(Literal["ADD", "UPDATE", "DELETE"], _str(d["event"])),
            reason=cast(Literal["pinned", "outranked", "undecided"], _str(d["reason"])),
            text=_opt(_str, d.get("text")), category=_opt(_str, d.get("category")),
            importance=_opt(_int, d.get("importance")), scope=_opt(_str, d.get("scope")),
            agent_id=_opt(_str, d.get("agent_id")),
            session_id=_opt(_str, d.get("session_id")),
            proposed_at=_time(d["proposed_at"]),
            resolution=cast(Literal["accepted", "dismissed"] | None,
                            _opt(_str, d.get("resolution"))),
            resolved_at=_opt(_time, d.get("resolved_at")),
            resolved_by=_opt(_str, d.get("resolved_by")),
            result_fact_id=_opt(_int, d.get("result_fact_id")),
            stale=_bool(d.get("stale", False)), person_id=_opt(_int, d.get("person_id")),
        )

    @staticmethod
    def parse_list(value: Any) -> list[HeldProposal]:
        return [HeldProposal.parse(p) for p in _list(_obj(value)["proposals"])]


@dataclass(frozen=True, slots=True)
class HeldAnswer:
    """An answered proposal; ``fact``: the version an accept wrote or ended, None for a
    dismissal."""

    proposal: HeldProposal
    fact: Fact | None

    @classmethod
    def parse(cls, value: Any) -> HeldAnswer:
        d = _obj(value)
        fact = d.get("fact")
        return cls(proposal=HeldProposal.parse(d["proposal"]),
                   fact=None if fact is None else Fact.parse(fact))


@dataclass(frozen=True, slots=True)
class Erased:
    """What an erase removed, per table."""

    user_id: str
    deleted: dict[str, int]

    @classmethod
    def parse(cls, value: Any) -> Erased:
        d = _obj(value)
        return cls(user_id=_str(d["user_id"]), deleted=_counts(d["deleted"]))


@dataclass(frozen=True, slots=True)
class Consent:
    """Whether memfleet remembers the user; ``chosen`` False: the fleet's default
    applies. After a change with ``forget``, ``deleted`` says what went."""

    enabled: bool
    chosen: bool
    deleted: dict[str, int] | None = None

    @classmethod
    def parse(cls, value: Any) -> Consent:
        d = _obj(value)
        deleted = d.get("deleted")
        return cls(enabled=_bool(d["enabled"]), chosen=_bool(d["chosen"]),
                   deleted=None if deleted is None else _counts(deleted))


@dataclass(frozen=True, slots=True)
class Export:
    """Everything held about the user (right of access). ``document`` is the JSON as
    the API sent it, to hand to the user whole; typed: every fact row (active and
    superseded), the held proposals and the consent; the sessions (with their
    summaries) and the runs as the API writes them."""

    user_id: str
    exported_at: datetime
    consent: Consent
    facts: list[Fact]
    sessions: list[dict[str, Any]]
    runs: list[dict[str, Any]]
    held_proposals: list[HeldProposal]
    document: dict[str, Any]
    # The user's persons with every version of their labels (none from an older server).
    persons: list[dict[str, Any]] = field(default_factory=list)

    # Every version of the portrait (docs/portrait.md); empty from an API before it.
    portraits: list[dict[str, Any]] = field(default_factory=list)
    # Every note beside the facts, as the API writes them (docs/notes.md); none from an
    # older server.
    notes: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def parse(cls, value: Any) -> Export:
        d = _obj(value)
        consent = _obj(d["consent"])
        return cls(
            user_id=_str(d["user_id"]), exported_at=_time(d["exported_at"]),
            consent=Consent(enabled=_bool(consent["enabled"]), chosen=_bool(consent["chosen"])),
            facts=[Fact.parse(f) for f in _list(d["facts"])],
            sessions=[_obj(s) for s in _list(d["sessions"])],
            runs=[_obj(r) for r in _list(d["runs"])],
            held_proposals=[HeldProposal.parse(p) for p in _list(d["held_proposals"])],
            document=d, persons=[_obj(p) for p in _list(d.get("persons", []))],
            portraits=[_obj(p) for p in _list(d.get("portraits", []))],
            notes=[_obj(n) for n in _list(d.get("notes", []))],
        )


@dataclass(frozen=True, slots=True)
class HandedOver:
    """The hand-over's number (0: nothing stored, an empty list): what
    ``wait_for_memory`` takes."""

    handover_id: int

    @classmethod
    def parse(cls, value: Any) -> HandedOver:
        return cls(handover_id=_int(_obj(value)["handover_id"]))


@dataclass(frozen=True, slots=True)
class SessionStatus:
    """Where a session's memory stands: its latest hand-over, the latest one a commit
    finished, older lists still waiting, and its stand-in in the commit events (None
    when the API has no MEMFLEET_TELEMETRY_ID_KEY)."""

    latest: int
    finished: int
    older_lists: int
    session_tag: str | None

    def covers(self, handover_id: int) -> bool:
        """Every message of hand-over ``handover_id`` is in a committed slice."""
        return self.finished >= handover_id and self.older_lists == 0

    @classmethod
    def parse(cls, value: Any) -> SessionStatus:
        d = _obj(value)
        return cls(latest=_int(d["latest"]), finished=_int(d["finished"]),
                   older_lists=_int(d["older_lists"]),
                   session_tag=_opt(_str, d.get("session_tag")))


@dataclass(frozen=True, slots=True)
class WaitOutcome:
    """``covered``: a commit stored every message of the hand-over (its facts are then
    in what known-facts and search read); False: the time passed first."""

    covered: bool
    latest: int
    finished: int
    older_lists: int

    @classmethod
    def parse(cls, value: Any) -> WaitOutcome:
        d = _obj(value)
        return cls(covered=_bool(d["covered"]), latest=_int(d["latest"]),
                   finished=_int(d["finished"]), older_lists=_int(d["older_lists"]))


@dataclass(frozen=True, slots=True)
class Readiness:
    """``GET /readyz``: ready, or the servers away (names only: "Redis", "PostgreSQL")."""

    ready: bool
    down: list[str]

    @classmethod
    def parse(cls, value: Any) -> Readiness:
        d = _obj(value)
        return cls(ready=d.get("status") == "ok",
                   down=[_str(name) for name in _list(d.get("down", []))])
