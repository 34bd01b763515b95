"""Extract stage: the new slice (plus a little context and the summary) in, atomic facts out.

LLM pass 1. Building the request and reading the answer are pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from worker.conversation import Handover, Message
from worker.memory_rules import SourceKind, confidence_for
from worker.pipeline.context import RunContext, ask
from worker.pipeline.cursor import Position
from worker.pipeline.mentions import (
    Mention,
    implied_mention,
    mention_in,
    restated,
    said_relation,
)
from worker.pipeline.notes import (
    CandidateNote,
    notes_from,
    states_a_consideration,
    with_moved,
)
from worker.pipeline.provenance import (
    from_pasted,
    from_quoted,
    pasted_only,
    quoted_only,
    states_a_secret,
)
from worker.providers.wire import (
    Category,
    ExtractedFact,
    ExtractionAnswer,
    ExtractionRequest,
    KnownPerson,
    WireMessage,
)
from worker.store.types import PROFILE, FactTerms

MAX_CANDIDATES = 20


@dataclass(frozen=True, slots=True)
class CandidateFact:
    text: str
    category: Category
    importance: int
    terms: FactTerms = PROFILE
    forget: bool = False  # the user asked to forget it: retract what says it, add nothing
    # Who extraction said it is about (persons on; docs/persons.md): None, the user.
    about: Mention | None = None


def observed_label(moment: datetime) -> str:
    """The observation date as the wire format spells it: ``2026-11-22 (Sunday)``."""
    return f"{moment.date().isoformat()} ({moment.strftime('%A')})"


def build_request(
    messages: Sequence[Message],
    start: int,
    end: int,
    context_messages: int,
    summary: str | None,
    observed_at: datetime,
    agent_id: str | None = None,
    people: tuple[KnownPerson, ...] | None = None,
    with_notes: bool = False,
) -> ExtractionRequest:
    """Only the new slice and the declared context go out, nothing else of the session.
    ``people``: the user's known persons while persons are on (None: off)."""
    context = messages[max(0, start - context_messages) : start]
    return ExtractionRequest(
        observed_at=observed_label(observed_at),
        summary=summary,
        context=tuple(WireMessage(role=m.role, content=m.content) for m in context),
        messages=tuple(WireMessage(role=m.role, content=m.content) for m in messages[start:end]),
        agent=agent_id,
        people=people,
        with_notes=with_notes,
    )


_DATE = re.compile(r"^(\d{4})(?:-(\d{2})(?:-(\d{2}))?)?$")


def parse_moment(text: str | None) -> datetime | None:
    """An absolute date as the wire spells it, as a UTC moment; None when unknown.

    "2026-10" is read as its first day and "2026" as its first day of the year:
    a fact valid "since last month" is valid from the month's start. A model's
    unreadable date costs the fact its date, never the fact.
    """
    if not text:
        return None
    text = text.strip()
    match = _DATE.match(text)
    try:
        if match:
            year, month, day = match.groups()
            return datetime(int(year), int(month or 1), int(day or 1), tzinfo=UTC)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def fact_terms(
    fact: ExtractedFact, observed_at: datetime | None, agent_id: str | None,
    source: SourceKind = "extracted",
) -> FactTerms:
    """What the extracted fact says beyond its text, made consistent.

    Without an agent on the hand-over there is no relationship to belong to, so
    every fact is a profile fact. An end before the start is dropped, and so is
    an expiry at or before the fact was said (it could not be recalled at all).
    """
    relationship = fact.scope == "relationship" and agent_id is not None
    valid_from = parse_moment(fact.valid_from)
    valid_to = parse_moment(fact.valid_to)
    expires_at = parse_moment(fact.expires_at)
    if valid_to is not None and valid_from is not None and valid_to < valid_from:
        valid_to = None
    if valid_to is not None and valid_from is None and observed_at is not None \
            and valid_to < observed_at:
        valid_from = valid_to  # a fact that ended before it was said began no later
    if expires_at is not None and observed_at is not None and expires_at <= observed_at:
        expires_at = None
    return FactTerms(
        scope="relationship" if relationship else "profile",
        agent_id=agent_id if relationship else None,
        valid_from=valid_from, valid_to=valid_to, expires_at=expires_at, basis=fact.basis,
        confidence=confidence_for(source, fact.basis),
    )


_SPACE = re.compile(r"\s+")


