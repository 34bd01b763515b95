"""Who a fact is about, read from extraction's answer and the fact's own text
(worker.pipeline.mentions): the mistakes the 1.5B model made on the persons' kinds,
each read right, and the user's own facts left the user's."""

from __future__ import annotations

from tests.unit.pipeline.test_attribution import person
from worker.pipeline.attribution import Attributor, attribute
from worker.pipeline.mentions import Mention, implied_mention, mention_in
from worker.store.person_types import ExistingPerson, NewPerson


def test_the_relation_the_text_says_wins_over_the_one_about_copied() -> None:
    """"Mia is my wife now." with Mia known as the girlfriend: the model copied
    "girlfriend" from the request's people and wrote the new relation in the text."""
    assert mention_in("The user's wife Mia is a girlfriend.", "Mia", "girlfriend") \
        == Mention("Mia", "wife")
    assert mention_in("Alex is the user's partner now.", "Alex", "friend") \
        == Mention("Alex", "partner")
    assert mention_in("The user's boss is Nora.", "Nora", "friend") == Mention("Nora", "boss")
    assert mention_in("Alex is my partner now.", "Alex", "friend") == Mention("Alex", "partner")
    assert mention_in("The user's boss is now Nora.", "Nora", "friend") \
        == Mention("Nora", "boss")
    # No relation said of the name: about's stands.
    assert mention_in("Mia loves climbing.", "Mia", "girlfriend") \
        == Mention("Mia", "girlfriend")


def test_a_name_that_is_only_the_relation_is_no_name() -> None:
    assert mention_in("The user's wife is allergic to nuts.", "The user's wife", "wife") \
        == Mention(None, "wife")
    assert mention_in("The user's mom is a nurse.", "my mom", "mother") \
        == Mention(None, "mother")
    assert mention_in("Ana is vegetarian.", "Ana", "sister") == Mention("Ana", "sister")


def test_a_fact_whose_subject_is_a_known_name_is_that_persons() -> None:
    leo = person(1, "Leo", "brother")
    assert implied_mention("Leo is learning Japanese.") == Mention("Leo", None, known_only=True)
    assert Attributor([leo]).resolve(implied_mention("Leo is learning Japanese.")) \
        == ExistingPerson(1)
    # Nobody of that name: the user's, as before persons; never a new person.
    attributor = Attributor([leo])
    assert attributor.resolve(implied_mention("Python is the user's favourite language.")) \
        is None
    assert attributor.writes().create == ()
    for text in ("The user lives in Leeds.", "It rained in Leeds.", "She is a nurse.",
                 "There is a cat."):
        assert Attributor([leo]).resolve(implied_mention(text)) is None, text


def test_a_name_met_earlier_in_the_same_answer_is_known() -> None:
    said = attribute([], [implied_mention("The user's brother Leo works as a nurse."),
                          implied_mention("Leo is learning Japanese.")])
    assert said.about == (NewPerson(1), NewPerson(1)) and said.dropped == 0
