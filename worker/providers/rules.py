"""The offline ``rules`` provider: extraction, consolidation and summaries by pattern.

No model is called, so the answers are free, instant and deterministic, which
is what demos, tests and air-gapped trials need. It understands only the plain
first-person phrasings in ``rules_patterns``; production uses a model.

Consolidation is ``rules_consolidate``'s (``decide`` is re-exported here).

Each provider class is a thin async wrapper around a pure function of the
request, so the behaviour can be tested without an event loop; the wrapper runs
it in a thread within a CPU budget (worker.protection.cpu_budget).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, date, datetime
from typing import TypeVar

from pydantic import ValidationError

from worker.errors import OfflineAnswerInvalid
from worker.protection.cpu_budget import Checkpoint, CpuThreads, no_deadline, run_in_thread
from worker.providers.base import Answer, Usage
from worker.providers.llm_json import describe_errors
from worker.providers.rules_consolidate import decide as decide  # re-exported
from worker.providers.rules_notes import MAX_NOTES, note_in, promote
from worker.providers.rules_patterns import RULES, norm
from worker.providers.rules_persons import MessagePeople
from worker.providers.rules_time import relationship_in, temporary_in, valid_from_in
from worker.providers.wire import (
    ConsolidationAnswer,
    ConsolidationRequest,
    ExtractedFact,
    ExtractedNote,
    ExtractionAnswer,
    ExtractionRequest,
    NotePromotionAnswer,
    NotePromotionRequest,
    SummaryAnswer,
    SummaryRequest,
    WireMessage,
)

T = TypeVar("T")

MODEL = "rules-v1"
# CPU seconds one call may spend (Settings.provider_cpu_budget_s when built by the factory).
DEFAULT_CPU_BUDGET_S = 10.0
RULES_PROVIDER = "memfleet.rules"  # gen_ai.provider.name in spans
SUMMARY_CHARS = 1000
SNIPPET_CHARS = 160
_LINE_SLACK = 200  # at most this much is given up to start the tail on a whole line

# Clauses longer than this are cut before any pattern sees them: a fact's value
# is at most MAX_VALUE_CHARS anyway, and every pattern's work then stays bounded
# per clause, whatever the message (worker.protection.cpu_budget).
MAX_CLAUSE_CHARS = 400
# Patterns run on normalised text (``normalised``): single spaces, lines without
# blanks around them. So no pattern needs ``\s+``, whose runs are what made
# them quadratic on long whitespace.
# A sentence ends at . ! ? ; followed by a space, or at a line break, so that
# "Python 3.11" and "Node.js" stay whole.
_SENTENCE_END = re.compile(r"(?<=[.!?;]) |\n")
# Within a sentence a value stops at a comma (not "1,000"), or at "and" / "but".
_CLAUSE_END = re.compile(r",(?!\d)|;| (?:and|but) ", re.IGNORECASE)
# Conditionals and questions without a question mark state nothing about the user.
_NOT_A_STATEMENT = re.compile(
    r"^(?:(?:and|but|so|or) )?(?:if|unless|whether|should|would|could|can|do|does|"
    r"did|will|shall|what|why|how|where|who|which|is|are|am)\b",
    re.IGNORECASE,
)
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
# "Please forget that I live in Oslo", "can you forget I use Notion?": what follows
# is the fact to retract. "Don't forget that ..." asks the opposite.
_FORGET = re.compile(r"(?<!don't )(?<!do not )(?<!never )\bforget (?:about )?(?:that )?",
                     re.IGNORECASE)


# ---------------------------------------------------------------- extraction


def normalised(text: str) -> str:
    """Curly quotes straightened, each line's whitespace runs made one space, blank
    lines dropped: linear, and what every pattern below expects."""
    lines = (" ".join(line.split()) for line in text.translate(_QUOTES).split("\n"))
    return "\n".join(line for line in lines if line)


def capped(clause: str, limit: int = MAX_CLAUSE_CHARS) -> str:
    """The clause's first ``limit`` characters (a value is cut to MAX_VALUE_CHARS
    at a word later, so the cut here never shows in a fact)."""
    return clause[:limit]


def _clauses(sentence: str) -> Iterator[str]:
    if sentence.endswith("?"):
        return
    for clause in _CLAUSE_END.split(sentence.rstrip(".!;")):
        clause = capped(clause.strip())
        if clause and not _NOT_A_STATEMENT.match(clause):
            yield clause


def _forgotten(sentence: str, today: date, with_agent: bool) -> ExtractedFact | None:
    """The fact a forget request names, marked ``forget``; None when it names none the
    rules can read ("forget everything", "forget my old job")."""
    request = _FORGET.search(sentence)
    if request is None:
        return None
    said = _CLAUSE_END.split(capped(sentence[request.end():]).rstrip(".!?;"), maxsplit=1)[0]
    fact = _facts_in(said.strip(), today, with_agent)
    return None if fact is None else fact.model_copy(update={"forget": True})


def _facts_in(clause: str, today: date, with_agent: bool) -> ExtractedFact | None:
    if with_agent and (about_us := relationship_in(clause)) is not None:
        said, category, importance = about_us
        return ExtractedFact(text=said, category=category, importance=importance,
                             scope="relationship")
    if (temporary := temporary_in(clause, today)) is not None:
        return ExtractedFact(text=temporary.text, category=temporary.category,
                             importance=temporary.importance, valid_from=today.isoformat(),
                             valid_to=temporary.valid_to, expires_at=temporary.expires_at)
    for rule in RULES:
        match = rule.pattern.search(clause)
        if match is not None:
            # The first matching rule owns the clause even when it rejects the
            # value, so "my boss is nice" cannot fall through to a vaguer rule.
            text = rule.render(match)
            if text is None:
                return None
            return ExtractedFact(text=text, category=rule.category, importance=rule.importance,
                                 valid_from=valid_from_in(clause, today))
    return None


def _clause_fact(clause: str, today: date, with_agent: bool,
                 people: MessagePeople | None) -> ExtractedFact | None:
    if people is not None and (about_someone := people.read(clause)) is not None:
        return about_someone.fact
    return _facts_in(clause, today, with_agent)


def _day_of(observed_at: str) -> date:
    """The date of the wire's ``observed_at`` ("2026-11-22 (Sunday)")."""
    try:
        return date.fromisoformat(observed_at[:10])
    except ValueError:
        return datetime.now(UTC).date()


