"""Question answering on the local model, over each system's own read path (``--qa``).

Each scenario's questions (worker.eval.suite.Question) are asked at its end, of what
each system itself gives a chat server to answer from, by the same answer model, prompt
(worker.eval.qa_wire) and scoring (exact match, worker.eval.qa_score):

- memfleet: `memfleet eval --qa` (worker.eval.qa): the known-facts block of its read,
  the question as the query, the question's agent's relationship facts beside the
  profile;
- mem0: ``Memory.search(question, user_id=...)`` at the scenario's end, as mem0's docs
  show it (bench/eval_mem0/driver.py), less the hits added under another agent (a
  memory added with an ``agent_id`` is that agent's, as the scoring reads it);
- the baselines: their rows active at the end (the profile's and the question's
  agent's).

mem0's hits and the baselines' rows are written as memfleet's block is
(worker.read.format_block: one line a memory, with the day it was learned), so the
answer model reads every system in one layout. Their answers go to the endpoint as
system ``qa``; memfleet's answers are memfleet eval's own calls (task
``memory_question``). Neither counts in a system's cost per turn (``is_question``);
the searches' query embeddings do (one per question for every system but the
baselines).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from worker.eval.baselines import BASELINES
from worker.eval.bootstrap import intervals
from worker.eval.qa_openai import OpenAIAnswerer
from worker.eval.qa_score import QuestionScore, exact_match
from worker.eval.qa_wire import AnswerRequest
from worker.eval.suite import Question, Scenario
from worker.providers.openai_chat import ChatOptions
from worker.read import format_block
from worker.store.types import FactRecord

QA_SYSTEM = "qa"  # the endpoint's system name for the answers asked here
QUESTION_TASK = "memory_question"  # the answer pass's json_schema name (worker.eval.qa_openai)
ANSWER_TIMEOUT_S = 1800.0


def is_question(entry: Mapping[str, Any]) -> bool:
    """Whether a recorded call (bench.eval_local.serve) is an answer to a question."""
    request = entry.get("request")
    if not isinstance(request, Mapping):
        return False
    fmt = request.get("response_format")
    schema = fmt.get("json_schema") if isinstance(fmt, Mapping) else None
    return isinstance(schema, Mapping) and schema.get("name") == QUESTION_TASK


@dataclass(frozen=True, slots=True)
class Asked:
    """A question and the block a system answers it from."""

    scenario: Scenario
    question: Question
    facts: tuple[FactRecord, ...]


def _row(n: int, text: str, at: datetime, agent: str | None) -> FactRecord:
    return FactRecord(id=n, user_id="qa", text=text, category="fact", importance=5,
                      observed_at=at, source_session_id=None, source_kind="extracted",
                      superseded_at=None, superseded_by=None, created_at=at,
                      scope="relationship" if agent else "profile", agent_id=agent)


def _learned(value: Any, fallback: datetime) -> datetime:
    try:
        at = datetime.fromisoformat(str(value))
    except ValueError:
        return fallback
    return at if at.tzinfo is not None else at.replace(tzinfo=fallback.tzinfo)


def _readable(fact: FactRecord, question: Question) -> bool:
    return fact.agent_id is None or fact.agent_id == question.agent


def mem0_asked(scenarios: Sequence[Scenario],
               searches: Mapping[str, Sequence[Any]]) -> list[Asked]:
    """Each question with mem0's hits for it (``searches``: per scenario id, one hit list
    per question, None where the search raised: an empty block)."""
    asked = []
    for scenario in scenarios:
        found = list(searches.get(scenario.id, []))
        for n, question in enumerate(scenario.questions):
            hits = found[n] if n < len(found) and found[n] else []
            rows = [_row(i, str(h.get("memory") or ""), _learned(h.get("created_at"),
                                                                  scenario.ends_at),
                         h.get("agent_id") or None)
                    for i, h in enumerate(hits, 1) if isinstance(h, Mapping)]
            asked.append(Asked(scenario, question,
                               tuple(r for r in rows if r.text and _readable(r, question))))
    return asked


def baseline_asked(scenarios: Sequence[Scenario]) -> dict[str, list[Asked]]:
    """Each baseline's questions with its rows active at the end."""
    out: dict[str, list[Asked]] = {}
    for name, baseline in BASELINES.items():
        asked = out.setdefault(name, [])
        for scenario in scenarios:
            active = [f for f in baseline(scenario, f"baseline-{scenario.id}")
                      if f.superseded_at is None]
            asked += [Asked(scenario, q, tuple(f for f in active if _readable(f, q)))
                      for q in scenario.questions]
    return out


