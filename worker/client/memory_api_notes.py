"""The memory API's notes (docs/notes.md) as typed values and Calls, for MemoryApi and
AsyncMemoryApi: a user's notes listed, one removed, the notes a promoted fact came from,
and the notes a search finds (``SearchResults.notes``). Like memory_api_models, each
``parse`` ignores members it does not know."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from worker.client.memory_api_models import _int, _list, _obj, _str, _time
from worker.client.memory_api_wire import Call, fact_number, segment

NoteReason = Literal["updated", "removed", "promoted"]
NoteState = Literal["active", "all"]


@dataclass(frozen=True, slots=True)
class Note:
    """One version of a note: free-form context about the user beside their facts."""

    id: int
    text: str
    observed_at: datetime
    source_session_id: str | None
    created_at: datetime
    superseded_at: datetime | None
    superseded_by: int | None  # the later note of the same session that said it anew
    superseded_reason: NoteReason | None
    promoted_to: int | None  # the fact the promotion job made of it

    @classmethod
    def parse(cls, value: Any) -> Note:
        d = _obj(value)
        reason = d.get("superseded_reason")
        return cls(
            id=_int(d["id"]), text=_str(d["text"]), observed_at=_time(d["observed_at"]),
            source_session_id=None if d.get("source_session_id") is None
            else _str(d["source_session_id"]),
            created_at=_time(d["created_at"]),
            superseded_at=None if d.get("superseded_at") is None else _time(d["superseded_at"]),
            superseded_by=None if d.get("superseded_by") is None else _int(d["superseded_by"]),
            superseded_reason=None if reason is None else cast(NoteReason, _str(reason)),
            promoted_to=None if d.get("promoted_to") is None else _int(d["promoted_to"]))

    @staticmethod
    def parse_list(value: Any) -> list[Note]:
        return [Note.parse(n) for n in _list(_obj(value)["notes"])]


@dataclass(frozen=True, slots=True)
class NoteHit:
    """A note a search found; ``kind`` marks it as a note, never a fact."""

    note: Note
    score: float  # Reciprocal Rank Fusion (k = 60)
    semantic_rank: int | None
    lexical_rank: int | None
    kind: Literal["note"] = "note"

    @classmethod
    def parse_list(cls, value: Any) -> list[NoteHit]:
        """The ``notes`` of a search's answer; none from a server without notes."""
        hits = []
        for item in _list(_obj(value).get("notes", [])):
            h = _obj(item)
            score = h["score"]
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise TypeError("not a number")
            hits.append(cls(Note.parse(h["note"]), float(score),
                            None if h.get("semantic_rank") is None else _int(h["semantic_rank"]),
                            None if h.get("lexical_rank") is None else _int(h["lexical_rank"])))
        return hits


def _user(user_id: str) -> str:
    return f"/users/{segment(user_id, 'user_id')}"


def notes(user_id: str, state: NoteState) -> Call[list[Note]]:
    return Call("notes", "GET", f"{_user(user_id)}/notes", lambda r: Note.parse_list(r.json()),
                params={"state": state})


def remove_note(user_id: str, note_id: int) -> Call[Note]:
    return Call("remove_note", "DELETE",
                f"{_user(user_id)}/notes/{fact_number(note_id, 'note_id')}",
                lambda r: Note.parse(r.json()))


def fact_notes(user_id: str, fact_id: int) -> Call[list[Note]]:
    return Call("fact_notes", "GET", f"{_user(user_id)}/facts/{fact_number(fact_id)}/notes",
                lambda r: Note.parse_list(r.json()))
