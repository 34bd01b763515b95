"""`memfleet eval`'s scoring: a scenario's gold assertions against the facts it left.

Pure: the facts in (every version, superseded ones too, as the store lists them), the
checks out. A fact is active at the end when it was learned by then, is not superseded
by then and has not expired by then (``active_at``): the end state is read at the
scenario's own end moment, not the real clock's (worker.ops.eval_suite, the clock).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from worker.ops.eval_suite import KINDS, Absent, Active, Chain, Scenario, Words
from worker.store.types import FactRecord

CheckKind = Literal["active", "absent", "chain", "ended"]


@dataclass(frozen=True, slots=True)
class Check:
    kind: CheckKind
    said: str  # the assertion, in words
    held: bool
    why: str = ""  # what was found instead, when it did not hold


@dataclass(frozen=True, slots=True)
class ScenarioScore:
    scenario: str
    kind: str
    checks: tuple[Check, ...]
    duplicates: int  # gold facts matched by two or more active facts

    @property
    def held(self) -> int:
        return sum(c.held for c in self.checks)

    @property
    def false_memories(self) -> int:
        return sum(1 for c in self.checks if c.kind == "absent" and not c.held)

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
    failed: list[tuple[str, Check]] = field(default_factory=list)

    def add(self, score: ScenarioScore) -> None:
        self.scenarios += 1
        self.passed += score.passed
        self.assertions += len(score.checks)
        self.held += score.held
        self.false_memories += score.false_memories
        self.duplicates += score.duplicates
        chains = [c for c in score.checks if c.kind == "chain"]
        self.chains += len(chains)
        self.chains_held += sum(c.held for c in chains)
        self.failed.extend((score.scenario, c) for c in score.checks if not c.held)

    @property
    def accuracy(self) -> float:
        """Assertions held over assertions: the end state's accuracy."""
        return self.held / self.assertions if self.assertions else 0.0


def active_at(fact: FactRecord, moment: datetime) -> bool:
    return (fact.observed_at <= moment
            and (fact.superseded_at is None or fact.superseded_at > moment)
            and (fact.expires_at is None or fact.expires_at > moment))


def _quoted(facts: Iterable[FactRecord], limit: int = 3) -> str:
    texts = [f"{f.text!r}" + (f" (agent {f.agent_id})" if f.agent_id else "") for f in facts]
    more = f" and {len(texts) - limit} more" if len(texts) > limit else ""
    return ", ".join(texts[:limit]) + more


def _in_scope(fact: FactRecord, gold: Active) -> bool:
    if gold.agent is not None:
        return fact.scope == "relationship" and fact.agent_id == gold.agent
    return gold.scope is None or fact.scope == gold.scope


def _starts(fact: FactRecord) -> str:
    return (fact.valid_from or fact.observed_at).date().isoformat()


def check_active(gold: Active, active: Sequence[FactRecord]) -> tuple[Check, bool]:
    """The check, and whether the gold fact is duplicated (two active facts match it)."""
    where = f" (agent {gold.agent})" if gold.agent else f" ({gold.scope})" if gold.scope else ""
    dated = f" from {gold.valid_from}" if gold.valid_from else ""
    once = " once" if gold.once else ""
    said = f"active{once}: {gold.said()}{where}{dated}"
    found = [f for f in active if gold.found_in(f.text)]
    if not found:
        return Check("active", said, False, "no active fact matches"), False
    scoped = [f for f in found if _in_scope(f, gold)]
    if not scoped:
        return Check("active", said, False, f"in another scope: {_quoted(found)}"), False
    duplicated = len(scoped) > 1
    if gold.once and duplicated:
        return Check("active", said, False, f"held {len(scoped)} times: {_quoted(scoped)}"), True
    if gold.valid_from is not None:
        dated_right = [f for f in scoped if _starts(f).startswith(gold.valid_from)]
        if not dated_right:
            starts = ", ".join(sorted({_starts(f) for f in scoped}))
            return Check("active", said, False, f"valid from {starts}"), duplicated
    return Check("active", said, True), duplicated


def _visible(fact: FactRecord, agent: str | None) -> bool:
    return agent is None or fact.scope == "profile" or fact.agent_id == agent


def check_absent(gold: Absent, active: Sequence[FactRecord]) -> Check:
    seen = f" for agent {gold.visible_to}" if gold.visible_to else ""
    said = f"absent{seen}: {gold.said()}"
    present = [f for f in active if _visible(f, gold.visible_to) and gold.false_in(f.text)]
    if present:
        return Check("absent", said, False, f"active: {_quoted(present)}")
    return Check("absent", said, True)


def check_chain(gold: Chain, facts: Sequence[FactRecord]) -> Check:
    said = f"chain: {gold.old.said()} -> {gold.new.said()}"
    by_id = {f.id: f for f in facts}
    old = [f for f in facts if gold.old.found_in(f.text)]
    if not old:
        return Check("chain", said, False, "no fact ever matched the old words")
    successors = [by_id[f.superseded_by] for f in old
                  if f.superseded_by is not None and f.superseded_by in by_id]
    if any(gold.new.found_in(s.text) for s in successors):
        return Check("chain", said, True)
    if successors:
        return Check("chain", said, False, f"superseded by {_quoted(successors)}")
    return Check("chain", said, False, "the old fact was superseded by nothing")


def check_ended(gold: Words, facts: Sequence[FactRecord], moment: datetime) -> Check:
    said = f"ended: {gold.said()}"
    found = [f for f in facts if f.observed_at <= moment and gold.found_in(f.text)]
    if not found:
        return Check("ended", said, False, "never learned")
    still = [f for f in found if active_at(f, moment)]
    if len(still) == len(found):
        return Check("ended", said, False, f"still active: {_quoted(still)}")
    return Check("ended", said, True)


def score_scenario(scenario: Scenario, facts: Sequence[FactRecord]) -> ScenarioScore:
    """``facts``: every version of the scenario's user's facts, superseded ones included."""
    moment = scenario.ends_at
    active = [f for f in facts if active_at(f, moment)]
    expect = scenario.expect
    checks: list[Check] = []
    duplicates = 0
    for gold in expect.active:
        check, duplicated = check_active(gold, active)
        checks.append(check)
        duplicates += duplicated
    checks.extend(check_absent(gold, active) for gold in expect.absent)
    checks.extend(check_chain(gold, facts) for gold in expect.chains)
    checks.extend(check_ended(gold, facts, moment) for gold in expect.ended)
    return ScenarioScore(scenario.id, scenario.kind, tuple(checks), duplicates)


def by_kind(scores: Iterable[ScenarioScore]) -> tuple[list[KindScore], KindScore]:
    """Per kind, in KINDS' order (kinds without scenarios left out), and the totals."""
    kinds = {kind: KindScore(kind) for kind in KINDS}
    total = KindScore("total")
    for score in scores:
        kinds.setdefault(score.kind, KindScore(score.kind)).add(score)
        total.add(score)
    return [k for k in kinds.values() if k.scenarios], total
