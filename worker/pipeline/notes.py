"""Notes stage: what a run's extracted notes do to the notes already kept (docs/notes.md).

Notes never enter the facts' consolidation: no model call decides about them.
Each new note is compared with the nearest active note of the SAME session (one
query for all of them, beside the facts' neighbours), and:

- NONE when that note says the same (the same words, or closer than
  ``REPEAT_DISTANCE``): the session said it again, nothing is written;
- UPDATE when it is closer than the promotion distance: the newer wording of the
  same thought in the same session supersedes the older (a chain, as for facts);
- ADD otherwise, and always against the notes of other sessions: a topic coming
  back in another session is exactly what the promotion job counts.

Building the plan is pure (``plan_notes``); ``run`` reads the neighbours.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from worker.pipeline.context import RunContext
from worker.providers.wire import ExtractionAnswer
from worker.store.note_types import InsertNote, NoteNeighbor
from worker.vectors import Vector

MAX_NOTES = 5  # per run: a model that over-produces keeps its first
# Cosine distance under which a note of the same session says the same thing: both
# embeddings of one wording, or of wordings that differ in a character or two.
REPEAT_DISTANCE = 0.02

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class CandidateNote:
    text: str


@dataclass(frozen=True, slots=True)
class NotePlan:
    writes: tuple[InsertNote, ...] = ()
    added: int = 0
    updated: int = 0
    unchanged: int = 0


NO_NOTES = NotePlan()


# A fact that states only a consideration ("The user is considering buying a dog."):
# a note, never a fact (docs/notes.md). The 1.5B model wrote every consideration of the
# notes kind as a fact and no note at all.
_CONSIDERED = re.compile(
    r"^the user (?:is |are )?(?:(?:still|seriously|also|now|again|currently) )*"
    r"(?:considering|thinking (?:about|of)|toying with|weighing|wondering|debating"
    r"|contemplating|undecided|unsure whether|not sure whether)\b", re.IGNORECASE)


def states_a_consideration(text: str) -> bool:
    """Whether a fact's text only says the user is weighing something: a note's matter."""
    return _CONSIDERED.match(text) is not None


def with_moved(notes: Sequence[CandidateNote], texts: Sequence[str]) -> list[CandidateNote]:
    """The answer's notes, then ``texts`` as notes, each once, at most MAX_NOTES."""
    out: list[CandidateNote] = []
    seen: set[str] = set()
    for note in (*notes, *(CandidateNote(t) for t in texts)):
        key = note.text.casefold().rstrip(".")
        if key not in seen:
            seen.add(key)
            out.append(note)
    return out[:MAX_NOTES]


def notes_from(answer: ExtractionAnswer) -> list[CandidateNote]:
    """The answer's notes, whitespace made single, each once, at most MAX_NOTES."""
    out: list[CandidateNote] = []
    seen: set[str] = set()
    for note in answer.notes:
        text = _SPACE.sub(" ", note.text).strip()
        key = text.casefold().rstrip(".")
        if text and key not in seen:
            seen.add(key)
            out.append(CandidateNote(text))
    return out[:MAX_NOTES]


def _same_words(a: str, b: str) -> bool:
    return _SPACE.sub(" ", a).strip().casefold().rstrip(".") == \
        _SPACE.sub(" ", b).strip().casefold().rstrip(".")


def plan_notes(
    notes: Sequence[CandidateNote], embeddings: Vector, neighbors: Sequence[NoteNeighbor | None],
    *, model: str, update_distance: float,
) -> NotePlan:
    """ADD, UPDATE or NONE per note against its nearest active note of the session. An
    old note is superseded by one new note at most; a second one near it is added."""
    writes: list[InsertNote] = []
    added = updated = unchanged = 0
    taken: set[int] = set()
    for note, embedding, near in zip(notes, embeddings, neighbors, strict=True):
        if near is not None and (near.distance <= REPEAT_DISTANCE
                                 or _same_words(near.text, note.text)):
            unchanged += 1
            continue
        replaces = None
        if near is not None and near.distance < update_distance and near.id not in taken:
            replaces = near.id
            taken.add(near.id)
            updated += 1
        else:
            added += 1
        writes.append(InsertNote(note.text, embedding, model, replaces))
    return NotePlan(tuple(writes), added, updated, unchanged)


async def run(ctx: RunContext, user_id: str, session_id: str,
              notes: Sequence[CandidateNote], embeddings: Vector) -> NotePlan:
    """The run's note writes; nothing (and no query) without notes."""
    if not notes:
        return NO_NOTES
    model = ctx.providers.embedder.model
    with ctx.clock.stage("notes", **{"memfleet.notes": len(notes)}) as span:
        neighbors = await ctx.store.note_neighbors(user_id, session_id, embeddings, model)
        plan = plan_notes(notes, embeddings, neighbors, model=model,
                          update_distance=ctx.settings.notes_promote_distance)
        span.set_attribute("memfleet.notes.add", plan.added)
        span.set_attribute("memfleet.notes.update", plan.updated)
        span.set_attribute("memfleet.notes.none", plan.unchanged)
    return plan
