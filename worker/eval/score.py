"""`memfleet eval`'s scoring: a scenario's gold assertions against the facts it left.

Pure: the facts in (every version, superseded ones too, as the store lists them), the
checks out. A fact is active at the end when it was learned by then, is not superseded
by then and has not expired by then (``active_at``): the end state is read at the
scenario's own end moment, not the real clock's (worker.eval.suite, the clock).

The rules a raw dump cannot pass (docs/eval.md, "What counts"): a positive check
(active, chain, ended) is met only by well-formed facts (worker.eval.form: one
short claim, in the third person); a gold fact held twice fails its assertion; an
``absent`` check reads what the read path returns (``read``: per reader, the facts a
chat server would be given) and holds only in a scenario where something it should
remember was remembered (a positive check held), so an empty memory scores nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from worker.eval.bootstrap import intervals
from worker.eval.form import fault, well_formed
from worker.eval.suite import (
    KINDS,
    Absent,
    Active,
    Chain,
    PersonGold,
    Portrait,
    Scenario,
    Words,
)
from worker.store.types import FactRecord
from worker.store.visibility import believed_at

# What the read path returns at the scenario's end, per reader: None (no agent) and
# each agent the scenario names (worker.read's choice: the profile, and that agent's
# relationship facts).
ReadViews = Mapping[str | None, Sequence[FactRecord]]

CheckKind = Literal["active", "absent", "chain", "ended", "portrait"]


@dataclass(frozen=True, slots=True)
class People:
    """The user's persons at the end (docs/persons.md): per person id its names (display
    name, relation, aliases), and the active facts about them."""

    names: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    facts: Sequence[FactRecord] = ()

    def named(self, person_id: int | None, words: str) -> bool:
        gold = Words(words=(words,))
        return person_id is not None and any(
            gold.found_in(n) for n in self.names.get(person_id, ()))


NO_PEOPLE = People()


@dataclass(frozen=True, slots=True)
class Check:
    kind: CheckKind
    said: str  # the assertion, in words
    held: bool
    why: str = ""  # what was found instead, when it did not hold
    # An absent check that found nothing but did not count: nothing the scenario
    # should have left was remembered (not a false memory).
    gated: bool = False


@dataclass(frozen=True, slots=True)
class ScenarioScore:
    scenario: str
    kind: str
    checks: tuple[Check, ...]
    duplicates: int  # gold facts matched by two or more active facts
    malformed: int = 0  # active facts that are not well-formed facts (worker.eval.form)

    @property
    def held(self) -> int:
        return sum(c.held for c in self.checks)

    @property
    def false_memories(self) -> int:
        return sum(1 for c in self.checks if c.kind == "absent" and not c.held
                   and not c.gated)

    @property
    def passed(self) -> bool:
        return self.held == len(self.checks) and not self.duplicates


@dataclass(slots=True)
class KindScore:
    """A kind's scenarios summed (or every kind's: the totals)."""

    kind: str
    scenarios: int = 0
    passed: int = 0
    assertions: int = 0
    held: int = 0
    false_memories: int = 0
    duplicates: int = 0
    chains: int = 0
    chains_held: int = 0
    malformed: int = 0
    failed: list[tuple[str, Check]] = field(default_factory=list)
    # The bootstrap 95% interval of the accuracy (worker.eval.bootstrap), set by
    # by_kind; None for a single scenario's sum.
    interval: tuple[float, float] | None = None

    def add(self, score: ScenarioScore) -> None:
        self.scenarios += 1
        self.passed += score.passed
        self.assertions += len(score.checks)
        self.held += score.held
        self.false_memories += score.false_memories
        self.duplicates += score.duplicates
        self.malformed += score.malformed
        chains = [c for c in score.checks if c.kind == "chain"]
        self.chains += len(chains)
        self.chains_held += sum(c.held for c in chains)
        self.failed.extend((score.scenario, c) for c in score.checks if not c.held)

    @property
    def accuracy(self) -> float:
        """Assertions held over assertions: the end state's accuracy."""
        return self.held / self.assertions if self.assertions else 0.0