def extract_facts(request: ExtractionRequest,
                  checkpoint: Checkpoint = no_deadline) -> ExtractionAnswer:
    """Facts the user stated about themselves in the new messages (context is ignored).

    ``checkpoint`` is called before each clause: the CPU budget's deadline.
    """
    facts: list[ExtractedFact] = []
    notes: dict[str, ExtractedNote] = {}  # by their normalised text: each once
    seen: set[tuple[str, bool] | None] = set()
    today = _day_of(request.observed_at)
    with_agent = request.agent is not None
    for message in request.messages:
        if message.role.casefold() != "user":
            continue
        # Persons on: clauses about someone else are theirs (rules_persons), never the user's.
        people = None if request.people is None else MessagePeople(request.people)
        for sentence in _SENTENCE_END.split(normalised(message.content)):
            sentence = sentence.strip()
            if not sentence:
                continue
            checkpoint()
            if request.with_notes and len(notes) < MAX_NOTES \
                    and (note := note_in(sentence)) is not None:
                notes.setdefault(norm(note.text), note)
            if _FORGET.search(sentence) is not None:
                # A forget request states nothing to keep: only what it retracts.
                found = [_forgotten(sentence, today, with_agent)]
            else:
                found = [_clause_fact(clause, today, with_agent, people)
                         for clause in _clauses(sentence)]
            for fact in found:
                key = (norm(fact.text), fact.forget) if fact is not None else None
                if fact is not None and key not in seen:
                    seen.add(key)
                    facts.append(fact)
    return ExtractionAnswer(facts=tuple(facts), notes=tuple(notes.values()))


# ---------------------------------------------------------------- summaries


def _snippet(message: WireMessage) -> str:
    text = " ".join(message.content.split())
    if len(text) <= SNIPPET_CHARS:
        return text
    head = text[: SNIPPET_CHARS - 1]
    return (head.rsplit(" ", 1)[0] if " " in head else head) + "\u2026"


def _tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    tail = text[-(limit - 1) :]
    # Prefer dropping a whole leading line to showing half of one.
    newline = tail.find("\n", 0, _LINE_SLACK)
    if 0 <= newline < len(tail) - 1:
        return tail[newline + 1 :]
    return "\u2026" + tail


def summarize(request: SummaryRequest, checkpoint: Checkpoint = no_deadline) -> SummaryAnswer:
    """The previous summary plus one line per new user message, newest kept."""
    parts = [request.previous_summary.strip()] if request.previous_summary else []
    for message in request.messages:
        if message.role.casefold() == "user" and message.content.strip():
            checkpoint()
            parts.append("- " + _snippet(message))
    return SummaryAnswer(summary=_tail("\n".join(p for p in parts if p), SUMMARY_CHARS))


# ---------------------------------------------------------------- providers


def _answered(work: Callable[[Checkpoint], T], budget_s: float,
              threads: CpuThreads | None = None) -> Callable[[], Awaitable[T]]:
    """``work`` off the event loop within the CPU budget; an answer that breaks the
    wire (a bug of these rules, since they are deterministic) becomes memfleet's
    own error, named by location and kind: pydantic's message would quote the user."""

    def checked(checkpoint: Checkpoint) -> T:
        try:
            return work(checkpoint)
        except ValidationError as exc:
            raise OfflineAnswerInvalid(
                f"the rules provider's answer breaks the wire: {describe_errors(exc)}") from None

    return lambda: run_in_thread(checked, budget_s, threads)


class _Rules:
    provider_name = RULES_PROVIDER
    model = MODEL

    def __init__(self, cpu_budget_s: float = DEFAULT_CPU_BUDGET_S,
                 threads: CpuThreads | None = None) -> None:
        """``threads``: shared by the three providers of a worker (factory); without
        them, the loop's default executor."""
        self._budget_s, self._threads = cpu_budget_s, threads

    async def aclose(self) -> None:
        if self._threads is not None:
            self._threads.close()


class RulesExtractor(_Rules):
    async def extract(self, request: ExtractionRequest) -> Answer[ExtractionAnswer]:
        work = _answered(lambda check: extract_facts(request, check), self._budget_s,
                         self._threads)
        return Answer(await work(), Usage(0, 0), MODEL)


class RulesConsolidator(_Rules):
    async def consolidate(self, request: ConsolidationRequest) -> Answer[ConsolidationAnswer]:
        work = _answered(lambda check: decide(request, check), self._budget_s, self._threads)
        return Answer(await work(), Usage(0, 0), MODEL)


class RulesSummarizer(_Rules):
    async def summarize(self, request: SummaryRequest) -> Answer[SummaryAnswer]:
        work = _answered(lambda check: summarize(request, check), self._budget_s,
                         self._threads)
        return Answer(await work(), Usage(0, 0), MODEL)


class RulesNotePromoter(_Rules):
    """The note promotion pass offline (docs/notes.md): the newest note's text."""

    async def promote(self, request: NotePromotionRequest) -> Answer[NotePromotionAnswer]:
        work = _answered(lambda check: promote(request), self._budget_s, self._threads)
        return Answer(await work(), Usage(0, 0), MODEL)
