"""`memfleet eval`'s portrait checks (the kind portrait_update): the portrait at the end
names what it must and not what it must not, a "lacks" holding only beside a "has"
that held; no portrait holds nothing; the shipped scenarios of the kind are whole."""

from __future__ import annotations

from worker.eval.score import check_portrait, score_scenario
from worker.eval.suite import Absent, Portrait, Words, load_suite

GOLD = Portrait(has=(Words(words=("Madrid",)), Words(words=("nurse",))),
                lacks=(Absent(words=("Porto",), unless=("moved from",)),))


def held(checks: list[object]) -> list[bool]:
    return [c.held for c in checks]  # type: ignore[attr-defined]


def test_the_portrait_names_the_new_value_and_not_the_old() -> None:
    assert held(check_portrait(GOLD, "The user lives in Madrid. The user works as nurse.")) \
        == [True, True, True]
    stale = check_portrait(GOLD, "The user lives in Porto and Madrid and works as a nurse.")
    assert held(stale) == [True, True, False] and "Porto" in stale[2].why


def test_a_change_the_facts_tell_is_no_stale_value() -> None:
    told = "The user moved from Porto to Madrid and works as a nurse."
    assert held(check_portrait(GOLD, told)) == [True, True, True]


def test_no_portrait_or_one_that_says_nothing_right_holds_nothing() -> None:
    assert held(check_portrait(GOLD, None)) == [False, False, False]
    empty = check_portrait(GOLD, "The user.")
    assert held(empty) == [False, False, False] and empty[2].gated


def test_the_shipped_kind_has_ten_scenarios_each_checking_a_portrait() -> None:
    scenarios = [s for s in load_suite() if s.kind == "portrait_update"]
    assert len(scenarios) >= 10
    for scenario in scenarios:
        assert scenario.expect.portrait is not None and scenario.expect.portrait.lacks
        # Without a portrait the scenario scores nothing of its portrait checks.
        score = score_scenario(scenario, [], None, portrait=None)
        assert not any(c.held for c in score.checks if c.kind == "portrait")
