from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from worker.pipeline.decisions import BatchCandidate, PreparedRequest, build_request, validate
from worker.pipeline.extract import CandidateFact
from worker.pipeline.plan import plan_writes
from worker.providers.wire import ConsolidationAnswer, Decision
from worker.store.person_types import ExistingPerson, NewPerson
from worker.store.types import (
    PROFILE,
    ExistingRow,
    FactTerms,
    HoldProposal,
    InsertFact,
    NeighborRow,
    NewRow,
    SupersedeFact,
    Vector,
)

WHEN = datetime(2026, 10, 1, tzinfo=UTC)


def fact(text: str) -> CandidateFact:
    return CandidateFact(text, "preference", 5)


def row(id_: int, text: str) -> NeighborRow:
    return NeighborRow(id_, text, WHEN, 0.1)


def prepare(
    cands: list[CandidateFact], neighbors: list[list[NeighborRow]]
) -> tuple[Vector, PreparedRequest]:
    embeddings = np.zeros((len(cands), 4), dtype=np.float32)
    embeddings[:, 0] = 1.0
    return embeddings, build_request(cands, embeddings, neighbors, "2026-11-22 (Sunday)",
                                     "2026-11-22", k=5)


def answer(*decisions: Decision) -> ConsolidationAnswer:
    return ConsolidationAnswer(decisions=decisions)


def test_ids_are_small_integers_standing_for_rows_and_earlier_candidates() -> None:
    cands = [fact("Uses Postgres"), fact("Uses SQLite")]
    _, prepared = prepare(cands, [[row(9001, "Uses MySQL")], [row(9001, "Uses MySQL")]])
    first, second = prepared.request.candidates
    assert [n.id for n in first.neighbors] == [1]
    assert prepared.id_map[1] == ExistingRow(9001)
    # The second candidate sees the first one as a neighbour, with an id of its own.
    assert [n.text for n in second.neighbors] == ["Uses MySQL", "Uses Postgres"]
    assert prepared.id_map[second.neighbors[1].id] == BatchCandidate(0)
    assert "9001" not in prepared.request.model_dump_json()


def test_update_supersedes_its_target() -> None:
    cands = [fact("Uses SQLite")]
    emb, prepared = prepare(cands, [[row(7, "Uses Postgres")]])
    validated = validate(prepared, answer(Decision(candidate=0, event="UPDATE", target=1)))
    plan = plan_writes(cands, emb, prepared, validated)
    (insert,) = plan.writes
    assert isinstance(insert, InsertFact)
    assert (insert.ref, insert.text, insert.category, insert.importance, insert.supersedes) == (
        0, "Uses SQLite", "preference", 5, ExistingRow(7),
    )
    assert np.array_equal(insert.embedding, emb[0])
    assert (plan.added, plan.updated) == (0, 1)


def test_changing_ones_mind_twice_in_one_slice_makes_a_chain() -> None:
    cands = [fact("Uses MySQL"), fact("Uses SQLite")]
    emb, prepared = prepare(cands, [[row(7, "Uses Postgres")], [row(7, "Uses Postgres")]])
    batch_id = prepared.request.candidates[1].neighbors[1].id
    validated = validate(prepared, answer(
        Decision(candidate=0, event="UPDATE", target=1),
        Decision(candidate=1, event="UPDATE", target=batch_id),
    ))
    plan = plan_writes(cands, emb, prepared, validated)
    assert [w.supersedes for w in plan.writes if isinstance(w, InsertFact)] == [
        ExistingRow(7), NewRow(0),
    ]


def test_two_updates_of_one_row_follow_the_chain() -> None:
    cands = [fact("Uses MySQL"), fact("Uses SQLite")]
    emb, prepared = prepare(cands, [[row(7, "Uses Postgres")], [row(7, "Uses Postgres")]])
    validated = validate(prepared, answer(
        Decision(candidate=0, event="UPDATE", target=1),
        Decision(candidate=1, event="UPDATE", target=1),
    ))
    plan = plan_writes(cands, emb, prepared, validated)
    # Row 7 is superseded once; the second update supersedes the first's new row.
    assert [w.supersedes for w in plan.writes if isinstance(w, InsertFact)] == [
        ExistingRow(7), NewRow(0),
    ]


def test_delete_and_none_write_nothing_new() -> None:
    cands = [fact("No longer uses Postgres"), fact("Uses Postgres")]
    emb, prepared = prepare(cands, [[row(7, "Uses Postgres")], []])
    validated = validate(prepared, answer(
        Decision(candidate=0, event="DELETE", target=1),
        Decision(candidate=1, event="NONE", target=None),
    ))
    plan = plan_writes(cands, emb, prepared, validated)
    assert plan.writes == (SupersedeFact(ExistingRow(7)),)
    assert (plan.deleted, plan.unchanged) == (1, 1)


