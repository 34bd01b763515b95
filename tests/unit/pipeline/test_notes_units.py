"""Notes beside facts (docs/notes.md), the pure parts and the pipeline on the in-memory
store: what the wire sends with notes off and on, the rules' small note set, what a
run's notes do to the session's notes, and that a note never becomes a fact."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.unit.pipeline.test_pipeline_units import SETTINGS, context, handover, run_once, user
from worker.pipeline.notes import (
    MAX_NOTES,
    REPEAT_DISTANCE,
    CandidateNote,
    notes_from,
    plan_notes,
    states_a_consideration,
    with_moved,
)
from worker.providers.llm_json import json_schema_format, parse_answer
from worker.providers.rules import extract_facts
from worker.providers.rules_notes import note_in, promote
from worker.providers.wire import (
    AskedAttributed,
    AskedExtraction,
    AskedWithNotes,
    ExtractedNote,
    ExtractionAnswer,
    ExtractionRequest,
    NotePromotionRequest,
    PromotionNote,
    WireMessage,
)
from worker.store.note_types import NoteNeighbor
from worker.testing.in_memory_store import InMemoryStore


def request(text: str, with_notes: bool) -> ExtractionRequest:
    return ExtractionRequest(observed_at="2026-11-22 (Sunday)", summary=None, context=(),
                             messages=(WireMessage(role="user", content=text),),
                             with_notes=with_notes)


def test_notes_off_is_byte_for_byte_the_request_and_answer_without_notes() -> None:
    off = json.loads(request("I live in Oslo.", False).model_dump_json())
    assert "with_notes" not in off
    assert json.loads(request("I live in Oslo.", True).model_dump_json())["with_notes"] is True
    answer = extract_facts(request("I'm considering moving to Porto.", False))
    assert answer.notes == () and "notes" not in answer.model_dump(mode="json")
    # The schema asked for without notes holds facts alone; with them, notes too.
    asked = json_schema_format("fact_extraction", AskedExtraction)["json_schema"]["schema"]
    full = json_schema_format("fact_extraction", ExtractionAnswer)["json_schema"]["schema"]
    assert set(asked["properties"]) == {"facts"}
    assert set(full["properties"]) == {"facts", "notes"} and full["required"] == ["facts", "notes"]
    # An older endpoint's answer without notes reads as none.
    assert parse_answer('{"facts": []}', ExtractionAnswer).notes == ()


@pytest.mark.parametrize(("said", "note"), [
    ("I'm thinking about a kitchen renovation, budget about $40k, timeline unclear.",
     "The user is thinking about a kitchen renovation, budget about $40k, timeline unclear."),
    ("We're considering moving to the US with our kids.",
     "The user is considering moving to the US with their kids."),
    ("So, I'm toying with the idea of learning Korean.",
     "The user is toying with the idea of learning Korean."),
    ("Honestly, I'm still weighing my options for a new job",
     "The user is weighing their options for a new job."),
])
def test_the_rules_read_a_plan_being_weighed_as_a_note(said: str, note: str) -> None:
    found = note_in(said)
    assert found is not None and found.text == note


@pytest.mark.parametrize("said", [
    "Am I thinking about this the right way?", "I'm thinking about it.",
    "I'm considering that.", "I think about Porto a lot.", "I live in Porto.",
    "My sister is considering moving to Porto.", "Should I be considering a move?",
])
def test_nothing_else_is_a_note_for_the_rules(said: str) -> None:
    assert note_in(said) is None


def test_notes_are_kept_once_whitespace_single_and_bounded() -> None:
    answer = ExtractionAnswer(facts=(), notes=tuple(
        ExtractedNote(text=t) for t in ("A  plan.", "A plan", " a plan. ",
                                        *(f"Plan {i}." for i in range(10)))))
    assert [n.text for n in notes_from(answer)] == ["A plan.", *(f"Plan {i}." for i in
                                                                range(MAX_NOTES - 1))]


def _near(note_id: int, text: str, distance: float) -> NoteNeighbor:
    return NoteNeighbor(note_id, text, distance)


def test_a_new_note_against_the_sessions_nearest_note() -> None:
    notes = [CandidateNote("Same words."), CandidateNote("Nearly the same."),
             CandidateNote("Newer wording."), CandidateNote("Another wording of 7."),
             CandidateNote("Something else."), CandidateNote("First in session.")]
    vectors = np.eye(6, dtype=np.float32)
    plan = plan_notes(notes, vectors, [
        _near(1, "same words", 0.4), _near(2, "x", REPEAT_DISTANCE / 2),
        _near(7, "older wording", 0.1), _near(7, "older wording", 0.12),
        _near(8, "far", 0.5), None], model="m", update_distance=0.15)
    assert (plan.added, plan.updated, plan.unchanged) == (3, 1, 2)
    assert [(w.text, w.supersedes) for w in plan.writes] == [
        ("Newer wording.", 7), ("Another wording of 7.", None), ("Something else.", None),
        ("First in session.", None)]
    assert all(w.embedding_model == "m" for w in plan.writes)


def test_promotion_by_the_rules_is_the_newest_notes_text() -> None:
    answer = promote(NotePromotionRequest(observed_at="2026-11-22", notes=(
        PromotionNote(text="The user is considering Porto.", observed_at="2026-11-01"),
        PromotionNote(text="The user is  considering Porto, next year.",
                      observed_at="2026-11-22"))))
    assert answer.fact.text == "The user is considering Porto, next year."
    assert (answer.fact.category, answer.fact.importance) == ("general", 5)


async def test_a_run_keeps_its_notes_apart_from_its_facts() -> None:
    store = InMemoryStore()
    on = SETTINGS.model_copy(update={"notes_enabled": True})
    said = handover(user("I live in Oslo. I'm considering moving to Porto."))
    result = await run_once(context(store, on), said)
    assert (result.outcome, result.added) == ("committed", 1)
    assert [f.text for f in await store.facts("u1")] == ["Lives in Oslo"]
    (note,) = await store.notes("u1")
    assert (note.text, note.source_session_id) == ("The user is considering moving to Porto.",
                                                   "s1")
    # Said again in the session: nothing new; another session: a note of its own.
    again = handover(user("I live in Oslo. I'm considering moving to Porto."), user("ok"),
                     user("I'm considering moving to Porto."))
    await run_once(context(store, on), again)
    assert len(await store.notes("u1")) == 1
    await run_once(context(store, on), handover(user("I'm considering moving to Porto."),
                                                session="s2"))
    assert len(await store.notes("u1")) == 2
    # Notes off: none asked for, none kept.
    off = InMemoryStore()
    await run_once(context(off), said)
    assert await off.notes("u1") == [] and len(await off.facts("u1")) == 1


def test_the_four_extraction_shapes_persons_and_notes_on_and_off() -> None:
    def fields(model: type) -> tuple[set[str], set[str]]:
        schema = json_schema_format("fact_extraction", model)["json_schema"]["schema"]
        fact = schema["properties"]["facts"]["items"]["properties"]
        return set(schema["properties"]), {"about"} & set(fact)

    assert fields(AskedExtraction) == ({"facts"}, set())  # as before either
    assert fields(AskedAttributed) == ({"facts"}, {"about"})  # persons on
    assert fields(AskedWithNotes) == ({"facts", "notes"}, set())  # notes on
    assert fields(ExtractionAnswer) == ({"facts", "notes"}, {"about"})  # both on


def test_a_consideration_written_as_a_fact_is_a_note() -> None:
    """What the 1.5B model answered: "The user is considering buying a dog." as a fact,
    no note."""
    for text in ("The user is considering buying a dog.",
                 "The user is still thinking about learning the cello.",
                 "The user is seriously considering moving to Basel.",
                 "The user is toying with the idea of learning Dutch.",
                 "the user is weighing a move to Halifax."):
        assert states_a_consideration(text), text
    for text in ("The user lives in Oslo.", "The user decided to buy a dog.",
                 "The user's sister is considering a move.", "Considering it, the user stays."):
        assert not states_a_consideration(text), text


def test_moved_notes_come_after_the_answers_own_each_once() -> None:
    own = [CandidateNote("The user is planning a trip, dates open.")]
    moved = with_moved(own, ["The user is considering a dog.", "The user is considering a dog",
                             "The user is planning a trip, dates open."])
    assert [n.text for n in moved] == ["The user is planning a trip, dates open.",
                                       "The user is considering a dog."]
    assert len(with_moved([], [f"The user is considering {i}." for i in range(50)])) \
        == MAX_NOTES
