"""`memfleet eval`'s scenarios: what one is, how the files are read, and the scenario clock.

A scenario is a conversation over one or more sessions, each at a moment, and gold
assertions on the memory it must leave behind, checked without a judge model: facts
that must be active (found by distinctive words), facts that must not be, chains
(an old fact superseded by a new one), facts learned and then ended, each with an
optional scope, agent and valid-from date. The suite shipped with memfleet lives in
``worker/eval/scenarios/`` (package data: an installed `memfleet eval` has it);
`--scenarios DIR` reads another folder of the same JSON files (docs/eval.md).

The scenario clock. Scenarios are written at fixed dates (readable, and what their
gold dates are worked out from), but the fleet's expiry reads the real clock: a plan
"on Friday" written at a date already past would be invisible to consolidation the
moment it is stored. So each run moves every scenario forward by whole 28-year
cycles, until it lies after the real clock: between 1901 and 2099 the calendar
repeats every 28 years (weekdays, month lengths, leap days), so every date the
conversation implies moves with it. Session moments, gold dates, the years the
messages name and the questions' years move together (``shifted``).
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from worker.errors import MemfleetError

# The kinds of memory change the suite covers, in the order tables list them, each
# with what it tests (docs/eval.md says more).
KINDS: dict[str, str] = {
    "plain": "facts stated once are kept",
    "updates": "a new value replaces the old one, which stays as history",
    "retractions": "a fact the user takes back is no longer active",
    "aba": "A, then B, then A again: A is active, B is not",
    "contradictions": "a later session contradicts an earlier one: the later wins",
    "relative_dates": "'last month', '3 weeks ago' resolve to dates",
    "expiring": "plans and stays expire; lasting facts said beside them stay",
    "paraphrase": "the same fact said again in other words is not stored twice",
    "other_people": "facts about other people do not become the user's",
    "hypotheticals": "questions, wishes and 'what if' do not become facts",
    "short_replies": "a short reply is understood from the earlier conversation",
    "two_agents": "what the user tells one assistant stays with it",
    "non_english": "facts stay in the language they were said in",
    "injection": "instructions inside messages are not obeyed as memory commands",
    "named_people": "facts about named people are theirs (docs/persons.md), never the user's",
    "person_changes": "a person renamed or a relation changed keeps their facts",
    "portrait_update": "the user's portrait follows an update: the new value, not the old",
    # Only with MEMFLEET_NOTES_ENABLED (docs/notes.md): left out of a run without it.
    "notes": "notes that recur in several sessions are promoted to one fact; others are not",
}
# Kinds that need a setting on (docs/eval.md, "The kinds"): a run without it leaves
# them out, and `--kind` naming one is a mistake.
NEEDS_SETTING: dict[str, str] = {"notes": "notes_enabled", "named_people": "persons",
                                  "person_changes": "persons"}

# Kinds of scenarios made from LongMemEval's items (worker.eval.longmemeval), named
# as its question types; not in the shipped suite, so not among --kind's choices.
LONGMEMEVAL_KINDS: dict[str, str] = {
    "knowledge-update": "LongMemEval: the final value of something the user updated",
    "temporal-reasoning": "LongMemEval: what a question about time needs remembered",
}

SUITE_PACKAGE = "worker.eval.scenarios"
CYCLE_YEARS = 28  # the Gregorian calendar repeats every 28 years within 1901-2099
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d{2}(?!\d)")
_DATE = re.compile(r"^\d{4}(?:-\d{2}(?:-\d{2})?)?$")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Words(_Frozen):
    """What finds a fact: every group must occur in its text, a group by any of its
    alternatives ("Lisbon|Lisboa"), case-blind, as whole words ("allerg*": a prefix)."""

    words: tuple[str, ...] = Field(min_length=1)

    @field_validator("words")
    @classmethod
    def _not_blank(cls, words: tuple[str, ...]) -> tuple[str, ...]:
        for group in words:
            if not all(alt.strip(" *") for alt in group.split("|")):
                raise ValueError(f"a blank alternative in {group!r}")
        return words

    @cached_property
    def _patterns(self) -> tuple[re.Pattern[str], ...]:
        def alternative(alt: str) -> str:
            alt = alt.strip()
            prefix = alt.endswith("*")
            body = re.escape(alt.rstrip("*").casefold())
            return rf"(?<!\w){body}" + ("" if prefix else r"(?!\w)")

        return tuple(re.compile("|".join(alternative(a) for a in group.split("|")))
                     for group in self.words)

    def found_in(self, text: str) -> bool:
        folded = text.casefold()
        return all(pattern.search(folded) for pattern in self._patterns)

    def said(self) -> str:
        return " + ".join(self.words)


class Active(Words):
    """A fact that must be active at the end; ``agent`` means a relationship fact of
    that agent, ``scope`` "profile" a fact for every agent; ``valid_from`` a date,
    month or year its validity must start in; ``once``: and only one such fact."""

    scope: Literal["profile", "relationship"] | None = None
    agent: str | None = None
    valid_from: str | None = None
    # Held by one active fact only: a second one matching fails the assertion (the
    # duplicates column counts it either way).
    once: bool = False
    # A fact about a person of the user's (docs/persons.md): words naming that person
    # (name, relation or alias, "Ana|sister"); None: a fact about the user.
    about: str | None = None

    @field_validator("valid_from")
    @classmethod
    def _date(cls, value: str | None) -> str | None:
        if value is not None and not _DATE.match(value):
            raise ValueError("valid_from is YYYY, YYYY-MM or YYYY-MM-DD")
        return value


class Absent(Words):
    """No active fact may match (one that does is a false memory); ``visible_to``: none
    of the facts that agent would be given (the profile and its own relationship).
    ``unless``: word groups that excuse a match, a fact that tells the change rather
    than the old state ("Moved from Porto to Madrid" is no false "Porto")."""

    visible_to: str | None = None
    unless: tuple[str, ...] = ()

    @cached_property
    def _excuse(self) -> Words | None:
        return Words(words=self.unless) if self.unless else None

    def false_in(self, text: str) -> bool:
        excuse = self._excuse
        return self.found_in(text) and not (excuse is not None and excuse.found_in(text))


class Chain(_Frozen):
    """A fact matching ``old`` whose successor (the fact that superseded it) matches ``new``."""

    old: Words
    new: Words


class PersonGold(_Frozen):
    """A person of the user's that must exist at the end, with a current name and
    relation matching these words (alternatives "Mia|Mya"; None: not checked)."""

    name: str | None = None
    relation: str | None = None

    @model_validator(mode="after")
    def _named(self) -> PersonGold:
        if self.name is None and self.relation is None:
            raise ValueError("a person is named by a name, a relation or both")
        return self


class Portrait(_Frozen):
    """The user's portrait at the end (docs/portrait.md): each of ``has`` found in its
    text, none of ``lacks`` (but where ``unless`` excuses it: "moved from Porto to
    Madrid" tells the change). A ``lacks`` holds only beside a ``has`` that held."""

    has: tuple[Words, ...] = Field(min_length=1)
    lacks: tuple[Absent, ...] = ()


class Expect(_Frozen):
    active: tuple[Active, ...] = ()
    absent: tuple[Absent, ...] = ()
    chains: tuple[Chain, ...] = ()
    # Facts that must have been learned and then ended (retracted, or expired): kept
    # as history, not active. Absent alone would also pass if they were never learned.
    ended: tuple[Words, ...] = ()
    # The people of the user's life at the end (docs/persons.md).
    persons: tuple[PersonGold, ...] = ()
    # The portrait written from the facts (a run with one makes portraits for its user).
    portrait: Portrait | None = None


class Turn(_Frozen):
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1)


