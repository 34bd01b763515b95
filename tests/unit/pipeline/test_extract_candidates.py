"""Reading the extraction answer: what is kept, in which order."""

from __future__ import annotations

from worker.pipeline.extract import MAX_CANDIDATES, candidates_from
from worker.providers.wire import ExtractedFact, ExtractionAnswer


def answer(*texts: str, importance: int = 5) -> ExtractionAnswer:
    return ExtractionAnswer(facts=tuple(
        ExtractedFact(text=t, category="fact", importance=importance) for t in texts))


def texts(out: list) -> list[str]:  # type: ignore[type-arg]
    return [c.text for c in out]


def test_whitespace_is_normalised_and_an_immediate_repeat_dropped() -> None:
    got = candidates_from(answer("Lives  in\nOslo", "lives in oslo.", "Uses Rust"))
    assert texts(got) == ["Lives in Oslo", "Uses Rust"]


def test_a_value_changed_and_changed_back_ends_on_the_last_value() -> None:
    got = candidates_from(answer("Lives in Paris", "Lives in Lyon", "Lives in Paris"))
    assert texts(got)[-1] == "Lives in Paris"
    assert texts(got).index("Lives in Lyon") < len(got) - 1


def test_a_retraction_repeated_after_a_restatement_is_kept_last() -> None:
    got = candidates_from(answer("Has no hobby", "Plays chess", "Has no hobby"))
    assert texts(got)[-1] == "Has no hobby"


def test_stated_retracted_and_stated_again_ends_stated() -> None:
    got = candidates_from(answer("Plays chess", "No longer plays chess", "Plays chess"))
    assert texts(got)[-1] == "Plays chess"


def test_an_over_long_answer_keeps_the_most_important_in_their_order() -> None:
    facts = [ExtractedFact(text=f"Fact {i}", category="fact", importance=1 + i % 10)
             for i in range(30)]
    got = candidates_from(ExtractionAnswer(facts=tuple(facts)))
    assert len(got) == MAX_CANDIDATES
    assert min(c.importance for c in got) >= 4  # ten levels, three facts each: 6 x 3 + 2
    indexes = [int(c.text.split()[1]) for c in got]
    assert indexes == sorted(indexes), "the user's order survives the cut"