def active_at(fact: FactRecord, moment: datetime) -> bool:
    """The store's own rule for what a read at ``moment`` believes (one definition:
    worker.store.visibility, after fact_rules.sql)."""
    return believed_at(fact, moment)


def _quoted(facts: Iterable[FactRecord], limit: int = 3) -> str:
    texts = [f"{f.text!r}" + (f" (agent {f.agent_id})" if f.agent_id else "") for f in facts]
    more = f" and {len(texts) - limit} more" if len(texts) > limit else ""
    return ", ".join(texts[:limit]) + more


def _in_scope(fact: FactRecord, gold: Active) -> bool:
    if gold.agent is not None:
        return fact.scope == "relationship" and fact.agent_id == gold.agent
    return gold.scope is None or fact.scope == gold.scope


_MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august",
           "september", "october", "november", "december")
_MONTH = "|".join(_MONTHS)
_TEXT_DATES = re.compile(
    rf"(?<!\d)(?P<iso>\d{{4}}-\d{{2}}(?:-\d{{2}})?)(?!\d)"
    rf"|(?<!\w)(?P<day>\d{{1,2}})(?:st|nd|rd|th)? (?P<dmonth>{_MONTH}),?"
    rf" (?P<dyear>\d{{4}})(?!\d)"
    rf"|(?<!\w)(?P<month>{_MONTH})(?: (?P<mday>\d{{1,2}})(?:st|nd|rd|th)?,?)?"
    rf" (?P<myear>\d{{4}})(?!\d)"
    rf"|(?<![\w-])(?P<year>(?:19|20)\d{{2}})(?![\w-])",
    re.IGNORECASE)


def text_dates(text: str) -> list[str]:
    """The dates a fact's text names, as YYYY, YYYY-MM or YYYY-MM-DD (English month
    names): how a memory without a validity column (mem0) can still say when."""
    out: list[str] = []
    for m in _TEXT_DATES.finditer(text):
        if m["iso"]:
            out.append(m["iso"])
        elif m["dmonth"]:
            month = _MONTHS.index(m["dmonth"].lower()) + 1
            out.append(f"{m['dyear']}-{month:02d}-{int(m['day']):02d}")
        elif m["month"]:
            month = _MONTHS.index(m["month"].lower()) + 1
            day = f"-{int(m['mday']):02d}" if m["mday"] else ""
            out.append(f"{m['myear']}-{month:02d}{day}")
        else:
            out.append(m["year"])
    return out


def _starts(fact: FactRecord) -> list[str]:
    """When the fact says it became true: its validity column, else the dates its text
    names, else when it was learned."""
    if fact.valid_from is not None:
        return [fact.valid_from.date().isoformat()]
    return text_dates(fact.text) or [fact.observed_at.date().isoformat()]


def check_active(gold: Active, active: Sequence[FactRecord],
                 people: People = NO_PEOPLE) -> tuple[Check, bool]:
    """The check, and whether the gold fact is duplicated (two active facts match it).
    Only a well-formed fact (worker.eval.form) holds it; held twice, it fails. A gold
    fact ``about`` a person is looked for among that person's facts (``people``); any
    other among the user's own (``active``)."""
    where = f" (agent {gold.agent})" if gold.agent else f" ({gold.scope})" if gold.scope else ""
    where += f" (about {gold.about})" if gold.about else ""
    dated = f" from {gold.valid_from}" if gold.valid_from else ""
    said = f"active: {gold.said()}{where}{dated}"
    if gold.about is not None:
        theirs = [f for f in people.facts if gold.found_in(f.text)]
        found = [f for f in theirs if people.named(f.person_id, gold.about)]
        if not found:
            wrong = [f for f in active if gold.found_in(f.text)]
            why = (f"kept as the user's: {_quoted(wrong)}" if wrong else
                   f"about another person: {_quoted(theirs)}" if theirs else
                   "no active fact matches")
            return Check("active", said, False, why), False
        active = found
    found = [f for f in active if gold.found_in(f.text)]
    if not found:
        return Check("active", said, False, "no active fact matches"), False
    scoped = [f for f in found if _in_scope(f, gold)]
    if not scoped:
        return Check("active", said, False, f"in another scope: {_quoted(found)}"), False
    duplicated = len(scoped) > 1
    formed = [f for f in scoped if well_formed(f.text)]
    if not formed:
        first = scoped[0]
        return Check("active", said, False,
                     f"not a fact: {_quoted([first])}: {fault(first.text)}"), duplicated
    if duplicated:
        return Check("active", said, False, f"held {len(scoped)} times: {_quoted(scoped)}"), True
    if gold.valid_from is not None:
        valid_from = gold.valid_from
        dated_right = [f for f in formed if any(d.startswith(valid_from) for d in _starts(f))]
        if not dated_right:
            starts = ", ".join(sorted({d for f in formed for d in _starts(f)}))
            return Check("active", said, False, f"valid from {starts}"), duplicated
    return Check("active", said, True), duplicated


