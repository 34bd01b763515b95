"""`memfleet eval --retrieval --rerank`: the retrieval questions ranked as the prompt
split's volatile block ranks them (worker.read_split.rerank, imported, not copied),
beside the plain hybrid ranking: the option, the ranks, the tallies and the report."""

from __future__ import annotations

import argparse
import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import worker.eval.qa as qa
import worker.read_split as read_split
from worker.cli.evaluation import _check, rerank_line
from worker.cli.main import build_parser
from worker.config import Settings
from worker.errors import MemfleetError
from worker.eval.qa import QaChoice, reranked_facts
from worker.eval.qa_report import QaInfo, qa_json, qa_table
from worker.eval.qa_score import QuestionScore, qa_by_kind
from worker.eval.suite import Question, load_suite
from worker.read import SearchHit
from worker.read_split import RRF_BEST, RerankWeights
from worker.store.types import FactRecord

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def fact(i: int, text: str, *, days_old: float = 0.0, pinned: bool = False,
         scope: str = "profile", agent: str | None = None) -> FactRecord:
    at = NOW - timedelta(days=days_old)
    return FactRecord(id=i, user_id="u", text=text, category="fact", importance=5,
                      observed_at=at, source_session_id=None, source_kind="manual",
                      superseded_at=None, superseded_by=None, created_at=at, scope=scope,
                      agent_id=agent, pinned=pinned)


def hit(f: FactRecord, relevance: float, semantic_rank: int | None = 1) -> SearchHit:
    return SearchHit(f, relevance * RRF_BEST, semantic_rank, 1)


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["eval", *argv])


# ---------------------------------------------------------------- the option


def test_rerank_is_an_option_of_eval_and_needs_retrieval() -> None:
    assert parse().rerank is False
    assert parse("--retrieval", "--rerank").rerank is True
    _check(parse("--retrieval", "--rerank"))
    with pytest.raises(MemfleetError, match="--rerank needs --retrieval"):
        _check(parse("--rerank"))
    assert QaChoice().rerank is False


def test_the_report_names_the_weights_from_the_settings() -> None:
    assert rerank_line(Settings()) == "pin +0.2, agent +0.1, recency -0.1 over 90 days"
    moved = Settings(read_rerank_pin_boost=0.5, read_rerank_recency_days=30)  # type: ignore[call-arg]
    assert rerank_line(moved) == "pin +0.5, agent +0.1, recency -0.1 over 30 days"


# ---------------------------------------------------------------- the ranking


def test_the_eval_ranks_with_the_splits_own_function() -> None:
    # The re-ranking has one definition: the eval imports it.
    assert qa.rerank is read_split.rerank
    assert qa.RerankWeights is read_split.RerankWeights


def test_reranked_facts_lift_a_pin_and_the_agents_fact_and_sink_old_ones() -> None:
    top = fact(1, "most relevant, a year old", days_old=365)
    pinned = fact(2, "pinned", pinned=True)
    mine = fact(3, "coach's", scope="relationship", agent="coach")
    other = fact(4, "another agent's", scope="relationship", agent="other")
    hits = [hit(top, 1.0), hit(pinned, 0.85), hit(mine, 0.95), hit(other, 0.96)]
    order = reranked_facts(hits, RerankWeights(), now=NOW, agent_id="coach")
    # 1.05 (0.95 relevant), 1.05 (0.85 relevant), 0.96, 1.0 - 0.10 = 0.90
    assert [f.id for f in order] == [3, 2, 4, 1]
    # Every hit kept (the eval ranks them all), and no weight: the fused order.
    flat = RerankWeights(pin_boost=0, agent_boost=0, recency_penalty=0)
    assert [f.id for f in reranked_facts(hits, flat, now=NOW, agent_id="coach")] == \
        [1, 4, 3, 2]


class _Reader:
    def __init__(self, hits: list[SearchHit]) -> None:
        self.hits = hits
        self.asked: list[tuple[str, str, int, str | None]] = []

    async def search(self, user_id: str, query: str, *, top_k: int,
                     agent_id: str | None = None) -> list[SearchHit]:
        self.asked.append((user_id, query, top_k, agent_id))
        return self.hits


