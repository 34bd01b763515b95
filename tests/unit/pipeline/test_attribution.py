"""Who a candidate fact is about (worker.pipeline.attribution): a person found by name,
alias or relation, a relation changed, a name learned, a person met twice in one run
made once, and an unclear mention left to no one."""

from __future__ import annotations

from datetime import UTC, datetime

from worker.pipeline.attribution import (
    AMBIGUOUS,
    Attributor,
    Mention,
    attribute,
    implied_mention,
    mention_in,
)
from worker.store.person_types import ExistingPerson, NewPerson, PersonLabel, PersonRecord

AT = datetime(2026, 3, 2, tzinfo=UTC)


def person(pid: int, name: str | None, relation: str | None,
           *aliases: str) -> PersonRecord:
    return PersonRecord(id=pid, user_id="u", display_name=name, relation=relation,
                        aliases=aliases, created_from="conversation", source_session_id="s",
                        created_at=AT, label_id=pid, labelled_at=AT,
                        label_set_by="conversation")


KNOWN = [person(1, "Ana", "sister", "Annie"), person(2, None, "wife"),
         person(3, "Sam", "friend"), person(4, "Jo", "friend")]


def test_a_name_or_an_alias_finds_the_person_whatever_the_case() -> None:
    attributor = Attributor(KNOWN)
    assert attributor.resolve(Mention("ana", None)) == ExistingPerson(1)
    assert attributor.resolve(Mention("Annie", "sister")) == ExistingPerson(1)
    assert attributor.writes().create == () and attributor.writes().relabel == ()


def test_the_user_is_no_mention() -> None:
    assert Attributor(KNOWN).resolve(None) is None


def test_a_relation_alone_finds_its_one_person_and_is_unclear_among_several() -> None:
    attributor = Attributor(KNOWN)
    assert attributor.resolve(Mention(None, "Wife")) == ExistingPerson(2)
    assert attributor.resolve(Mention(None, "friend")) is AMBIGUOUS
    assert attributor.resolve(Mention(None, None)) is AMBIGUOUS


def test_a_name_said_for_a_nameless_wife_is_hers_and_relabels_her() -> None:
    attributor = Attributor(KNOWN)
    assert attributor.resolve(Mention("Sarah", "wife")) == ExistingPerson(2)
    (relabel,) = attributor.writes().relabel
    assert (relabel.person_id, relabel.label) == (2, PersonLabel("Sarah", "wife", ()))
    # ... but a nameless friend is one of many: a new friend is a new person.
    assert isinstance(Attributor([person(5, None, "friend")]).resolve(
        Mention("Tom", "friend")), NewPerson)


def test_a_changed_relation_relabels_the_person_found_by_name() -> None:
    attributor = Attributor([person(7, "Mia", "girlfriend")])
    assert attributor.resolve(Mention("Mia", "wife")) == ExistingPerson(7)
    assert attributor.writes().relabel[0].label == PersonLabel("Mia", "wife", ())


def test_a_new_person_met_twice_in_one_run_is_made_once() -> None:
    done = attribute(KNOWN, [Mention("Tom", "boss"), None, Mention("tom", None),
                             Mention(None, "boss"), Mention(None, None)])
    assert done.about == (NewPerson(1), None, NewPerson(1), NewPerson(1))
    assert done.kept == (0, 1, 2, 3) and done.dropped == 1
    assert done.writes.create == (PersonLabel("Tom", "boss", ()),)


def test_synonyms_of_a_relation_are_one_relation() -> None:
    attributor = Attributor([person(8, None, "mother")])
    assert attributor.resolve(Mention(None, "mom")) == ExistingPerson(8)
    # A relation word given as a name is read as the relation.
    assert Attributor([person(9, None, "wife")]).resolve(Mention("wife", None)) \
        == ExistingPerson(9)


def test_a_name_that_two_persons_answer_to_is_unclear_unless_the_relation_tells() -> None:
    twins = [person(1, "Alex", "brother"), person(2, "Alex", "colleague")]
    assert Attributor(twins).resolve(Mention("Alex", None)) is AMBIGUOUS
    assert Attributor(twins).resolve(Mention("Alex", "colleague")) == ExistingPerson(2)


def test_an_unusable_label_costs_the_label_not_the_fact() -> None:
    assert Attributor([]).resolve(Mention("x" * 500, "sister")) == NewPerson(1)


def test_the_user_named_as_a_person_is_the_user() -> None:
    """What the 1.5B model answered for an introduction: every fact "about" the user
    under their own name with the relation "self"."""
    assert mention_in("The user lives in Leeds.", "Priya", "self") is None
    assert mention_in("The user's name is Priya.", "Priya", "Self") is None
    assert mention_in("The user lives in Leeds.", None, "me") is None


def test_a_fact_of_the_user_about_someone_else_is_nobodys() -> None:
    """"My friend Tom said 'I'm allergic to cats'" gave "The user is allergic to cats."
    about Tom: the text or "about" is wrong; neither is kept as the user's."""
    for text, name, relation in (("The user is allergic to cats.", "Tom", "friend"),
                                 ("Der Nutzer wohnt in Graz.", None, "Bruder"),
                                 ("The user lives in Leeds.", None, None)):
        mention = mention_in(text, name, relation)
        assert mention == Mention(None, None), text
        assert Attributor(KNOWN).resolve(mention) is AMBIGUOUS


def test_a_fact_that_names_its_person_keeps_the_mention() -> None:
    sister = Mention("Ana", "sister")
    assert mention_in("The user's sister Ana is vegetarian.", "Ana", "sister") == sister
    assert mention_in("Ana is vegetarian.", "Ana", "sister") == sister
    assert mention_in("The user visits Ana on Sundays.", "Ana", "sister") == sister
    assert mention_in("The user's mom is a nurse.", None, "mother") == Mention(None, "mother")
    # The subject is not the user: extraction's word stands, even when it names no one.
    assert mention_in("She works as a dentist.", None, "sister") == Mention(None, "sister")
    assert mention_in("The user's brother-in-law skis.", None, None) == Mention(None, None)


def test_a_name_that_is_the_relation_is_no_name() -> None:
    assert mention_in("The user's sister lives in Toronto.", "Sister", "sister") \
        == Mention(None, "sister")
    assert mention_in("The user's mom is a nurse.", "Mom", "mother") == Mention(None, "mother")


def test_a_fact_written_about_a_relation_is_theirs_though_about_is_null() -> None:
    """What the 1.5B model answered: "about" filled for one of a sister's facts, null
    for the next one."""
    assert implied_mention("The user's sister works as a dentist.") == Mention(None, "sister")
    assert implied_mention("The user's wife, Ana, is a pilot.") == Mention("Ana", "wife")
    assert implied_mention("The user's brother-in-law Tom skis.") \
        == Mention("Tom", "brother-in-law")
    assert mention_in("The user's sister works as a dentist.", "Priya", "self") \
        == Mention(None, "sister")


def test_who_the_users_relation_is_stays_the_users_fact() -> None:
    for text in ("The user's partner is Alex.", "The user's partner is called Alex.",
                 "The user's wife's name is Sarah.", "The user's boss is named Tom.",
                 "The user's name is Priya.", "The user lives in Leeds.",
                 "The user's sisters are twins.", "The user's favourite colour is red."):
        assert implied_mention(text) is None, text
