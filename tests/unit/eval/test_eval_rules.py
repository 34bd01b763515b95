"""The rules a raw dump cannot pass (worker.eval.form, worker.eval.score), the baselines
(worker.eval.baselines) and the bootstrap intervals (worker.eval.bootstrap), on fixed samples."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from worker.eval.baselines import BASELINES, baseline_scores, latest_session, raw_messages
from worker.eval.bootstrap import intervals
from worker.eval.form import MAX_WORDS, fault, well_formed
from worker.eval.score import by_kind, score_scenario, text_dates
from worker.eval.suite import KINDS, Scenario, load_suite
from worker.store.types import FactRecord

T0 = datetime(2026, 3, 2, 9, tzinfo=UTC)


def fact(id: int, text: str, *, superseded_by: int | None = None,
         valid_from: datetime | None = None) -> FactRecord:
    return FactRecord(id=id, user_id="u", text=text, category="fact", importance=5,
                      observed_at=T0, source_session_id="s", source_kind="extracted",
                      superseded_at=T0 + timedelta(hours=1) if superseded_by else None,
                      superseded_by=superseded_by, created_at=T0, valid_from=valid_from)


MOVE = Scenario.model_validate({
    "id": "move", "kind": "updates", "about": "a move",
    "sessions": [
        {"id": "s1", "at": "2026-03-02T09:00:00Z",
         "turns": [{"role": "user", "content": "I live in Porto."},
                   {"role": "assistant", "content": "Nice."},
                   {"role": "user", "content": "I work at Acme."}]},
        {"id": "s2", "at": "2026-04-06T20:00:00Z",
         "turns": [{"role": "user", "content": "Big news: I moved to Madrid."}]}],
    "end_at": "2026-05-01T00:00:00Z",
    "expect": {"active": [{"words": ["Madrid"]}],
               "absent": [{"words": ["Porto"], "unless": ["Madrid"]}],
               "chains": [{"old": {"words": ["Porto"]}, "new": {"words": ["Madrid"]}}]}})
MEMORY = [fact(1, "Lives in Porto", superseded_by=3), fact(2, "Works at Acme"),
          fact(3, "Lives in Madrid")]


# ---------------------------------------------------------------- well-formed facts


@pytest.mark.parametrize(("text", "why"), [
    ("Lives in Porto", None),
    ("Likes tea and coffee", None),  # one claim with a list in it
    ("Wohnt in Köln", None),
    ("Moved from Porto to Madrid in March 2026.", None),
    ("I live in Porto.", "first person"),
    ("Big news: we moved to Madrid", "first person"),
    ("We've switched from Scala to Kotlin", "first person"),  # not "we" + a word
    ("we\u2019re using Kotlin", "first person"),  # the typographic apostrophe
    ("Ich wohne in Köln", "first person"),
    ("J'ai un chat nommé Figaro", "first person"),
    ("Mi comida favorita es la paella", "first person"),
    ("Lives in Oslo, and works at Equinor", "joined clauses"),
    ("Works at Acme but she wants to leave", "joined clauses"),
    ("Is allergic to peanuts. Likes cats", "more than one sentence"),
    ("Uses Notion; stopped using Slack", "more than one sentence"),
    (" ".join(["word"] * (MAX_WORDS + 1)), "words (at most"),
    ("", "empty"),
])
def test_a_fact_is_one_short_claim_in_the_third_person(text: str, why: str | None) -> None:
    got = fault(text)
    assert (got is None) if why is None else (got is not None and why in got), got
    assert well_formed(text) is (why is None)


def test_a_row_that_is_not_a_fact_holds_nothing_but_still_counts_against_absent() -> None:
    raw = [fact(1, "I live in Porto.", superseded_by=3), fact(2, "I work at Acme."),
           fact(3, "Big news: I moved to Madrid, and that is final."), fact(4, "I miss Porto.")]
    score = score_scenario(MOVE, raw)
    assert score.held == 0 and score.malformed == 3
    active, chain, absent = score.checks
    assert "not a fact" in active.why and "joined clauses" in active.why
    assert "ever matched" in chain.why
    # Porto is read back (in the new message): a false memory whatever its shape.
    assert not absent.held and not absent.gated and score.false_memories == 1


def test_a_gold_fact_held_twice_fails_and_a_memory_of_facts_passes() -> None:
    assert score_scenario(MOVE, MEMORY).passed
    twice = score_scenario(MOVE, [*MEMORY, fact(4, "Is based in Madrid")])
    assert not twice.checks[0].held and twice.duplicates == 1


# ---------------------------------------------------------------- absent checks


def test_an_empty_memory_passes_no_absent_check() -> None:
    score = score_scenario(MOVE, [])
    assert score.held == 0 and score.false_memories == 0
    absent = score.checks[-1]
    assert absent.kind == "absent" and absent.gated and "nothing it should hold" in absent.why


def test_absent_reads_what_the_read_path_returned() -> None:
    stale = [fact(1, "Lives in Porto"), fact(2, "Lives in Madrid")]
    # The store says Porto is active, but the read path does not return it: it holds.
    assert score_scenario(MOVE, stale, {None: [stale[1]]}).checks[-1].held
    assert not score_scenario(MOVE, stale, {None: stale}).checks[-1].held
    assert not score_scenario(MOVE, stale).checks[-1].held  # by default: the active facts


# ---------------------------------------------------------------- dates from the text


def test_dates_are_read_from_the_text_when_there_is_no_validity_column() -> None:
    assert text_dates("Moved to Cork on 17 March 2026") == ["2026-03-17"]
    assert text_dates("Moved to Cork on March 17, 2026") == ["2026-03-17"]
    assert text_dates("Has lived in Dublin since 2019") == ["2019"]
    assert text_dates("Moved to Glasgow in February 2026 (2026-02-01)") == ["2026-02",
                                                                            "2026-02-01"]
    assert text_dates("Lives in Glasgow") == []
    dated = Scenario.model_validate({
        "id": "d", "kind": "relative_dates", "about": "since",
        "sessions": [{"id": "s1", "at": "2026-03-02T09:00:00Z",
                      "turns": [{"role": "user", "content": "I've lived in Dublin since 2019."}]}],
        "expect": {"active": [{"words": ["Dublin"], "valid_from": "2019"}]}})
    assert score_scenario(dated, [fact(1, "Has lived in Dublin since 2019")]).passed
    assert not score_scenario(dated, [fact(1, "Lives in Dublin")]).passed  # learned 2026
    # A validity column, when the memory keeps one, is what counts.
    column = fact(1, "Has lived in Dublin since 2019", valid_from=T0)
    assert not score_scenario(dated, [column]).passed


# ---------------------------------------------------------------- baselines


def test_the_raw_messages_baseline_stores_each_message_and_supersedes_by_session() -> None:
    facts = raw_messages(MOVE, "u")
    assert [f.text for f in facts] == ["I live in Porto.", "I work at Acme.",
                                       "Big news: I moved to Madrid."]
    assert [f.superseded_by for f in facts] == [3, 3, None]
    assert facts[0].superseded_at == MOVE.sessions[1].at
    assert facts[1].observed_at == MOVE.sessions[0].at + timedelta(minutes=1)
    assert [f.text for f in latest_session(MOVE, "u")] == ["Big news: I moved to Madrid."]
    assert BASELINES["empty"](MOVE, "u") == []


def test_no_baseline_scores_on_the_shipped_suite() -> None:
    suite = load_suite()
    for name, scores in baseline_scores(suite).items():
        total = by_kind(scores)[1]
        assert total.assertions > 300 and total.held == 0, (name, total.held)


def test_every_kind_has_at_least_ten_scenarios() -> None:
    suite = load_suite()
    assert {kind: sum(s.kind == kind for s in suite) >= 10 for kind in KINDS} == \
        dict.fromkeys(KINDS, True)


# ---------------------------------------------------------------- bootstrap


SAMPLE = {"plain": [(3, 3), (2, 3), (3, 3), (0, 3)], "updates": [(1, 2), (2, 2)]}


def test_the_bootstrap_interval_is_fixed_by_its_seed_and_holds_the_accuracy() -> None:
    per_kind, total = intervals(SAMPLE)
    assert (per_kind, total) == intervals(SAMPLE)  # the same seed, the same draws
    assert per_kind["plain"] == pytest.approx((0.25, 1.0))
    assert per_kind["updates"] == pytest.approx((0.5, 1.0))
    low, high = total
    assert low < 11 / 16 < high and low > 0.3 and high <= 1.0
    # A kind's interval does not depend on the other kinds run with it.
    assert intervals({"plain": SAMPLE["plain"]})[0]["plain"] == per_kind["plain"]
    assert intervals(SAMPLE, seed=1) != (per_kind, total)


def test_a_kind_that_always_scores_the_same_has_no_spread() -> None:
    per_kind, total = intervals({"plain": [(2, 2), (3, 3)], "updates": [(0, 1)]})
    assert per_kind == {"plain": (1.0, 1.0), "updates": (0.0, 0.0)}
    assert total[0] < total[1]


def test_by_kind_carries_the_intervals() -> None:
    scores = [score_scenario(MOVE, MEMORY), score_scenario(MOVE, [])]
    kinds, total = by_kind(scores)
    assert kinds[0].interval == pytest.approx((0.0, 1.0))
    assert total.interval == kinds[0].interval