def _visible(fact: FactRecord, agent: str | None) -> bool:
    return fact.scope == "profile" or (agent is not None and fact.agent_id == agent)


def read_views(active: Sequence[FactRecord], agents: Iterable[str]) -> dict[str | None,
                                                                          list[FactRecord]]:
    """What worker.read returns at the end for no agent and for each agent: the profile,
    and the agent's own relationship facts (for memories that keep no reader's view)."""
    return {agent: [f for f in active if _visible(f, agent)] for agent in (None, *agents)}


def check_absent(gold: Absent, read: ReadViews, remembered: bool = True) -> Check:
    """No fact the read path returns matches: that of ``visible_to``, else any reader's.
    Held only when the scenario ``remembered`` something it should have."""
    seen = f" for agent {gold.visible_to}" if gold.visible_to else ""
    said = f"absent{seen}: {gold.said()}"
    readers = [gold.visible_to] if gold.visible_to else list(read)
    present: dict[int, FactRecord] = {}
    for reader in readers:
        present.update((f.id, f) for f in read.get(reader, ()) if gold.false_in(f.text))
    if present:
        return Check("absent", said, False, f"read: {_quoted(present.values())}")
    if not remembered:
        return Check("absent", said, False, "nothing it should hold was remembered", gated=True)
    return Check("absent", said, True)


def check_chain(gold: Chain, facts: Sequence[FactRecord]) -> Check:
    said = f"chain: {gold.old.said()} -> {gold.new.said()}"
    by_id = {f.id: f for f in facts}
    old = [f for f in facts if gold.old.found_in(f.text) and well_formed(f.text)]
    if not old:
        return Check("chain", said, False, "no fact ever matched the old words")
    successors = [by_id[f.superseded_by] for f in old
                  if f.superseded_by is not None and f.superseded_by in by_id]
    if any(gold.new.found_in(s.text) and well_formed(s.text) for s in successors):
        return Check("chain", said, True)
    if successors:
        return Check("chain", said, False, f"superseded by {_quoted(successors)}")
    return Check("chain", said, False, "the old fact was superseded by nothing")


def check_ended(gold: Words, facts: Sequence[FactRecord], moment: datetime) -> Check:
    said = f"ended: {gold.said()}"
    found = [f for f in facts
             if f.observed_at <= moment and gold.found_in(f.text) and well_formed(f.text)]
    if not found:
        return Check("ended", said, False, "never learned as a fact")
    still = [f for f in found if active_at(f, moment)]
    if len(still) == len(found):
        return Check("ended", said, False, f"still active: {_quoted(still)}")
    return Check("ended", said, True)


