"""Extract stage: the new slice (plus a little context and the summary) in, atomic facts out.

LLM pass 1. Building the request and reading the answer are pure functions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from worker.payload import Handover, Message
from worker.stages.context import RunContext, ask
from worker.stages.cursor import Position
from worker.store.types import PROFILE, FactTerms
from worker.wire import Category, ExtractionAnswer, ExtractionRequest, WireMessage

MAX_CANDIDATES = 20


@dataclass(frozen=True, slots=True)
class CandidateFact:
    text: str
    category: Category
    importance: int
    terms: FactTerms = PROFILE


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
) -> ExtractionRequest:
    """Only the new slice and the declared context go out, nothing else of the session."""
    context = messages[max(0, start - context_messages) : start]
    return ExtractionRequest(
        observed_at=observed_label(observed_at),
        summary=summary,
        context=tuple(WireMessage(role=m.role, content=m.content) for m in context),
        messages=tuple(WireMessage(role=m.role, content=m.content) for m in messages[start:end]),
    )


_SPACE = re.compile(r"\s+")


def candidates_from(answer: ExtractionAnswer) -> list[CandidateFact]:
    """Normalise whitespace, drop immediate repeats, keep a bounded batch, in the user's order.

    Only a repeat of the fact just before it is dropped: a fact stated again
    after another ("Paris", "Lyon", "Paris"; "no hobby", "chess", "no hobby")
    is the user's latest word and must reach consolidation after what it undoes.
    """
    out: list[CandidateFact] = []
    previous = None
    for fact in answer.facts:
        text = _SPACE.sub(" ", fact.text).strip()
        key = text.casefold().rstrip(".")
        if not text or key == previous:
            continue
        previous = key
        out.append(CandidateFact(text, fact.category, fact.importance))
    if len(out) > MAX_CANDIDATES:
        # A model over-produced: keep the most important, still in the order said.
        keep = sorted(range(len(out)), key=lambda i: -out[i].importance)[:MAX_CANDIDATES]
        out = [out[i] for i in sorted(keep)]
    return out

async def run(ctx: RunContext, handover: Handover, position: Position) -> list[CandidateFact]:
    with ctx.clock.stage("extract") as span:
        request = build_request(
            handover.messages, position.piece.start, position.piece.end,
            ctx.settings.context_messages,
            position.cursor.summary if position.cursor else None, handover.handed_over_at,
        )
        extractor = ctx.providers.extractor
        answer = await ask(ctx, "chat", extractor, lambda: extractor.extract(request))
        candidates = candidates_from(answer.value)
        span.set_attribute("memfleet.candidates", len(candidates))
        if ctx.settings.capture_content:
            for candidate in candidates:
                span.add_event("memfleet.candidate", {"memfleet.fact.text": candidate.text})
    return candidates
