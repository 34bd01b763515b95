"""Who a fact is about, read from extraction's answer and the fact's own text
(worker.pipeline.mentions): the mistakes the 1.5B model made on the persons' kinds,
each read right, and the user's own facts left the user's."""

from __future__ import annotations

from tests.unit.pipeline.test_attribution import person
from worker.pipeline.attribution import Attributor, attribute
from worker.pipeline.mentions import (
    Mention,
    implied_mention,
    mention_in,
    restated,
    said_relation,
)
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


def test_a_fact_written_of_the_user_but_about_someone_the_user_spoke_of_is_retold() -> None:
    # The 1.5B model's answers (docs/persons.md), each beside the user's message.
    assert restated("The user adopted a puppy.", "Liz", ["Liz just adopted a puppy."]) \
        == "Liz adopted a puppy."
    assert restated("The user started a job at a bakery.", "Kian",
                    ["Kian started a job at a bakery."]) == "Kian started a job at a bakery."
    assert restated("The user is allergic to cats.", "Tom",
                    ["My friend Tom said 'I'm allergic to cats'. I love cats."]) \
        == "Tom is allergic to cats."


def test_no_fact_is_retold_where_the_users_words_do_not_say_it_of_that_name() -> None:
    said = ["Liz just adopted a puppy. I bought a new bike."]
    assert restated("The user bought a new bike.", "Liz", said) is None  # another sentence
    assert restated("The user adopted a kitten.", "Liz", said) is None  # not what was said
    assert restated("The user adopted a puppy.", "Tom", said) is None  # not who said it of
    assert restated("The user's sister adopted a puppy.", "Liz", said) is None
    assert restated("The user adopted a puppy.", "Sister", said) is None  # a relation
    assert restated("The user adopted a puppy.", None, said) is None
    # A text that names the person already is the user's words about them: kept as is.
    assert restated("The user helped Liz move.", "Liz", ["I helped Liz move."]) is None


def test_the_relation_the_users_own_words_give_a_name_wins() -> None:
    # The 1.5B model's answer to "Mia is my wife now." (docs/persons.md).
    wrong = mention_in("The user is Mia's girlfriend.", "Mia", "girlfriend")
    assert said_relation(wrong, ["Mia is my wife now."]) == Mention("Mia", "wife")
    assert said_relation(Mention("Sam", "colleague"), ["Sam has become my partner."]) \
        == Mention("Sam", "partner")
    # ... and to "Sam is my partner now.": the text names Sam by his possessive.
    for apostrophe in ("'", "\u2019"):
        answered = mention_in(f"The user is Sam{apostrophe}s partner now.", "Sam", "colleague")
        assert said_relation(answered, ["Sam is my partner now."]) == Mention("Sam", "partner")
    assert said_relation(Mention("Sam", None), ["Sam is my sister-in-law now."]) \
        == Mention("Sam", "sister-in-law")
    # The last said wins; what is said of others, or of someone's relation, does not.
    assert said_relation(Mention("Mia", "wife"), ["Mia is my girlfriend.",
                                                  "Mia is my wife now."]).relation == "wife"
    kept = Mention("Sam", "colleague")
    for said in (["Jo is my partner now."], ["Sam is my friend's partner."],
                 ["Sam is my partner's colleague."], ["Sam met my partner."], []):
        assert said_relation(kept, said) is kept
    assert said_relation(None, ["Mia is my wife now."]) is None
