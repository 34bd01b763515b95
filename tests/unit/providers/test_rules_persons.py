"""The offline rules provider on facts about the people in a user's life
(worker.providers.rules_persons), while the request carries "people"."""

from __future__ import annotations

import pytest

from worker.providers.rules import extract_facts
from worker.providers.wire import ExtractionRequest, KnownPerson, WireMessage


def facts(text: str, *people: KnownPerson,
          persons_on: bool = True) -> list[tuple[str, str | None, str | None] | str]:
    request = ExtractionRequest(
        observed_at="2026-03-02 (Monday)", summary=None, context=(),
        messages=(WireMessage(role="user", content=text),),
        people=people if persons_on else None)
    return [(f.text, f.about.name, f.about.relation) if f.about else f.text
            for f in extract_facts(request).facts]


@pytest.mark.parametrize(("said", "expected"), [
    ("My sister Ana is vegetarian.", ("The user's sister Ana is vegetarian", "Ana", "sister")),
    ("My wife is allergic to nuts.", ("The user's wife is allergic to nuts", None, "wife")),
    ("My boss Tom moved to Berlin.", ("The user's boss Tom moved to Berlin", "Tom", "boss")),
    ("Mia is my wife now.", ("Mia is the user's wife", "Mia", "wife")),
])
def test_a_fact_about_someone_is_theirs(said: str, expected: tuple[str, str, str]) -> None:
    assert facts(said) == [expected]


def test_the_users_own_facts_stay_the_users_beside_them() -> None:
    assert facts("My manager Dana is obsessed with Haskell and uses it for everything."
                 " I use Go.") == [
        ("The user's manager Dana is obsessed with Haskell", "Dana", "manager"), "Uses Go"]


def test_a_known_name_alone_is_that_person() -> None:
    ana = KnownPerson(name="Ana", relation="sister", aliases=("Annie",))
    assert facts("Annie is learning Spanish.", ana) == [
        ("Annie is learning Spanish", "Ana", "sister")]
    assert facts("Bea is learning Spanish.", ana) == [], "an unknown name is no one's fact"


def test_a_pronoun_is_read_after_one_person_and_left_after_several() -> None:
    assert facts("My sister lives in Toronto and she works as a dentist.") == [
        ("The user's sister lives in Toronto", None, "sister"),
        ("The user's sister works as a dentist", None, "sister")]
    both = facts("My friend Sam likes chess. My friend Jo plays golf. He also plays the piano.")
    assert not [f for f in both if "piano" in str(f)]


def test_a_quote_is_nobodys_fact_and_never_the_users() -> None:
    assert facts("My friend Tom said 'I'm allergic to cats' when he visited."
                 " I'm not, I love cats.") == ["Likes cats"]


def test_naming_the_users_partner_stays_the_users_relationship_fact() -> None:
    assert facts("My wife's name is Sarah.") == ["Wife's name is Sarah"]
    assert facts("My partner is Alex.") == ["Partner's name is Alex"]


def test_persons_off_read_as_before() -> None:
    assert facts("My sister Ana is vegetarian.", persons_on=False) == [
        "Sister Ana is vegetarian"]