class Session(_Frozen):
    id: str = Field(min_length=1, max_length=64)
    at: datetime
    agent: str | None = None
    # Hand over and let a worker commit after each user turn (a slice a turn, the
    # rolling summary carrying what came before); otherwise once, after the session.
    commit_each_turn: bool = False
    turns: tuple[Turn, ...] = Field(min_length=1)

    @field_validator("at")
    @classmethod
    def _zoned(cls, at: datetime) -> datetime:
        return at if at.tzinfo else at.replace(tzinfo=UTC)


class Question(_Frozen):
    """A question asked at the scenario's end, whose answer is in its end state
    (docs/eval.md, "Question answering"). ``answer`` is the gold: a word, a name, or
    with ``match`` "date" a date (YYYY, YYYY-MM or YYYY-MM-DD); ``also``: other ways to
    say it right; ``wrong``: a stale or false value that makes an answer naming it
    wrong (a hedge between the old and the new city does not know which holds).
    ``agent``: asked in a session with that agent (its relationship facts are read).
    ``fact``: words that find the fact holding the answer (the retrieval measure);
    by default the answer's own (any of ``answer`` and ``also``)."""

    ask: str = Field(min_length=1)
    answer: str = Field(min_length=1)
    also: tuple[str, ...] = ()
    wrong: tuple[str, ...] = ()
    match: Literal["words", "date"] = "words"
    agent: str | None = None
    fact: Words | None = None

    @field_validator("answer", "also", "wrong")
    @classmethod
    def _has_words(cls, value: str | tuple[str, ...]) -> str | tuple[str, ...]:
        for text in (value,) if isinstance(value, str) else value:
            if not re.search(r"\w", text):
                raise ValueError(f"no word in {text!r}")
        return value

    @model_validator(mode="after")
    def _dated(self) -> Question:
        if self.match == "date" and not _DATE.match(self.answer):
            raise ValueError("a date answer is YYYY, YYYY-MM or YYYY-MM-DD")
        if self.match == "date" and self.fact is None:
            raise ValueError("a date question needs `fact`: the words of the fact it is about")
        return self

    @property
    def gold_fact(self) -> Words:
        alternatives = "|".join(a.replace("|", " ") for a in (self.answer, *self.also))
        return self.fact if self.fact is not None else Words(words=(alternatives,))