def candidates_from(
    answer: ExtractionAnswer, *, observed_at: datetime | None = None,
    agent_id: str | None = None, source: SourceKind = "extracted", attributed: bool = False,
    said: Sequence[str] = (),
) -> list[CandidateFact]:
    """Normalise whitespace, drop immediate repeats, keep a bounded batch, in the user's order.
    ``attributed`` (persons on): keep who each fact is about; otherwise every fact is the
    user's, whatever the answer says. ``said``: the user's messages, by which a fact
    written of the user but about someone the user spoke of is retold of them
    (worker.pipeline.mentions.restated).

    Only a repeat of the fact just before it is dropped: a fact stated again
    after another ("Paris", "Lyon", "Paris"; "no hobby", "chess", "no hobby")
    is the user's latest word and must reach consolidation after what it undoes.
    """
    out: list[CandidateFact] = []
    previous = None
    for fact in answer.facts:
        text = _SPACE.sub(" ", fact.text).strip()
        if attributed and fact.about is not None:
            text = restated(text, fact.about.name, said) or text
        terms = fact_terms(fact, observed_at, agent_id, source)
        about = (None if not attributed else implied_mention(text) if fact.about is None
                 else mention_in(text, fact.about.name, fact.about.relation))
        about = said_relation(about, said)
        key = (text.casefold().rstrip("."), terms.agent_id, fact.forget, about)
        if not text or key == previous:
            continue
        previous = key
        out.append(CandidateFact(text, fact.category, fact.importance, terms, fact.forget,
                                 about))
    if len(out) > MAX_CANDIDATES:
        # A model over-produced: keep the most important, still in the order said.
        keep = sorted(range(len(out)), key=lambda i: -out[i].importance)[:MAX_CANDIDATES]
        out = [out[i] for i in sorted(keep)]
    return out


LEFT_OUT = ("secret", "pasted", "quoted")  # why a candidate was not kept (provenance.py)


def screened(
    candidates: list[CandidateFact], notes: list[CandidateNote], said: Sequence[str],
) -> tuple[list[CandidateFact], list[CandidateNote], dict[str, int]]:
    """What extraction wrote that the user never said of themselves, left out
    (worker/pipeline/provenance.py): a secret, a pasted document's content, or what
    someone else's quoted words said as the user's. The facts and notes kept, and how
    many facts were left out as each (``LEFT_OUT``). ``said``: the user's words in the
    request (``users_words``)."""
    pasted_names = pasted_only(said)
    quoted_words = quoted_only(said)

    def left_out(text: str) -> str | None:
        return ("secret" if states_a_secret(text)
                else "pasted" if from_pasted(text, pasted_names)
                else "quoted" if from_quoted(text, quoted_words) else None)

    verdicts = [left_out(c.text) for c in candidates]
    facts = [c for c, why in zip(candidates, verdicts, strict=True) if why is None]
    notes_kept = [n for n in notes if left_out(n.text) is None]
    return facts, notes_kept, {why: verdicts.count(why) for why in LEFT_OUT}


def users_words(request: ExtractionRequest) -> list[str]:
    """What the user wrote in the request (context and messages)."""
    return [m.content for m in (*request.context, *request.messages) if m.role == "user"]


@dataclass(frozen=True, slots=True)
class Extracted:
    facts: list[CandidateFact]
    notes: list[CandidateNote]  # empty unless MEMFLEET_NOTES_ENABLED (docs/notes.md)


async def run(
    ctx: RunContext, handover: Handover, position: Position,
    people: Callable[[], Awaitable[tuple[KnownPerson, ...] | None]] | None = None,
) -> Extracted:
    """``people``: reads the user's known persons for the request (persons on,
    worker.pipeline.persons), within this stage."""
    with_notes = ctx.settings.notes_enabled
    with ctx.clock.stage("extract") as span:
        known = None if people is None else await people()
        request = build_request(
            handover.messages, position.piece.start, position.piece.end,
            ctx.settings.context_messages,
            position.cursor.summary if position.cursor else None, handover.handed_over_at,
            handover.agent_id, known, with_notes,
        )
        extractor = ctx.providers.extractor
        answer = await ask(ctx, "chat", extractor, lambda: extractor.extract(request))
        said = users_words(request)
        candidates = candidates_from(answer.value, observed_at=handover.handed_over_at,
                                     agent_id=handover.agent_id, attributed=known is not None,
                                     said=said)
        # Notes not asked for are not kept, whatever an endpoint answers.
        notes = notes_from(answer.value) if with_notes else []
        if with_notes:  # a consideration written as a fact is a note (docs/notes.md)
            weighed = [c.text for c in candidates if states_a_consideration(c.text)]
            if weighed:
                candidates = [c for c in candidates if not states_a_consideration(c.text)]
                notes = with_moved(notes, weighed)
        candidates, notes, left_out = screened(candidates, notes, said)
        span.set_attribute("memfleet.candidates", len(candidates))
        for why, count in left_out.items():
            span.set_attribute(f"memfleet.candidates.{why}", count)
        if with_notes:
            span.set_attribute("memfleet.notes", len(notes))
        if ctx.settings.capture_content:
            for candidate in candidates:
                span.add_event("memfleet.candidate", {"memfleet.fact.text": candidate.text})
    return Extracted(candidates, notes)
