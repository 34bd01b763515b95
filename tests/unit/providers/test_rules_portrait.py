"""The offline rules' portrait (worker.providers.rules_portrait): the facts joined into
sentences about the user, deterministic, within the length asked, nothing added."""

from __future__ import annotations

from worker.providers.rules_portrait import sentence_of, write_portrait
from worker.providers.wire import MAX_PORTRAIT_CHARS, PortraitRequest, ProfileFact


def request(*texts: str, max_words: int = 120) -> PortraitRequest:
    return PortraitRequest(observed_at="2026-12-07 (Monday)", max_words=max_words,
                           facts=tuple(ProfileFact(text=t, category="fact") for t in texts))


def test_each_fact_gets_the_user_as_its_subject() -> None:
    assert sentence_of("Lives in Lisbon") == "The user lives in Lisbon."
    assert sentence_of("Name is Ada") == "The user's name is Ada."
    assert sentence_of("Sister's name is Ana") == "The user's sister's name is Ana."
    assert sentence_of("No longer works at Philips") == "The user no longer works at Philips."
    assert sentence_of("The user teaches maths.") == "The user teaches maths."
    assert sentence_of("Parents live in Oslo") == "The user's parents live in Oslo."
    assert sentence_of("   ") is None


def test_the_portrait_is_the_facts_in_order_and_nothing_else() -> None:
    answer = write_portrait(request("Name is Ada", "Lives in Lisbon", "Likes chess"))
    assert answer.portrait == ("The user's name is Ada. The user lives in Lisbon."
                               " The user likes chess.")
    assert write_portrait(request("Name is Ada", "Lives in Lisbon")) == write_portrait(
        request("Name is Ada", "Lives in Lisbon"))


def test_it_stops_at_a_whole_sentence_within_max_words() -> None:
    answer = write_portrait(request("Lives in Lisbon", "Likes chess", "Uses Go",
                                    max_words=10))
    assert answer.portrait == "The user lives in Lisbon. The user likes chess."
    long = write_portrait(request("Likes " + "very " * 40 + "long walks", max_words=10))
    assert len(long.portrait.split()) == 10


def test_it_stays_within_the_wire() -> None:
    facts = ["Likes " + "x" * 900 for _ in range(10)]
    assert len(write_portrait(request(*facts, max_words=300)).portrait) <= MAX_PORTRAIT_CHARS