class Scenario(_Frozen):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,63}$")
    kind: str
    about: str
    sessions: tuple[Session, ...] = Field(min_length=1)
    # The moment the end state is read at (expiry is judged then); default: a minute
    # after the last session's last turn.
    end_at: datetime | None = None
    expect: Expect
    # Asked at the end with `memfleet eval --qa` (docs/eval.md, "Question answering").
    questions: tuple[Question, ...] = ()

    @field_validator("kind")
    @classmethod
    def _known_kind(cls, kind: str) -> str:
        if kind not in KINDS and kind not in LONGMEMEVAL_KINDS:
            raise ValueError(f"unknown kind {kind!r} (one of {', '.join(KINDS)})")
        return kind

    @property
    def ends_at(self) -> datetime:
        if self.end_at is not None:
            return self.end_at if self.end_at.tzinfo else self.end_at.replace(tzinfo=UTC)
        last = self.sessions[-1]
        return last.at + timedelta(minutes=len(last.turns) + 1)

    @property
    def assertions(self) -> int:
        e = self.expect
        portrait = 0 if e.portrait is None else len(e.portrait.has) + len(e.portrait.lacks)
        return (len(e.active) + len(e.absent) + len(e.chains) + len(e.ended) + len(e.persons)
                + portrait)


# ---------------------------------------------------------------- files


def load_file(path: Path | resources.abc.Traversable) -> list[Scenario]:
    """The scenarios of one JSON file (a list of scenarios); a MemfleetError naming
    the file and the first fault when it is not one."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(raw, list):
            raise ValueError("the file must hold a JSON list of scenarios")
        return [Scenario.model_validate(item) for item in raw]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise MemfleetError(f"{path.name}: not a scenario file: {where}: {first['msg']}") \
            from None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise MemfleetError(f"{path.name}: not a scenario file: {exc}") from None


def load_suite(folder: Path | None = None) -> list[Scenario]:
    """Every scenario of the folder's ``*.json`` files (the shipped suite by default),
    by file name then order; ids must be unique across the suite."""
    root: Path | resources.abc.Traversable
    if folder is None:
        root = resources.files(SUITE_PACKAGE)
    else:
        if not folder.is_dir():
            raise MemfleetError(f"--scenarios {folder}: not a folder")
        root = folder
    files = sorted((f for f in root.iterdir() if f.name.endswith(".json")),
                   key=lambda f: f.name)
    scenarios = [s for f in files for s in load_file(f)]
    if not scenarios:
        raise MemfleetError(f"no scenario files (*.json) in {folder}")
    seen: set[str] = set()
    for scenario in scenarios:
        if scenario.id in seen:
            raise MemfleetError(f"scenario id {scenario.id!r} is used twice")
        seen.add(scenario.id)
    return scenarios


# ---------------------------------------------------------------- the scenario clock


def cycles_after(first: datetime, now: datetime) -> int:
    """Whole 28-year cycles that put ``first`` at least a day after ``now``."""
    years = 0
    while _plus_years(first, years) < now + timedelta(days=1):
        years += CYCLE_YEARS
    return years


def _plus_years(moment: datetime, years: int) -> datetime:
    return moment.replace(year=moment.year + years)


def _years_in(text: str, years: int) -> str:
    return _YEAR.sub(lambda m: str(int(m[0]) + years), text)


def shifted(scenario: Scenario, years: int) -> Scenario:
    """The scenario ``years`` later: moments, the years its messages name, gold dates."""
    if years == 0:
        return scenario
    sessions = tuple(s.model_copy(update={
        "at": _plus_years(s.at, years),
        "turns": tuple(t.model_copy(update={"content": _years_in(t.content, years)})
                       for t in s.turns),
    }) for s in scenario.sessions)
    active = tuple(a.model_copy(update={"valid_from": _years_in(a.valid_from, years)})
                   if a.valid_from else a for a in scenario.expect.active)
    questions = tuple(q.model_copy(update={
        "ask": _years_in(q.ask, years), "answer": _years_in(q.answer, years),
        "also": tuple(_years_in(a, years) for a in q.also),
        "wrong": tuple(_years_in(w, years) for w in q.wrong),
    }) for q in scenario.questions)
    return scenario.model_copy(update={
        "sessions": sessions,
        "end_at": _plus_years(scenario.end_at, years) if scenario.end_at else None,
        "expect": scenario.expect.model_copy(update={"active": active}),
        "questions": questions,
    })
