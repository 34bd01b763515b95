"""mem0's side of the eval comparison, pure: the calls a scenario makes, the facts it left.

The calls. memfleet's suite commits a session's new messages once per step
(worker.eval.run.plan_steps: after a session, or after each user turn of a
``commit_each_turn`` session). mem0's equivalent of a commit is one ``Memory.add``
of the same new messages, under the scenario's user and the session's agent. So
both systems are given the same slices, in the same order.

The facts. mem0 keeps one row per memory and changes it in place; its ``add``
answers with what it did to each (``{"id", "memory", "event", "previous_memory"}``,
event ADD, UPDATE or DELETE). Replaying those answers in order gives every version
of every memory, at the moment of the add that made it, in the FactRecord shape
the suite's scorer reads (worker.eval.score): an UPDATE ends the old version
and points it at the new one (a chain), a DELETE ends it with no successor. The
rows left in mem0's table are the end state's truth: a version the replay thinks
active but whose row is gone is ended at the scenario's end, and a row the replay
never saw is added as active.

Scored from what mem0 stores, not memfleet's columns: mem0 records no validity dates
and no expiry, so ``valid_from`` is left empty and the scorer reads a start date from
the memory's text when it names one ("since 2019", "on 17 March 2026"), else takes the
moment it was learned (worker.eval.score.text_dates); scope is mem0's own
``agent_id``: a memory added with one is read by that agent's search only (a
relationship fact), one added without is every agent's (the profile).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from worker.eval.run import plan_steps
from worker.eval.suite import Scenario
from worker.store.types import FactRecord


@dataclass(frozen=True, slots=True)
class Mem0Add:
    """One ``Memory.add``: the messages a memfleet commit of the same step would see new."""

    session_id: str
    agent_id: str | None
    at: datetime
    messages: tuple[dict[str, str], ...]


def mem0_adds(scenario: Scenario) -> list[Mem0Add]:
    adds: list[Mem0Add] = []
    seen: dict[str, int] = {}  # messages of each session already added
    for step in plan_steps(scenario):
        last = step[-1]  # a step's hand-overs are one session's growing list
        new = last.messages[seen.get(last.session_id, 0):]
        seen[last.session_id] = len(last.messages)
        if new:
            adds.append(Mem0Add(last.session_id, last.agent_id, last.at, new))
    return adds


@dataclass(frozen=True, slots=True)
class Mem0Row:
    """A memory left in mem0's table at the end."""

    id: str
    text: str
    agent_id: str | None
    created_at: datetime | None = None  # mem0's own metadata (the add's moment, when given)


@dataclass(slots=True)
class _Version:
    key: int
    memory_id: str
    text: str
    agent_id: str | None
    observed_at: datetime
    ended_at: datetime | None = None
    ended_by: int | None = None


@dataclass(slots=True)
class _Replay:
    versions: list[_Version] = field(default_factory=list)
    current: dict[str, _Version] = field(default_factory=dict)  # memory id -> live version

    def start(self, memory_id: str, text: str, agent: str | None, at: datetime) -> _Version:
        version = _Version(len(self.versions) + 1, memory_id, text, agent, at)
        self.versions.append(version)
        self.current[memory_id] = version
        return version

    def end(self, memory_id: str, at: datetime, by: int | None) -> None:
        version = self.current.pop(memory_id, None)
        if version is not None:
            version.ended_at, version.ended_by = at, by


def _results(answer: Any) -> list[Mapping[str, Any]]:
    """``add``'s answer: ``{"results": [...]}`` (mem0 1.x and later) or a bare list."""
    items = answer.get("results", []) if isinstance(answer, Mapping) else answer
    return [i for i in items or [] if isinstance(i, Mapping)]


def mem0_facts(user_id: str, adds: Sequence[Mem0Add], answers: Sequence[Any],
               rows: Sequence[Mem0Row], end: datetime) -> list[FactRecord]:
    """Every version of the user's memories, replayed from ``add``'s answers (one per add,
    in order) and reconciled with the ``rows`` left at the ``end``."""
    replay = _Replay()
    for add, answer in zip(adds, answers, strict=True):
        for item in _results(answer):
            memory_id, event = str(item.get("id", "")), str(item.get("event", "ADD")).upper()
            text = str(item.get("memory", ""))
            if event == "ADD":
                replay.start(memory_id, text, add.agent_id, add.at)
            elif event == "UPDATE":
                before = replay.current.get(memory_id)
                agent = before.agent_id if before is not None else add.agent_id
                if before is None:  # an update of a memory the replay missed: its old text
                    replay.start(memory_id, str(item.get("previous_memory", "")), agent, add.at)
                new = _Version(len(replay.versions) + 1, memory_id, text, agent, add.at)
                replay.end(memory_id, add.at, new.key)
                replay.versions.append(new)
                replay.current[memory_id] = new
            elif event == "DELETE":
                replay.end(memory_id, add.at, None)
    left = {row.id: row for row in rows}
    for memory_id in list(replay.current):
        row = left.get(memory_id)
        if row is None:
            replay.end(memory_id, end, None)
        elif row.text != replay.current[memory_id].text:  # changed without telling: the row wins
            new = _Version(len(replay.versions) + 1, memory_id, row.text, row.agent_id, end)
            replay.end(memory_id, end, new.key)
            replay.versions.append(new)
            replay.current[memory_id] = new
    first = min((a.at for a in adds), default=end)
    for row in rows:
        if row.id not in replay.current:
            replay.start(row.id, row.text, row.agent_id, row.created_at or first)
    return [_record(user_id, v) for v in replay.versions]


def _record(user_id: str, v: _Version) -> FactRecord:
    return FactRecord(
        id=v.key, user_id=user_id, text=v.text, category="fact", importance=5,
        observed_at=v.observed_at, source_session_id=None, source_kind="extracted",
        superseded_at=v.ended_at, superseded_by=v.ended_by, created_at=v.observed_at,
        scope="relationship" if v.agent_id else "profile", agent_id=v.agent_id)
