"""A rename said in conversation (worker.pipeline.mentions.renaming, and the
attribution it drives): "Ana goes by Annie now" renames the one person called Ana,
keeps Ana as an alias, and files the run's other facts about Annie with her; what is
no rename, or whose person cannot be told, renames nobody."""

from __future__ import annotations

import pytest

from tests.unit.pipeline.test_attribution import person
from worker.pipeline.attribution import AMBIGUOUS, Attributor, attribute, mention_in
from worker.pipeline.mentions import implied_mention, renaming
from worker.store.person_types import ExistingPerson, NewPerson, PersonLabel

PEOPLE = [person(1, "Ana", "sister"), person(2, "Kai", "friend", "Kaiser"),
          person(3, "Sam", "friend"), person(4, "Sam", "cousin")]


@pytest.mark.parametrize(("text", "renamed"), [
    ("The user's sister Ana goes by Annie now.", ("Ana", "Annie")),
    ("The user's sister, Ana, now goes by Annie.", ("Ana", "Annie")),
    ("Kai changed his name to Kian last month.", ("Kai", "Kian")),
    ("Elizabeth wants everyone to call her Liz now.", ("Elizabeth", "Liz")),
    ("The user's cousin Elizabeth prefers to be called Liz.", ("Elizabeth", "Liz")),
    ("Ana is now called Annie.", ("Ana", "Annie")),
    ("The user's sister Ana is now Annie.", ("Ana", "Annie")),  # the 1.5B model's words
    ("Tom is now known as Tommy.", ("Tom", "Tommy")),
    ("Kai now calls himself Kian.", ("Kai", "Kian")),
    ("Ana\u2019s new name is Annie.", ("Ana", "Annie")),
])
def test_a_rename_is_read_with_its_old_and_new_name(text: str, renamed: tuple[str, str]
                                                    ) -> None:
    assert renaming(text)[:2] == renamed


@pytest.mark.parametrize("text", [
    "The user goes by Sam now.",  # the user's own name: no person
    "User prefers to be called Sam.",
    "The user's sister is called Ana.",  # who the sister is: a naming, not a rename
    "Ana is named after her grandmother Rosa.",
    "Ana is called Annie by her friends.",  # a nickname among others, not her name now
    "Ana goes by bus to work.",
    "Mia is now the user's wife.",
    "Tom is now Head of Sales.",
    "Ana goes by Ana now.",
    "She goes by Annie now.",  # who "she" is: only "about" can say
])
def test_what_is_no_rename_renames_nobody(text: str) -> None:
    assert renaming(text) is None


def test_a_pronoun_is_the_person_about_names() -> None:
    assert renaming("She goes by Annie now.", "Ana") == ("Ana", "Annie", True)
    assert mention_in("She goes by Annie now.", "Ana", "sister").formerly == "Ana"


def test_the_one_person_called_by_the_old_name_is_renamed_and_keeps_it_as_an_alias() -> None:
    said = "The user's sister Ana goes by Annie now."
    attributor = Attributor(PEOPLE)
    assert attributor.resolve(mention_in(said, "Annie", "sister")) == ExistingPerson(1)
    (relabel,) = attributor.writes().relabel
    assert (relabel.person_id, relabel.label) == (1, PersonLabel("Annie", "sister", ("Ana",)))
    # The new name finds her from then on, and so does the old one.
    assert attributor.resolve(mention_in("Annie moved to Lyon.", "Annie", None)) \
        == ExistingPerson(1)
    assert attributor.resolve(mention_in("Ana moved to Lyon.", "Ana", None)) \
        == ExistingPerson(1)
    assert attributor.writes().create == ()


def test_a_rename_by_an_alias_keeps_the_display_name_as_an_alias_too() -> None:
    attributor = Attributor(PEOPLE)
    assert attributor.resolve(mention_in("Kaiser now calls himself Kian.", None, None)) \
        == ExistingPerson(2)
    (relabel,) = attributor.writes().relabel
    assert relabel.label == PersonLabel("Kian", "friend", ("Kaiser", "Kai"))


def test_a_rename_told_again_changes_nothing_more() -> None:
    renamed = [person(1, "Annie", "sister", "Ana")]
    attributor = Attributor(renamed)
    assert attributor.resolve(mention_in("Ana goes by Annie now.", "Ana", "sister")) \
        == ExistingPerson(1)
    assert attributor.writes().relabel == ()


def test_an_old_name_two_persons_answer_to_is_unclear_unless_the_relation_tells() -> None:
    assert Attributor(PEOPLE).resolve(
        mention_in("Sam goes by Samuel now.", "Sam", None)) is AMBIGUOUS
    attributor = Attributor(PEOPLE)
    assert attributor.resolve(mention_in("The user's cousin Sam goes by Samuel now.",
                                         "Sam", "cousin")) == ExistingPerson(4)
    assert attributor.writes().relabel[0].label.display_name == "Samuel"


def test_a_rename_of_someone_unknown_makes_them_with_both_names() -> None:
    attributor = Attributor(PEOPLE)
    assert isinstance(attributor.resolve(
        mention_in("The user's aunt Rosa goes by Rosie now.", "Rosie", "aunt")), NewPerson)
    assert attributor.writes().create == (PersonLabel("Rosie", "aunt", ("Rosa",)),)
    # Implied by the text alone (no "about"), an unknown person's rename is no one's.
    assert Attributor(PEOPLE).resolve(implied_mention("Rosa goes by Rosie now.")) is None


def test_a_rename_is_read_before_the_other_facts_of_its_run() -> None:
    texts = ["Annie got a puppy.", "Ana goes by Annie now."]
    mentions = [mention_in(texts[0], "Annie", None), mention_in(texts[1], "Ana", "sister")]
    done = attribute(PEOPLE, mentions)
    assert (done.kept, done.about, done.renamed) == ((0,), (ExistingPerson(1),), 1)
    assert done.writes.create == ()


def test_a_text_that_says_only_the_rename_is_no_fact_but_one_that_says_more_is() -> None:
    texts = ["Kai changed his name to Kian last month.", "Kian plays the cello.",
             "The user's sister Ana goes by Annie now and lives in Lyon."]
    mentions = [mention_in(texts[0], "Kai", "friend"), mention_in(texts[1], "Kian", None),
                mention_in(texts[2], "Annie", "sister")]
    done = attribute(PEOPLE, mentions)
    assert (done.kept, done.renamed, done.dropped) == ((1, 2), 1, 0)
    assert done.about == (ExistingPerson(2), ExistingPerson(1))
    assert [r.label.display_name for r in done.writes.relabel] == ["Annie", "Kian"]
    # Implied by the text alone, a rename of someone no one answers to renames nobody
    # and is kept as the user's, as any text whose subject is an unknown name (the user
    # may be telling their own: "Priya goes by Pri now").
    alone = attribute(PEOPLE, [implied_mention("Rosa goes by Rosie now.")])
    assert (alone.kept, alone.renamed, alone.writes.create) == ((0,), 0, ())