def check_person(gold: PersonGold, people: People) -> Check:
    """A person whose current name and relation match the gold's words exists."""
    said = f"person: {gold.name or '?'} ({gold.relation or '?'})"
    for names in people.names.values():
        name_ok = gold.name is None or Words(words=(gold.name,)).found_in(names[0])
        relation_ok = gold.relation is None or Words(words=(gold.relation,)).found_in(names[1])
        if name_ok and relation_ok:
            return Check("active", said, True)
    known = "; ".join(f"{n[0] or '?'} ({n[1] or '?'})" for n in people.names.values())
    return Check("active", said, False, f"persons: {known or 'none'}")


def check_portrait(gold: Portrait, portrait: str | None) -> list[Check]:
    """The portrait's checks: each ``has`` found in its text; each ``lacks`` not, held
    only when some ``has`` held (no portrait, or an empty one, holds nothing)."""
    if portrait is None:
        return [Check("portrait", f"portrait: {w.said()}", False, "no portrait")
                for w in (*gold.has, *gold.lacks)]
    shown = portrait if len(portrait) <= 160 else portrait[:159] + "\u2026"
    checks = [Check("portrait", f"portrait has: {w.said()}", w.found_in(portrait),
                    "" if w.found_in(portrait) else f"not in {shown!r}") for w in gold.has]
    remembered = any(c.held for c in checks)
    for lack in gold.lacks:
        said = f"portrait lacks: {lack.said()}"
        if lack.false_in(portrait):
            checks.append(Check("portrait", said, False, f"in {shown!r}"))
        elif not remembered:
            checks.append(Check("portrait", said, False, "nothing it should say was said",
                                gated=True))
        else:
            checks.append(Check("portrait", said, True))
    return checks


def score_scenario(scenario: Scenario, facts: Sequence[FactRecord],
                   read: ReadViews | None = None, people: People = NO_PEOPLE,
                   portrait: str | None = None) -> ScenarioScore:
    """``facts``: every version of the scenario's user's facts, superseded ones included;
    ``read``: what the read path returned at the end, per reader (by default worked out
    from the active facts: ``read_views``); ``people``: the user's persons and the facts
    about them (a fact about a person is never among ``facts``: docs/persons.md);
    ``portrait``: the user's portrait at the end (None: none)."""
    moment = scenario.ends_at
    # A memory that keeps no persons (a baseline) keeps every fact as the user's.
    active = [f for f in facts if active_at(f, moment) and f.person_id is None]
    people = People(people.names, [f for f in people.facts if active_at(f, moment)])
    if read is None:
        read = read_views(active, sorted({s.agent for s in scenario.sessions if s.agent}))
    expect = scenario.expect
    checks: list[Check] = []
    duplicates = 0
    for gold in expect.active:
        check, duplicated = check_active(gold, active, people)
        checks.append(check)
        duplicates += duplicated
    checks.extend(check_chain(gold, facts) for gold in expect.chains)
    checks.extend(check_ended(gold, facts, moment) for gold in expect.ended)
    checks.extend(check_person(gold, people) for gold in expect.persons)
    remembered = any(c.held for c in checks)
    checks.extend(check_absent(gold, read, remembered) for gold in expect.absent)
    if expect.portrait is not None:
        checks.extend(check_portrait(expect.portrait, portrait))
    malformed = sum(1 for f in active if not well_formed(f.text))
    return ScenarioScore(scenario.id, scenario.kind, tuple(checks), duplicates, malformed)


def by_kind(scores: Iterable[ScenarioScore]) -> tuple[list[KindScore], KindScore]:
    """Per kind, in KINDS' order (kinds without scenarios left out), and the totals,
    each with its bootstrap 95% interval (worker.eval.bootstrap)."""
    kinds = {kind: KindScore(kind) for kind in KINDS}
    total = KindScore("total")
    samples: dict[str, list[tuple[int, int]]] = {}
    for score in scores:
        kinds.setdefault(score.kind, KindScore(score.kind)).add(score)
        total.add(score)
        samples.setdefault(score.kind, []).append((score.held, len(score.checks)))
    per_kind, total.interval = intervals(samples)
    for kind, interval in per_kind.items():
        kinds[kind].interval = interval
    return [k for k in kinds.values() if k.scenarios], total
