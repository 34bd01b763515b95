"""bench.eval_local.qa: what each system answers a question from, the answers' tally,
and the answers asked of a real OpenAI-compatible server (the project's stub)."""

from __future__ import annotations

from typing import Any

from api_stub.llm_stub import StubServer
from bench.eval_local import qa
from worker.eval.qa_score import QuestionScore
from worker.eval.suite import Scenario


def _scenario(**changes: object) -> Scenario:
    data: dict[str, object] = {
        "id": "move", "kind": "updates", "about": "a move",
        "sessions": [
            {"id": "s1", "at": "2026-03-02T09:00:00Z",
             "turns": [{"role": "user", "content": "I live in Porto."}]},
            {"id": "s2", "at": "2026-04-06T20:00:00Z", "agent": "luna",
             "turns": [{"role": "user", "content": "I live in Madrid now."}]}],
        "expect": {"active": [{"words": ["Madrid"]}]},
        "questions": [{"ask": "Which city does the user live in?", "answer": "Madrid",
                       "wrong": ["Porto"]},
                      {"ask": "What does the user want to be called?", "answer": "Ace",
                       "agent": "luna"}],
        **changes}
    return Scenario.model_validate(data)


def test_mem0_hits_of_another_agent_are_not_read_and_a_failed_search_reads_nothing() -> None:
    hits: list[Any] = [
        [{"memory": "Lives in Madrid", "agent_id": None, "created_at": "2026-04-06T20:00:00"},
         {"memory": "Called Ace", "agent_id": "sol"}],
        None]
    asked = qa.mem0_asked([_scenario()], {"move": hits})
    assert [[f.text for f in a.facts] for a in asked] == [["Lives in Madrid"], []]
    assert asked[0].facts[0].observed_at.date().isoformat() == "2026-04-06"
    agent_hits: list[Any] = [[], [{"memory": "Called Ace", "agent_id": "luna"}]]
    asked = qa.mem0_asked([_scenario()], {"move": agent_hits})
    assert [f.text for f in asked[1].facts] == ["Called Ace"]


def test_the_baselines_answer_from_their_rows_active_at_the_end() -> None:
    asked = qa.baseline_asked([_scenario()])
    assert set(asked) == {"empty", "raw-messages", "latest-session"}
    assert all(not a.facts for a in asked["empty"])
    # raw-messages: each session supersedes the one before; its rows are the profile's.
    assert [f.text for f in asked["raw-messages"][0].facts] == ["I live in Madrid now."]


def test_only_answers_to_questions_count_as_questions() -> None:
    question = {"request": {"response_format": {"json_schema": {"name": "memory_question"}}}}
    extraction = {"request": {"response_format": {"json_schema": {"name": "fact_extraction"}}}}
    assert qa.is_question(question)
    assert not qa.is_question(extraction) and not qa.is_question({"embeddings": 3})


def test_the_table_gives_each_system_its_right_answers_per_kind_and_in_all() -> None:
    def score(scenario: str, kind: str, exact: bool) -> QuestionScore:
        return QuestionScore(scenario, kind, "q", "gold", "a", exact, facts=2)

    table = qa.qa_comparison({
        "memfleet": [score("a", "plain", True), score("b", "plain", False),
                     score("c", "updates", True)],
        "empty": [score("a", "plain", False), score("b", "plain", False),
                  score("c", "updates", False)]})
    heads = [line.split()[0] for line in table.splitlines()]
    assert heads == ["kind", "plain", "updates", "total", "facts"], "a row per kind, once"
    lines = {line.split()[0]: line for line in table.splitlines()}
    assert "1/2 50%" in lines["plain"] and "0/2 0%" in lines["plain"]
    assert "2/3 67%" in lines["total"] and "0/3 0% [0-0]" in lines["total"]
    assert lines["facts"].split()[-2:] == ["2.0", "2.0"]


def test_answers_come_from_the_model_over_http_and_are_scored_by_exact_match() -> None:
    asked = qa.baseline_asked([_scenario()])
    with StubServer(dim=16) as stub:
        raw = qa.answer(asked["raw-messages"], stub.v1, "stub")
        empty = qa.answer(asked["empty"], stub.v1, "stub")
        calls = [r for r in stub.recorded() if r["path"] == "/v1/chat/completions"]
    assert len(calls) == 4 and all(qa.is_question({"request": c["body"]}) for c in calls)
    assert [s.exact for s in raw] == [True, False]  # Madrid is in the block; Ace is not
    assert [s.exact for s in empty] == [False, False]
    assert raw[0].facts == 1 and empty[0].facts == 0
