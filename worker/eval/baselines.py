"""`memfleet eval`'s baselines: memories made from the scenario itself, with no model.

Each baseline turns a scenario's conversation into the rows a memory would hold
(every version, as the store lists them: worker.store.types.FactRecord), and the
suite's scorer (worker.eval.score) reads them as it reads memfleet's. They keep
the score honest: a suite a raw dump passes measures nothing.

- ``empty``: nothing is ever stored.
- ``raw-messages``: every user message is stored as it was said, a fact of the
  profile, learned at its hand-over (worker.eval.run.plan_steps' moments); when
  a new session starts, every fact of the session before is superseded by the new
  session's first message (so "each session supersedes the previous one": the
  old city is no longer active once a later session says anything).
- ``latest-session``: the last session's user messages only, as they were said.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from worker.eval.run import TURN_GAP
from worker.eval.score import ScenarioScore, score_scenario
from worker.eval.suite import Scenario, Session
from worker.store.types import FactRecord

Baseline = Callable[[Scenario, str], list[FactRecord]]


def _fact(fact_id: int, user_id: str, text: str, at: datetime, session: Session,
          superseded_at: datetime | None = None,
          superseded_by: int | None = None) -> FactRecord:
    return FactRecord(id=fact_id, user_id=user_id, text=text, category="fact", importance=5,
                      observed_at=at, source_session_id=session.id, source_kind="extracted",
                      superseded_at=superseded_at, superseded_by=superseded_by,
                      created_at=at)


def _said(session: Session) -> list[tuple[str, datetime]]:
    """The session's user messages, each at its hand-over moment (worker.eval.run's rhythm)."""
    said = [t.content for t in session.turns if t.role == "user"]
    return [(text, session.at + n * TURN_GAP) for n, text in enumerate(said)]


def empty(scenario: Scenario, user_id: str) -> list[FactRecord]:
    return []


def raw_messages(scenario: Scenario, user_id: str) -> list[FactRecord]:
    # Ids are given session by session, so the next session's first message's id is
    # known before the previous session's facts are written.
    said = [_said(s) for s in scenario.sessions]
    firsts: list[int] = []
    next_id = 1
    for messages in said:
        firsts.append(next_id)
        next_id += len(messages)
    facts: list[FactRecord] = []
    for index, (session, messages) in enumerate(zip(scenario.sessions, said, strict=True)):
        later = index + 1 < len(said) and said[index + 1]
        ended_at = scenario.sessions[index + 1].at if later else None
        successor = firsts[index + 1] if later else None
        for offset, (text, at) in enumerate(messages):
            facts.append(_fact(firsts[index] + offset, user_id, text, at, session,
                               ended_at, successor))
    return facts


def latest_session(scenario: Scenario, user_id: str) -> list[FactRecord]:
    session = scenario.sessions[-1]
    return [_fact(n, user_id, text, at, session)
            for n, (text, at) in enumerate(_said(session), start=1)]


BASELINES: dict[str, Baseline] = {
    "empty": empty,
    "raw-messages": raw_messages,
    "latest-session": latest_session,
}


def baseline_scores(scenarios: Sequence[Scenario]) -> dict[str, list[ScenarioScore]]:
    """Every baseline's scores on the scenarios, by the suite's scorer."""
    return {name: [score_scenario(s, baseline(s, f"baseline-{s.id}")) for s in scenarios]
            for name, baseline in BASELINES.items()}