async def _answer_all(asked: Sequence[Asked], options: ChatOptions) -> list[QuestionScore]:
    answerer = OpenAIAnswerer(options)
    try:
        scores = []
        for item in asked:
            reply = await answerer.answer(AnswerRequest(question=item.question.ask,
                                                        known_facts=format_block(item.facts)))
            answer = reply.value.answer
            scores.append(QuestionScore(item.scenario.id, item.scenario.kind,
                                        item.question.ask, item.question.answer, answer,
                                        exact_match(item.question, answer),
                                        facts=len(item.facts)))
        return scores
    finally:
        await answerer.aclose()


def answer(asked: Sequence[Asked], base_url: str, model: str) -> list[QuestionScore]:
    """Every question answered by ``model`` at ``base_url`` (a system's /v1 URL)."""
    options = ChatOptions(base_url=base_url, api_key="none", model=model,
                          timeout_s=ANSWER_TIMEOUT_S)
    return asyncio.run(_answer_all(asked, options))


def memfleet_scores(document: Mapping[str, Any]) -> list[QuestionScore]:
    """memfleet's answers, from `memfleet eval --qa --json`'s document."""
    return [QuestionScore(q["scenario"], q["kind"], q["ask"], q["gold"], q["answer"] or "",
                          bool(q["exact"]), facts=int(q.get("facts") or 0))
            for q in (document.get("qa") or {}).get("questions", [])]


def _cell(scores: Sequence[QuestionScore]) -> str:
    if not scores:
        return "-"
    by_scenario: dict[str, list[int]] = {}
    for s in scores:
        right, asked = by_scenario.setdefault(s.scenario, [0, 0])
        by_scenario[s.scenario] = [right + s.exact, asked + 1]
    _, (low, high) = intervals({"all": [(r, a) for r, a in by_scenario.values()]})
    right = sum(s.exact for s in scores)
    return (f"{right}/{len(scores)} {100 * right / len(scores):.0f}% "
            f"[{100 * low:.0f}-{100 * high:.0f}]")


def qa_comparison(per_system: Mapping[str, Sequence[QuestionScore]]) -> str:
    """Right answers (exact match) per kind and system, with bootstrap 95% intervals
    (scenarios resampled), and the facts a block held on average."""
    names = list(per_system)
    kinds = list(dict.fromkeys(s.kind for scores in per_system.values() for s in scores))
    rows = [("kind", *names)]
    for kind in [*kinds, "total"]:
        rows.append((kind, *(_cell([s for s in per_system[n]
                                    if kind in ("total", s.kind)]) for n in names)))
    rows.append(("facts a block", *(
        f"{sum(s.facts for s in per_system[n]) / max(1, len(per_system[n])):.1f}"
        for n in names)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(r, widths, strict=True)))
                     for r in rows)


def wrong_answers(per_system: Mapping[str, Sequence[QuestionScore]], limit: int = 12) -> str:
    """Each system's first wrong answers, for the reader to see why (ids and the model's
    words only: the scenarios are the suite's, not a user's)."""
    out = []
    for name, scores in per_system.items():
        wrong = [s for s in scores if not s.exact]
        out.append(f"{name}: {len(wrong)} wrong")
        out += [f"  {s.scenario}: {s.ask} -> {s.answer!r} (gold {s.gold!r})"
                for s in wrong[:limit]]
    return "\n".join(out)