def test_targets_outside_the_candidates_neighbours_are_refused() -> None:
    cands = [fact("Uses SQLite"), fact("Lives in Paris")]
    emb, prepared = prepare(cands, [[row(7, "Uses Postgres")], [row(8, "Lives in Rome")]])
    offered_to_second = prepared.offered[1]
    foreign = next(iter(prepared.offered[0] - offered_to_second))
    validated = validate(prepared, answer(
        Decision(candidate=0, event="UPDATE", target=999),
        Decision(candidate=1, event="DELETE", target=foreign),
    ))
    assert validated.rejected == 2
    plan = plan_writes(cands, emb, prepared, validated)
    # Nothing applied to any row; each candidate held for the user as an undecided
    # addition, never dropped.
    assert [(w.target, w.event, w.reason, w.text) for w in plan.writes] == [
        (None, "ADD", "undecided", "Uses SQLite"), (None, "ADD", "undecided", "Lives in Paris")]
    assert all(isinstance(w, HoldProposal) for w in plan.writes)
    assert (plan.added, plan.updated, plan.deleted, plan.held) == (0, 0, 0, 2)


def test_a_candidate_about_a_person_without_a_usable_decision_is_held_with_the_person() -> None:
    # Accepted, a held addition is the fact of whom its terms name (docs/persons.md):
    # one about the user's sister is held as hers, never dropped, never the user's.
    ana = FactTerms(person=ExistingPerson(3))
    cands = [replace(fact("The user's sister Ana is vegan"), terms=ana),
             replace(fact("The user's boss Tom moved"), terms=FactTerms(person=NewPerson(1))),
             fact("Lives in Paris")]
    emb, prepared = prepare(cands, [[row(7, "The user's sister Ana is vegetarian")], [],
                                    [row(8, "Lives in Rome")]])
    validated = validate(prepared, answer(Decision(candidate=0, event="UPDATE", target=99),
                                          Decision(candidate=2, event="DELETE", target=99)))
    plan = plan_writes(cands, emb, prepared, validated)
    assert [(w.target, w.event, w.reason, w.text, w.terms) for w in plan.writes
            if isinstance(w, HoldProposal)] == [
        (None, "ADD", "undecided", "The user's sister Ana is vegan", ana),
        (None, "ADD", "undecided", "The user's boss Tom moved", FactTerms(person=NewPerson(1))),
        (None, "ADD", "undecided", "Lives in Paris", PROFILE)]
    assert (plan.added, plan.held) == (0, 3)


def test_missing_duplicate_and_unknown_decisions_are_counted() -> None:
    cands = [fact("a"), fact("b")]
    emb, prepared = prepare(cands, [[], []])
    validated = validate(prepared, answer(
        Decision(candidate=0, event="ADD"),
        Decision(candidate=0, event="ADD"),
        Decision(candidate=5, event="ADD"),
    ))
    assert validated.rejected == 1
    writes = plan_writes(cands, emb, prepared, validated).writes
    assert [type(w).__name__ for w in writes] == ["InsertFact", "HoldProposal"]


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from(["ADD", "UPDATE", "DELETE", "NONE"]),
                          st.one_of(st.none(), st.integers(-2, 12))), max_size=12))
def test_no_answer_can_reach_a_row_it_was_not_shown(raw: list[tuple[int, str, int | None]]) -> None:
    cands = [fact(f"fact {i}") for i in range(4)]
    neighbors = [[row(100 + i, f"old {i}")] for i in range(4)]
    emb, prepared = prepare(cands, neighbors)
    decisions = tuple(Decision(candidate=c, event=e, target=t) for c, e, t in raw)  # type: ignore[arg-type]
    validated = validate(prepared, ConsolidationAnswer(decisions=decisions))
    plan = plan_writes(cands, emb, prepared, validated)
    shown_rows = {100 + i for i in range(4)}
    for write in plan.writes:
        if isinstance(write, HoldProposal) and write.target is None:
            continue  # an undecided candidate held as an addition: it names no row
        target = write.supersedes if isinstance(write, InsertFact) else write.target
        if isinstance(target, ExistingRow):
            assert target.id in shown_rows
    superseded = [w.target if isinstance(w, SupersedeFact) else w.supersedes
                  for w in plan.writes if not isinstance(w, HoldProposal)]
    existing = [t for t in superseded if t is not None]
    assert len(existing) == len(set(existing)), "a row is superseded at most once"


def test_neighbours_below_the_similarity_floor_are_not_shown() -> None:
    # Unit vectors: candidate 1 is close to candidate 0 (cosine 0.8), candidate 2 to
    # neither (0.0). Stored rows at cosine 0.9 (distance 0.1) and 0.2 (distance 0.8).
    cands = [fact("Lives in Porto"), fact("Moved to Madrid"), fact("Allergic to penicillin")]
    embeddings = np.array([[1, 0, 0], [0.8, 0.6, 0], [0, 0, 1]], dtype=np.float32)
    near, far = NeighborRow(7, "Lives in Lisbon", WHEN, 0.1), NeighborRow(8, "Likes tea", WHEN, 0.8)
    rows = [[near, far], [near, far], [far]]

    def shown(floor: float | None) -> list[list[str]]:
        prepared = build_request(cands, embeddings, rows, "2026-10-02 (Friday)", "2026-10-02",
                                 5, floor)
        return [[n.text for n in c.neighbors] for c in prepared.request.candidates]

    assert shown(None) == [["Lives in Lisbon", "Likes tea"],
                           ["Lives in Lisbon", "Likes tea", "Lives in Porto"],
                           ["Likes tea", "Lives in Porto", "Moved to Madrid"]]
    assert shown(0.4) == [["Lives in Lisbon"], ["Lives in Lisbon", "Lives in Porto"], []]
