"""bench.eval_mem0's pure half: the adds a scenario makes, and mem0's answers replayed into
the versions the suite's scorer reads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench.eval_mem0.mem0_state import Mem0Add, Mem0Row, mem0_adds, mem0_facts
from worker.eval.score import score_scenario
from worker.eval.suite import Scenario

AT = datetime(2026, 3, 2, 9, tzinfo=UTC)


def _scenario(**changes: object) -> Scenario:
    data: dict[str, object] = {
        "id": "update-city", "kind": "updates", "about": "a move",
        "sessions": [
            {"id": "s1", "at": "2026-03-02T09:00:00Z", "agent": "luna",
             "turns": [{"role": "user", "content": "I live in Porto."},
                       {"role": "assistant", "content": "Lovely."},
                       {"role": "user", "content": "I like tea."}]},
            {"id": "s2", "at": "2026-04-06T20:00:00Z", "commit_each_turn": True,
             "turns": [{"role": "user", "content": "I moved to Madrid."},
                       {"role": "assistant", "content": "Nice!"},
                       {"role": "user", "content": "And I like coffee."}]}],
        "expect": {"active": [{"words": ["Madrid"]}],
                   "absent": [{"words": ["Porto"], "unless": ["Madrid"]}],
                   "chains": [{"old": {"words": ["Porto"]}, "new": {"words": ["Madrid"]}}]},
        **changes}
    return Scenario.model_validate(data)


def test_one_add_per_memfleet_commit_with_only_the_new_messages() -> None:
    adds = mem0_adds(_scenario())
    # s1 commits once (three messages); s2 commits after each user turn.
    assert [(a.session_id, a.agent_id, len(a.messages)) for a in adds] == [
        ("s1", "luna", 3), ("s2", None, 1), ("s2", None, 2)]
    assert [m["content"] for m in adds[2].messages] == ["Nice!", "And I like coffee."]
    assert adds[2].at == datetime(2026, 4, 6, 20, 1, tzinfo=UTC)  # the second user turn


def _add(at: datetime, agent: str | None = None) -> Mem0Add:
    return Mem0Add("s", agent, at, ({"role": "user", "content": "x"},))


def test_an_update_is_a_chain_and_a_delete_ends_the_memory() -> None:
    adds = [_add(AT, "luna"), _add(AT + timedelta(days=1)), _add(AT + timedelta(days=2))]
    answers = [
        {"results": [{"id": "m1", "memory": "Lives in Porto", "event": "ADD"},
                     {"id": "m2", "memory": "Likes tea", "event": "ADD"}]},
        {"results": [{"id": "m1", "memory": "Lives in Madrid", "event": "UPDATE",
                      "previous_memory": "Lives in Porto"}]},
        {"results": [{"id": "m2", "memory": "Likes tea", "event": "DELETE"}]},
    ]
    rows = [Mem0Row("m1", "Lives in Madrid", "luna")]
    facts = mem0_facts("u", adds, answers, rows, AT + timedelta(days=3))
    by_text = {f.text: f for f in facts}
    porto, madrid, tea = by_text["Lives in Porto"], by_text["Lives in Madrid"], by_text["Likes tea"]
    assert porto.superseded_by == madrid.id and porto.superseded_at == AT + timedelta(days=1)
    assert madrid.superseded_at is None and madrid.observed_at == AT + timedelta(days=1)
    assert (madrid.scope, madrid.agent_id) == ("relationship", "luna")  # the memory's agent
    assert tea.superseded_at == AT + timedelta(days=2) and tea.superseded_by is None


def test_the_table_is_the_truth_for_what_the_answers_did_not_say() -> None:
    adds = [_add(AT)]
    answers = [{"results": [{"id": "m1", "memory": "Lives in Porto", "event": "ADD"},
                            {"id": "m2", "memory": "Likes tea", "event": "ADD"}]}]
    rows = [Mem0Row("m1", "Lives in Lisbon", None), Mem0Row("m3", "Has a cat", None)]
    end = AT + timedelta(hours=1)
    facts = mem0_facts("u", adds, answers, rows, end)
    active = sorted(f.text for f in facts if f.superseded_at is None)
    assert active == ["Has a cat", "Lives in Lisbon"]
    tea = next(f for f in facts if f.text == "Likes tea")
    assert tea.superseded_at == end  # its row is gone


def test_a_failed_add_counts_as_nothing_and_a_bare_list_is_read() -> None:
    facts = mem0_facts("u", [_add(AT), _add(AT)],
                       [None, [{"id": "m1", "memory": "Likes tea", "event": "ADD"}]],
                       [Mem0Row("m1", "Likes tea", None)], AT + timedelta(hours=1))
    assert [f.text for f in facts] == ["Likes tea"]


def test_mem0s_replayed_end_state_scores_like_memfleets() -> None:
    scenario = _scenario()
    adds = mem0_adds(scenario)
    answers = [{"results": [{"id": "a", "memory": "Lives in Porto", "event": "ADD"}]},
               {"results": [{"id": "a", "memory": "Lives in Madrid", "event": "UPDATE"}]},
               {"results": []}]
    facts = mem0_facts("u", adds, answers, [Mem0Row("a", "Lives in Madrid", "luna")],
                       scenario.ends_at)
    assert score_scenario(scenario, facts).passed
    # An ADD-only memory keeps Porto beside Madrid: a false memory and no chain.
    added = [{"results": [{"id": "a", "memory": "Lives in Porto", "event": "ADD"}]},
             {"results": [{"id": "b", "memory": "Lives in Madrid", "event": "ADD"}]},
             {"results": []}]
    facts = mem0_facts("u", adds, added, [Mem0Row("a", "Lives in Porto", None),
                                          Mem0Row("b", "Lives in Madrid", None)],
                       scenario.ends_at)
    score = score_scenario(scenario, facts)
    assert (score.held, score.false_memories) == (1, 1)