def _scenario_and_question() -> tuple[Any, Question]:
    scenario = next(s for s in load_suite() if s.questions)
    return scenario, scenario.questions[0].model_copy(update={"fact": None, "answer": "gold"})


async def test_ranked_keeps_the_plain_ranks_and_adds_the_reranked_one() -> None:
    scenario, question = _scenario_and_question()
    end = scenario.ends_at
    # Said at the scenario's end: no recency penalty; the gold one pinned.
    gold = dataclasses.replace(fact(9, "holds the gold", pinned=True), observed_at=end)
    other = dataclasses.replace(fact(1, "a distractor"), observed_at=end)
    reader = _Reader([hit(other, 1.0, 1), hit(gold, 0.9, 2)])
    score = QuestionScore(scenario.id, scenario.kind, question.ask, "gold", "", False)
    plain = await qa._ranked(reader, scenario, "u1", question, score, None)  # type: ignore[arg-type]
    assert (plain.rank, plain.semantic_rank, plain.reranked_rank) == (2, 2, None)
    ranked = await qa._ranked(reader, scenario, "u1", question, score,  # type: ignore[arg-type]
                              RerankWeights())
    assert (ranked.rank, ranked.semantic_rank, ranked.reranked_rank) == (2, 2, 1)
    assert reader.asked[0] == ("u1", question.ask, qa.SEARCH_DEPTH, question.agent)


# ---------------------------------------------------------------- tallies and report


def _scores() -> list[QuestionScore]:
    return [
        QuestionScore("a", "plain", "Q1?", "x", "", False, rank=2, semantic_rank=2,
                      reranked_rank=1),
        QuestionScore("b", "plain", "Q2?", "y", "", False, rank=1, semantic_rank=1,
                      reranked_rank=4),
        QuestionScore("c", "updates", "Q3?", "z", "", False, rank=None, reranked_rank=None),
    ]


def test_the_tallies_count_the_reranked_ranks() -> None:
    kinds, total = qa_by_kind(_scores(), 3)
    assert (kinds[0].at_1, kinds[0].at_k, kinds[0].reranked_at_1, kinds[0].reranked_at_k) \
        == (1, 2, 1, 1)
    assert (total.reranked_at_1, total.reranked_at_k) == (1, 1)


def test_the_table_and_the_json_show_both_rankings_side_by_side() -> None:
    info = QaInfo(answered=False, retrieval=True, answer_model="rules-v1", judge_model=None,
                  read_top_k=50, embeddings="hashing-v1 (256 dims)",
                  rerank="pin +0.2, agent +0.1, recency -0.1 over 90 days")
    text = qa_table(_scores(), info)
    assert "the prompt split's volatile order (pin +0.2" in text
    header = next(line for line in text.splitlines() if line.startswith("kind"))
    assert header.split() == ["kind", "questions", "gold@1", "gold@3", "meaning@1",
                              "reranked@1", "reranked@3"]
    total = next(line for line in text.splitlines() if line.startswith("total"))
    assert total.split() == ["total", "3", "1/3", "2/3", "1/3", "1/3", "1/3"]
    document = qa_json(_scores(), info)
    assert document["rerank"] == info.rerank
    assert document["total"]["reranked_gold_at_1"] == 1
    assert document["total"]["reranked_gold_at_3"] == 1
    assert [q["reranked_rank"] for q in document["questions"]] == [1, 4, None]
    # Without --rerank the table and the JSON are as before.
    plain = QaInfo(answered=False, retrieval=True, answer_model="rules-v1", judge_model=None,
                   read_top_k=50, embeddings="hashing-v1 (256 dims)")
    assert "reranked" not in qa_table(_scores(), plain)
    assert "reranked_gold_at_1" not in qa_json(_scores(), plain)["total"]
    assert qa_json(_scores(), plain)["rerank"] is None
