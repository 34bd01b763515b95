"""The memory model's pure parts: dates and terms from an extraction answer, the
rules provider's reading of time and relationships, and held changes."""

from __future__ import annotations

from datetime import UTC, date, datetime

import numpy as np
import pytest

from worker.memory_rules import confidence_for
from worker.pipeline.decisions import build_request, validate
from worker.pipeline.extract import CandidateFact, candidates_from, fact_terms, parse_moment
from worker.pipeline.plan import hold_reason, plan_writes
from worker.providers.rules import extract_facts
from worker.providers.rules_time import relationship_in, temporary_in, valid_from_in
from worker.providers.wire import (
    ConsolidationAnswer,
    Decision,
    ExtractedFact,
    ExtractionAnswer,
    ExtractionRequest,
    WireMessage,
)
from worker.store.types import ExistingRow, FactTerms, HoldProposal, InsertFact, NeighborRow

SAID = datetime(2026, 11, 24, 15, 30, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(("text", "moment"), [
    ("2026-10-03", datetime(2026, 10, 3, tzinfo=UTC)),
    ("2026-10", datetime(2026, 10, 1, tzinfo=UTC)),
    ("2019", datetime(2019, 1, 1, tzinfo=UTC)),
    ("2026-10-03T08:00:00Z", datetime(2026, 10, 3, 8, tzinfo=UTC)),
    ("2026-10-03T08:00:00", datetime(2026, 10, 3, 8, tzinfo=UTC)),
    ("last month", None), ("2026-13-01", None), ("", None), (None, None),
])
def test_dates_are_read_as_absolute_moments_or_not_at_all(
    text: str | None, moment: datetime | None
) -> None:
    assert parse_moment(text) == moment


def extracted(**fields: object) -> ExtractedFact:
    return ExtractedFact.model_validate({"text": "Lives in Lisbon", "category": "fact",
                                         "importance": 8, **fields})


def test_an_answer_without_the_new_fields_reads_as_a_stated_profile_fact() -> None:
    terms = fact_terms(extracted(), SAID, "luna")
    assert terms == FactTerms(confidence=confidence_for("extracted", "stated"))


def test_relationship_facts_need_an_agent_on_the_hand_over() -> None:
    assert fact_terms(extracted(scope="relationship"), SAID, "luna").agent_id == "luna"
    alone = fact_terms(extracted(scope="relationship"), SAID, None)
    assert (alone.scope, alone.agent_id) == ("profile", None)
    assert fact_terms(extracted(scope="profile"), SAID, "luna").agent_id is None


def test_inconsistent_dates_are_dropped_not_the_fact() -> None:
    backwards = fact_terms(extracted(valid_from="2026-10", valid_to="2026-01"), SAID, None)
    assert (backwards.valid_from, backwards.valid_to) == (datetime(2026, 10, 1, tzinfo=UTC),
                                                          None)
    stale = fact_terms(extracted(expires_at="2026-11-01"), SAID, None)
    assert stale.expires_at is None, "an expiry before it was said could never be recalled"
    ended = fact_terms(extracted(valid_to="2023"), SAID, None)
    assert ended.valid_from == ended.valid_to == datetime(2023, 1, 1, tzinfo=UTC)


def test_inferred_facts_are_trusted_less() -> None:
    stated = fact_terms(extracted(), SAID, None).confidence
    inferred = fact_terms(extracted(basis="inferred"), SAID, None).confidence
    assert inferred < stated < confidence_for("manual", "stated")


def test_repeats_are_repeats_only_within_one_scope() -> None:
    answer = ExtractionAnswer(facts=(extracted(), extracted(scope="relationship"),
                                     extracted(scope="relationship")))
    got = candidates_from(answer, observed_at=SAID, agent_id="luna")
    assert [c.terms.agent_id for c in got] == [None, "luna"]


TUESDAY = date(2026, 11, 24)


@pytest.mark.parametrize(("clause", "start"), [
    ("I moved to Lisbon last month", "2026-10"),
    ("I moved to Lisbon last year", "2025"),
    ("I started at Airbus 3 weeks ago", "2026-11-03"),
    ("I moved here two months ago", "2026-09"),
    ("I switched to Rust yesterday", "2026-11-23"),
    ("I have lived in Paris since 2019", "2019"),
    ("I live in Paris", None),
])
def test_the_rules_resolve_when_a_fact_began(clause: str, start: str | None) -> None:
    assert valid_from_in(clause, TUESDAY) == start


def test_a_stay_this_week_ends_on_sunday_and_expires_after_it() -> None:
    stay = temporary_in("I'm in Paris this week", TUESDAY)
    assert stay is not None
    assert stay.text == "Is in Paris until 2026-11-29"
    assert stay.valid_to == stay.expires_at == "2026-11-30"


def test_a_trip_on_a_weekday_is_a_plan_that_expires_after_that_day() -> None:
    trip = temporary_in("I'm flying to Tokyo on Friday", TUESDAY)
    assert trip is not None and trip.text == "Plans to go to Tokyo on 2026-11-27"
    assert trip.expires_at == "2026-11-28"
    assert temporary_in("I'm flying to Tokyo on Tuesday", TUESDAY).expires_at == "2026-12-02"


def test_what_the_user_says_to_the_agent_is_relationship_only_with_an_agent() -> None:
    assert relationship_in("you can call me Sunny") == (
        "Wants this assistant to call them Sunny", "preference", 6)
    said = (WireMessage(role="user", content="You can call me Sunny."),)
    with_agent = extract_facts(ExtractionRequest(observed_at="2026-11-24 (Tuesday)",
                                                 summary=None, context=(), messages=said,
                                                 agent="luna"))
    assert [f.scope for f in with_agent.facts] == ["relationship"]
    alone = extract_facts(ExtractionRequest(observed_at="2026-11-24 (Tuesday)", summary=None,
                                            context=(), messages=said))
    assert [(f.text, f.scope) for f in alone.facts] == [("Name is Sunny", "profile")]


def test_the_agent_key_is_absent_from_requests_without_one() -> None:
    request = ExtractionRequest(observed_at="x", summary=None, context=(), messages=())
    assert "agent" not in request.model_dump(mode="json")
    assert request.model_copy(update={"agent": "luna"}).model_dump()["agent"] == "luna"


def _row(id_: int, text: str, *, pinned: bool = False, confidence: float = 0.9) -> NeighborRow:
    return NeighborRow(id_, text, SAID, 0.1, pinned, confidence)


def _plan(candidate: CandidateFact, row: NeighborRow, decision: Decision) -> tuple[object, ...]:
    embeddings = np.ones((1, 4), dtype=np.float32) / 2
    prepared = build_request([candidate], embeddings, [[row]], "2026-11-24 (Tuesday)",
                             "2026-11-24", k=5)
    assert prepared.request.candidates[0].neighbors[0].pinned is row.pinned
    validated = validate(prepared, ConsolidationAnswer(decisions=(decision,)))
    plan = plan_writes([candidate], embeddings, prepared, validated)
    return plan.writes, (plan.added, plan.updated, plan.deleted, plan.held)


def test_a_change_to_a_pinned_fact_is_held_not_applied() -> None:
    lisbon = CandidateFact("Lives in Lisbon", "fact", 8)
    update = Decision(candidate=0, event="UPDATE", target=1, text=None)
    writes, counts = _plan(lisbon, _row(7, "Lives in Paris", pinned=True), update)
    assert writes == (HoldProposal(ExistingRow(7), "UPDATE", "pinned", "Lives in Lisbon"),)
    assert counts == (0, 0, 0, 1)
    delete = Decision(candidate=0, event="DELETE", target=1)
    writes, _ = _plan(lisbon, _row(7, "Lives in Paris", pinned=True), delete)
    assert writes == (HoldProposal(ExistingRow(7), "DELETE", "pinned", None),)


def test_an_inferred_candidate_does_not_replace_a_stated_fact() -> None:
    inferred = CandidateFact("Has children", "fact", 7,
                             FactTerms(basis="inferred", confidence=0.6))
    update = Decision(candidate=0, event="UPDATE", target=1, text=None)
    writes, counts = _plan(inferred, _row(3, "Has no children"), update)
    assert writes == (HoldProposal(ExistingRow(3), "UPDATE", "outranked", "Has children"),)
    assert hold_reason(inferred, _row(3, "x", confidence=0.5)) is None, "less trusted: replaced"
    stated = CandidateFact("Has children", "fact", 7)
    writes, counts = _plan(stated, _row(3, "Has no children"), update)
    assert isinstance(writes[0], InsertFact) and counts == (0, 1, 0, 0)


def test_batch_candidates_of_another_agent_are_not_neighbours() -> None:
    luna = CandidateFact("Wants to be called Sunny", "preference", 6,
                         FactTerms(scope="relationship", agent_id="luna"))
    profile = CandidateFact("Name is Sam", "fact", 9)
    again = CandidateFact("Wants to be called Sun", "preference", 6,
                          FactTerms(scope="relationship", agent_id="luna"))
    embeddings = np.ones((3, 4), dtype=np.float32) / 2
    prepared = build_request([luna, profile, again], embeddings, [[], [], []],
                             "2026-11-24 (Tuesday)", "2026-11-24", k=5)
    shown = [[n.text for n in c.neighbors] for c in prepared.request.candidates]
    assert shown == [[], [], ["Wants to be called Sunny"]]
