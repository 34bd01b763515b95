"""`memfleet eval`'s pure parts: gold words, the end state's checks, the totals, the
suite's files, the scenario clock, the plan of hand-overs, the report."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from worker.cli.evaluation import KINDS as CLI_KINDS
from worker.errors import MemfleetError
from worker.eval.report import RunInfo, report_json, table
from worker.eval.run import AddOnlyConsolidator, plan_steps
from worker.eval.score import (
    active_at,
    by_kind,
    check_absent,
    check_active,
    check_chain,
    check_ended,
    read_views,
    score_scenario,
)
from worker.eval.suite import (
    KINDS,
    Absent,
    Active,
    Chain,
    Scenario,
    Words,
    cycles_after,
    load_file,
    load_suite,
    shifted,
)
from worker.providers.rules import RulesConsolidator
from worker.providers.wire import Candidate, ConsolidationRequest, Neighbor
from worker.store.types import FactRecord

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)
END = T0 + timedelta(days=30)


def fact(id: int, text: str, *, at: datetime = T0, superseded_by: int | None = None,
         superseded_at: datetime | None = None, scope: str = "profile",
         agent: str | None = None, valid_from: datetime | None = None,
         expires_at: datetime | None = None) -> FactRecord:
    if superseded_by is not None and superseded_at is None:
        superseded_at = at + timedelta(days=1)
    return FactRecord(id=id, user_id="u", text=text, category="fact", importance=5,
                      observed_at=at, source_session_id="s", source_kind="extracted",
                      superseded_at=superseded_at, superseded_by=superseded_by, created_at=at,
                      scope=scope, agent_id=agent, valid_from=valid_from, expires_at=expires_at)


# ---------------------------------------------------------------- words


@pytest.mark.parametrize(("words", "text", "found"), [
    (("Lisbon",), "Lives in LISBON", True),
    (("Lisbon|Lisboa",), "Mora em Lisboa", True),
    (("cat",), "Has a category of things", False),  # whole words
    (("cat",), "Has a cat.", True),
    (("allerg*",), "Is allergic to peanuts", True),  # a prefix
    (("allerg*", "peanut*"), "Is allergic to shellfish", False),  # every group
    (("Köln",), "Wohnt seit März in köln", True),  # case-blind beyond ASCII
    (("GitHub Actions",), "Uses GitHub Actions for CI", True),
    (("like*",), "Dislikes jazz", False),
])
def test_words_are_whole_case_blind_alternatives_in_groups(words: tuple[str, ...], text: str,
                                                           found: bool) -> None:
    assert Words(words=words).found_in(text) is found


@pytest.mark.parametrize("words", [(), ("",), ("a||b",), (" * ",)])
def test_blank_words_are_refused(words: tuple[str, ...]) -> None:
    with pytest.raises(ValueError):
        Words(words=words)


# ---------------------------------------------------------------- the end state


def test_a_fact_is_active_when_learned_not_superseded_and_not_expired_by_then() -> None:
    assert active_at(fact(1, "x"), END)
    assert not active_at(fact(1, "x", at=END + timedelta(seconds=1)), END)
    assert not active_at(fact(1, "x", superseded_by=2), END)
    assert active_at(fact(1, "x", superseded_at=END + timedelta(days=1)), END)
    assert not active_at(fact(1, "x", expires_at=END), END)
    assert active_at(fact(1, "x", expires_at=END + timedelta(hours=1)), END)


def test_an_active_fact_is_checked_for_words_scope_agent_and_start() -> None:
    facts = [fact(1, "Lives in Glasgow", valid_from=datetime(2026, 2, 1, tzinfo=UTC)),
             fact(2, "Wants this assistant to call them Ace", scope="relationship",
                  agent="luna")]
    assert check_active(Active(words=("Glasgow",), valid_from="2026-02"), facts)[0].held
    assert check_active(Active(words=("Glasgow",), valid_from="2026"), facts)[0].held
    wrong_date = check_active(Active(words=("Glasgow",), valid_from="2026-03"), facts)[0]
    assert not wrong_date.held and "valid from 2026-02-01" in wrong_date.why
    missing = check_active(Active(words=("Paris",)), facts)[0]
    assert not missing.held and missing.why == "no active fact matches"
    assert check_active(Active(words=("Ace",), agent="luna"), facts)[0].held
    other_agent = check_active(Active(words=("Ace",), agent="orion"), facts)[0]
    assert not other_agent.held and "another scope" in other_agent.why
    assert not check_active(Active(words=("Ace",), scope="profile"), facts)[0].held
    # A fact without a valid-from date starts when it was learned.
    assert check_active(Active(words=("Ace",), valid_from="2026-03-02"), facts)[0].held


def test_two_active_facts_for_one_gold_fact_are_a_duplicate_and_fail() -> None:
    # Every gold fact is held once (the "once" flag of the files is now every
    # assertion's rule): a memory that keeps a paraphrase twice fails.
    facts = [fact(1, "Lives in Vienna"), fact(2, "Is based in Vienna")]
    for gold in (Active(words=("Vienna",)), Active(words=("Vienna",), once=True)):
        check, duplicated = check_active(gold, facts)
        assert not check.held and duplicated and "held 2 times" in check.why
    check, duplicated = check_active(Active(words=("Vienna",), once=True), facts[:1])
    assert check.held and not duplicated and check.said == "active: Vienna"


def test_an_absent_fact_is_a_false_memory_unless_excused_or_out_of_sight() -> None:
    facts = [fact(1, "Moved from Porto to Madrid"),
             fact(2, "Wants this assistant to call them Ace", scope="relationship",
                  agent="luna")]
    read = read_views(facts, ["luna", "orion"])
    assert not check_absent(Absent(words=("Porto",)), read).held
    assert check_absent(Absent(words=("Porto",), unless=("Madrid",)), read).held
    assert check_absent(Absent(words=("Ace",), visible_to="orion"), read).held
    leaked = check_absent(Absent(words=("Ace",), visible_to="luna"), read)
    assert not leaked.held and "agent luna" in leaked.why
    assert not check_absent(Absent(words=("Ace",)), read).held  # any reader's view


def test_a_chain_needs_the_old_fact_superseded_by_a_matching_new_one() -> None:
    facts = [fact(1, "Lives in Oslo", superseded_by=2), fact(2, "Lives in Bergen",
                                                               superseded_by=3),
             fact(3, "Lives in Oslo again")]
    chain = Chain(old=Words(words=("Oslo",)), new=Words(words=("Bergen",)))
    assert check_chain(chain, facts).held
    back = Chain(old=Words(words=("Bergen",)), new=Words(words=("Oslo",)))
    assert check_chain(back, facts).held
    wrong = check_chain(Chain(old=Words(words=("Oslo",)), new=Words(words=("Rome",))), facts)
    assert not wrong.held and "superseded by" in wrong.why
    never = check_chain(Chain(old=Words(words=("Rome",)), new=Words(words=("Oslo",))), facts)
    assert not never.held and "ever matched" in never.why
    added = [fact(1, "Lives in Oslo"), fact(2, "Lives in Bergen")]
    assert not check_chain(chain, added).held


def test_an_ended_fact_was_learned_and_is_no_longer_active() -> None:
    assert check_ended(Words(words=("Notion",)),
                       [fact(1, "Uses Notion", superseded_at=T0 + timedelta(days=2))], END).held
    assert check_ended(Words(words=("Tokyo",)),
                       [fact(1, "Plans to go to Tokyo", expires_at=T0 + timedelta(days=5))],
                       END).held
    assert check_ended(Words(words=("Notion",)), [], END).why == "never learned as a fact"
    assert not check_ended(Words(words=("Notion",)), [fact(1, "Uses Notion")], END).held


def _scenario(**expect: Any) -> Scenario:
    return Scenario.model_validate({
        "id": "s", "kind": "updates", "about": "a move",
        "sessions": [{"id": "s1", "at": "2026-03-02T09:00:00Z",
                      "turns": [{"role": "user", "content": "I live in Oslo."}]}],
        "end_at": "2026-04-01T00:00:00Z", "expect": expect})


def test_a_scenario_and_the_kinds_sum_their_checks() -> None:
    scenario = _scenario(active=[{"words": ["Bergen"]}], absent=[{"words": ["Oslo"]}],
                         chains=[{"old": {"words": ["Oslo"]}, "new": {"words": ["Bergen"]}}])
    right = score_scenario(scenario, [fact(1, "Lives in Oslo", superseded_by=2),
                                      fact(2, "Lives in Bergen")])
    added = score_scenario(scenario, [fact(1, "Lives in Oslo"), fact(2, "Lives in Bergen")])
    assert right.passed and right.held == 3 and not right.false_memories
    assert not added.passed and added.held == 1 and added.false_memories == 1
    kinds, total = by_kind([right, added])
    assert [k.kind for k in kinds] == ["updates"]
    assert (total.scenarios, total.passed, total.assertions, total.held) == (2, 1, 6, 4)
    assert (total.chains, total.chains_held, total.false_memories) == (2, 1, 1)
    assert total.accuracy == pytest.approx(4 / 6)
    assert [scenario_id for scenario_id, _ in total.failed] == ["s", "s"]


# ---------------------------------------------------------------- the suite


def test_the_shipped_suite_has_at_least_three_scenarios_of_every_kind() -> None:
    scenarios = load_suite()
    counts = {kind: sum(s.kind == kind for s in scenarios) for kind in KINDS}
    assert min(counts.values()) >= 3, counts
    assert all(s.assertions > 0 for s in scenarios)
    assert tuple(KINDS) == CLI_KINDS  # the CLI lists them without importing worker.ops


def test_a_bad_scenario_file_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "x", "kind": "nope", "about": "",
                                "sessions": [], "expect": {}}]))
    with pytest.raises(MemfleetError, match=r"^bad\.json: not a scenario file: kind"):
        load_file(bad)
    bad.write_text("{")
    with pytest.raises(MemfleetError, match=r"^bad\.json: not a scenario file"):
        load_file(bad)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MemfleetError, match="no scenario files"):
        load_suite(tmp_path / "empty")
    with pytest.raises(MemfleetError, match="not a folder"):
        load_suite(tmp_path / "missing")


def test_the_scenario_clock_moves_by_whole_calendar_cycles() -> None:
    now = datetime(2026, 11, 26, tzinfo=UTC)
    assert cycles_after(T0, now) == 28
    assert cycles_after(T0, datetime(2026, 1, 1, tzinfo=UTC)) == 0
    scenario = Scenario.model_validate({
        "id": "s", "kind": "relative_dates", "about": "a year named",
        "sessions": [{"id": "s1", "at": "2026-03-18T10:00:00Z",
                      "turns": [{"role": "user", "content": "I've lived in Dublin since 2019."}]}],
        "expect": {"active": [{"words": ["Dublin"], "valid_from": "2019"}]}})
    moved = shifted(scenario, 28)
    assert moved.sessions[0].at == datetime(2054, 3, 18, 10, tzinfo=UTC)
    assert moved.sessions[0].at.weekday() == scenario.sessions[0].at.weekday()
    assert moved.sessions[0].turns[0].content == "I've lived in Dublin since 2047."
    assert moved.expect.active[0].valid_from == "2047"


def test_hand_overs_follow_each_user_turn_and_commits_each_session_or_turn() -> None:
    scenario = Scenario.model_validate({
        "id": "s", "kind": "short_replies", "about": "two sessions",
        "sessions": [
            {"id": "a", "at": "2026-03-02T09:00:00Z", "turns": [
                {"role": "user", "content": "one"}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "two"}]},
            {"id": "b", "at": "2026-03-03T09:00:00Z", "commit_each_turn": True, "turns": [
                {"role": "user", "content": "three"}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "four"}]}],
        "expect": {"absent": [{"words": ["x"]}]}})
    steps = plan_steps(scenario)
    assert [[len(h.messages) for h in step] for step in steps] == [[1, 3], [1], [3]]
    assert steps[0][1].at - steps[0][0].at == timedelta(minutes=1)
    assert {h.session_id for h in steps[2]} == {"b"}


async def test_the_add_only_control_turns_every_decision_into_add() -> None:
    request = ConsolidationRequest(observed_at="2026-03-02", candidates=(
        Candidate(candidate=0, text="Lives in Bergen", category="fact",
                  neighbors=(Neighbor(id=7, text="Lives in Oslo", observed_at="2026-03-01"),)),
        Candidate(candidate=1, text="Lives in Oslo", category="fact",
                  neighbors=(Neighbor(id=7, text="Lives in Oslo", observed_at="2026-03-01"),))))
    inner = RulesConsolidator()
    assert [d.event for d in (await inner.consolidate(request)).value.decisions] == [
        "UPDATE", "NONE"]
    control = AddOnlyConsolidator(inner)
    answer = await control.consolidate(request)
    assert [(d.candidate, d.event, d.target) for d in answer.value.decisions] == [
        (0, "ADD", None), (1, "ADD", None)]
    assert control.model == inner.model


def test_the_report_names_what_it_measured() -> None:
    info = RunInfo("rules-v1", "rules-v1", "hashing-v1 (8 dims)", "p1", "add-only")
    score = score_scenario(_scenario(active=[{"words": ["Oslo"]}], absent=[{"words": ["x"]}]),
                           [fact(1, "Lives in Oslo")])
    text = table([score], info, {"committed": 2}, shift_years=28)
    assert "control: add-only" in text and "runs: 2 committed; scenario clock 28" in text
    assert "updates" in text and "100.0%" in text and "did not hold" not in text
    document = report_json([score], info, {"committed": 2}, 28)
    assert document["total"]["accuracy"] == 1.0 and document["clock_shift_years"] == 28
    assert document["scenarios"][0]["checks"][0] == {
        "kind": "active", "said": "active: Oslo", "held": True, "why": ""}
